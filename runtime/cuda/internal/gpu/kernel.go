package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/cu"
)

// Module is a loaded cubin (cuModuleLoadData).
type Module struct {
	dev    *Device
	h      uintptr
	mu     sync.Mutex
	closed bool
}

// Function is a kernel of a loaded module.
type Function struct {
	Name string
	mod  *Module
	H    uintptr
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// LoadModule loads a cubin or PTX image into the device's context.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: rank %d: empty module image", d.Opts.Rank)
	}
	m := &Module{dev: d}
	if err := d.WithCtx(func() error {
		return d.Drv.ModuleLoadData.Call2(uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&image[0])))
	}); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.Opts.Rank, err)
	}
	d.liveModules.Add(1)
	return m, nil
}

// Function looks a kernel up by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{Name: name, mod: m}
	cname := cu.CString(name)
	if err := m.dev.WithCtx(func() error {
		return m.dev.Drv.ModuleGetFunction.Call3(uintptr(unsafe.Pointer(&f.H)), m.h, uintptr(unsafe.Pointer(&cname[0])))
	}); err != nil {
		return nil, fmt.Errorf("cuda: kernel %q: %w", name, err)
	}
	return f, nil
}

// Unload unloads the module (its functions become invalid).
func (m *Module) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.dev.liveModules.Add(-1)
	return m.dev.WithCtx(func() error { return m.dev.Drv.ModuleUnload.Call1(m.h) })
}

// kernelArg is one argument's bytes as the kernel receives it by value.
func kernelArg(a any) ([]byte, error) {
	le := binary.LittleEndian
	switch v := a.(type) {
	case int32:
		return le.AppendUint32(nil, uint32(v)), nil
	case uint32:
		return le.AppendUint32(nil, v), nil
	case int64:
		return le.AppendUint64(nil, uint64(v)), nil
	case uint64:
		return le.AppendUint64(nil, v), nil
	case int:
		return le.AppendUint64(nil, uint64(v)), nil
	case float32:
		return le.AppendUint32(nil, math.Float32bits(v)), nil
	case float64:
		return le.AppendUint64(nil, math.Float64bits(v)), nil
	case runtime.Buffer:
		b, ok := v.(*Buffer)
		if !ok {
			return nil, fmt.Errorf("buffer %T of another backend", v)
		}
		return le.AppendUint64(nil, b.Ptr), nil
	case runtime.Tensor:
		b, ok := v.Buf.(*Buffer)
		if !ok {
			return nil, fmt.Errorf("tensor on a buffer %T of another backend", v.Buf)
		}
		return le.AppendUint64(nil, b.Ptr+uint64(v.Offset)), nil
	case []byte: // a struct passed by value, laid out by the caller
		return append([]byte(nil), v...), nil
	}
	return nil, fmt.Errorf("unsupported kernel argument type %T", a)
}

// LaunchFunction launches f on stream s (nil: the default stream) with
// args passed by value: int32, uint32, int64, uint64, int, float32,
// float64, a runtime.Buffer or runtime.Tensor (its device address), or
// []byte holding a struct laid out as the kernel declares it.
func (d *Device) LaunchFunction(f *Function, grid, block Dim3, sharedBytes uint32, rs runtime.Stream, args ...any) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	// Each argument lives in its own Go allocation; params holds pointers
	// to them, as cuLaunchKernel's void** kernelParams expects. The
	// allocations are referenced from params, so the GC keeps them alive
	// (and Go's heap never moves) until the call returns.
	vals := make([][]byte, len(args))
	params := make([]unsafe.Pointer, len(args)+1)
	for i, a := range args {
		if vals[i], err = kernelArg(a); err != nil {
			return fmt.Errorf("cuda: kernel %s argument %d: %w", f.Name, i, err)
		}
		if len(vals[i]) == 0 {
			vals[i] = make([]byte, 1)
		}
		params[i] = unsafe.Pointer(&vals[i][0])
	}
	err = d.WithCtx(func() error {
		return d.Drv.LaunchKernel.Call11(f.H,
			uintptr(grid.X), uintptr(max(grid.Y, 1)), uintptr(max(grid.Z, 1)),
			uintptr(block.X), uintptr(max(block.Y, 1)), uintptr(max(block.Z, 1)),
			uintptr(sharedBytes), s.H, uintptr(unsafe.Pointer(&params[0])), 0)
	})
	if err != nil {
		return fmt.Errorf("cuda: rank %d: launch %s: %w", d.Opts.Rank, f.Name, err)
	}
	return nil
}

// Programmatic dependent launch (sm_90 and later, CUDA 12): a kernel
// launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION may
// start before the kernel ahead of it on the stream has ended, once that
// one's blocks have all said so (griddepcontrol.launch_dependents); it
// must wait (griddepcontrol.wait) before it touches memory, which holds
// it until the kernel ahead has ended and its writes are visible. The
// stream's order is kept; what is saved is the next kernel's launch, a
// microsecond or so a kernel boundary, in eager streams and in graphs
// (capture records the edge as programmatic). Only kernels that begin
// with that wait are launched so: the runtime's own .cu kernels
// (pdl_begin) and the code generator's (hir_pdl_begin).
const (
	launchAttrProgrammaticStreamSerialization = 6 // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
)

// launchConfig is CUlaunchConfig with its one attribute beside it.
type launchConfig struct {
	grid, block [3]uint32
	shared      uint32
	_           uint32
	stream      uintptr
	attrs       *launchAttr
	numAttrs    uint32
	_           uint32
	attr        launchAttr
}

// launchAttr is CUlaunchAttribute: an id, then a 64-byte value union.
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// launchConfigs recycles the configs, so a launch allocates nothing.
var launchConfigs = sync.Pool{New: func() any {
	c := new(launchConfig)
	c.attr.id = launchAttrProgrammaticStreamSerialization
	c.attr.value[0] = 1 // programmaticStreamSerializationAllowed
	c.attrs = &c.attr
	c.numAttrs = 1
	return c
}}

// LaunchOwn launches one of the runtime's own kernels (fn, which begins
// with the programmatic-launch wait) on stream s with params, a
// cuLaunchKernel kernelParams array; the caller has the context current.
// It launches with programmatic dependent launch where the device has
// compute capability 9.0 or later, the driver cuLaunchKernelEx, and
// Options.NoPDL is off (Device.pdl, set by Open).
func (d *Device) LaunchOwn(fn uintptr, grid, block Dim3, sharedBytes uint32, s uintptr, params unsafe.Pointer) error {
	if !d.pdl {
		return d.Drv.LaunchKernel.Call11(fn,
			uintptr(grid.X), uintptr(max(grid.Y, 1)), uintptr(max(grid.Z, 1)),
			uintptr(block.X), uintptr(max(block.Y, 1)), uintptr(max(block.Z, 1)),
			uintptr(sharedBytes), s, uintptr(params), 0)
	}
	c := launchConfigs.Get().(*launchConfig)
	c.grid = [3]uint32{grid.X, max(grid.Y, 1), max(grid.Z, 1)}
	c.block = [3]uint32{block.X, max(block.Y, 1), max(block.Z, 1)}
	c.shared, c.stream = sharedBytes, s
	err := d.Drv.LaunchKernelEx.Call4(uintptr(unsafe.Pointer(c)), fn, uintptr(params), 0)
	launchConfigs.Put(c)
	return err
}
