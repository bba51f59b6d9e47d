package cuda

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DriverLibrary is the file name the driver is loaded by. HIR_CUDA_LIBCUDA
// overrides it (a full path, or a bogus one to test the no-driver path).
const DriverLibrary = "libcuda.so.1"

// driver is the loaded libcuda: one function pointer per entry point.
// Entry points are called through purego.SyscallN with every argument as a
// uintptr; Go memory handed to C is passed as uintptr(unsafe.Pointer(...))
// directly in the call (see call), which keeps it alive and unmoved for
// the call's duration.
type driver struct {
	path   string
	handle uintptr
	mu     sync.Mutex
	syms   map[string]uintptr
}

var (
	defaultDriverOnce sync.Once
	defaultDriver     *driver
	defaultDriverErr  error
)

// loadDriver opens the process's driver once.
func loadDriver() (*driver, error) {
	defaultDriverOnce.Do(func() {
		path := DriverLibrary
		if p := os.Getenv("HIR_CUDA_LIBCUDA"); p != "" {
			path = p
		}
		defaultDriver, defaultDriverErr = openDriver(path)
	})
	return defaultDriver, defaultDriverErr
}

func openDriver(path string) (*driver, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %v", path, err)
	}
	return &driver{path: path, handle: h, syms: map[string]uintptr{}}, nil
}

// sym resolves the first of names the library exports (the _v2 entry
// point first where cuda.h maps the plain name to it).
func (d *driver) sym(names ...string) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.syms[names[0]]; ok {
		return p, nil
	}
	for _, n := range names {
		if p, err := purego.Dlsym(d.handle, n); err == nil && p != 0 {
			d.syms[names[0]] = p
			return p, nil
		}
	}
	return 0, fmt.Errorf("%s does not export %s", d.path, names[0])
}

// call runs a driver entry point returning CUresult and turns a failure
// into *Error. name is the entry point as the error shows it; the symbol
// looked up is name itself unless alt lists the exported names to try.
//
//go:uintptrescapes
func (d *driver) call(name string, args ...uintptr) error {
	p, err := d.sym(symbolNames(name)...)
	if err != nil {
		return &Error{Call: name, Code: errNotSupported, Name: "symbol not found", Desc: err.Error()}
	}
	r1, _, _ := purego.SyscallN(p, args...)
	res := Result(int32(r1))
	if res == success {
		return nil
	}
	return d.errorFor(name, res)
}

// symbolNames lists the exported names for an entry point: the versioned
// ones that cuda.h's macros map the plain name to, newest first.
func symbolNames(name string) []string {
	switch name {
	case "cuMemAlloc", "cuMemFree", "cuMemGetInfo", "cuDeviceTotalMem", "cuMemHostGetDevicePointer",
		"cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8",
		"cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuStreamDestroy", "cuEventDestroy",
		"cuModuleGetGlobal", "cuCtxPushCurrent", "cuCtxPopCurrent":
		return []string{name + "_v2", name}
	case "cuEventElapsedTime":
		return []string{name + "_v2", name}
	}
	return []string{name}
}

// errorFor builds the error for a failed call, naming the code through
// cuGetErrorName (and cuGetErrorString) when the driver has them.
func (d *driver) errorFor(call string, res Result) error {
	e := &Error{Call: call, Code: res, Name: resultName(res)}
	if p, err := d.sym("cuGetErrorName"); err == nil {
		var s *byte
		if r, _, _ := purego.SyscallN(p, uintptr(res), uintptr(unsafe.Pointer(&s))); r == 0 && s != nil {
			e.Name = goString(s)
		}
	}
	if p, err := d.sym("cuGetErrorString"); err == nil {
		var s *byte
		if r, _, _ := purego.SyscallN(p, uintptr(res), uintptr(unsafe.Pointer(&s))); r == 0 && s != nil {
			e.Desc = goString(s)
		}
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString is s with a terminating NUL, for passing to C.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// ---- thin wrappers, one per entry point used more than once ----

func (d *driver) init() error { return d.call("cuInit", 0) }

func (d *driver) driverVersion() (int, error) {
	var v int32
	err := d.call("cuDriverGetVersion", uintptr(unsafe.Pointer(&v)))
	return int(v), err
}

func (d *driver) deviceCount() (int, error) {
	var n int32
	err := d.call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

func (d *driver) deviceGet(ordinal int) (int32, error) {
	var dev int32
	err := d.call("cuDeviceGet", uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return dev, err
}

func (d *driver) deviceName(dev int32) (string, error) {
	buf := make([]byte, 256)
	if err := d.call("cuDeviceGetName", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev)); err != nil {
		return "", err
	}
	return goString(&buf[0]), nil
}

func (d *driver) attribute(attr int, dev int32) (int, error) {
	var v int32
	err := d.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v), err
}

func (d *driver) totalMem(dev int32) (uint64, error) {
	var n uint64
	err := d.call("cuDeviceTotalMem", uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, err
}

func (d *driver) memGetInfo() (free, total uint64, err error) {
	err = d.call("cuMemGetInfo", uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return
}

func (d *driver) setCurrent(ctx uintptr) error { return d.call("cuCtxSetCurrent", ctx) }

func (d *driver) ctxSynchronize() error { return d.call("cuCtxSynchronize") }

func (d *driver) memCreate(size uint64, prop *memAllocationProp) (uint64, error) {
	var h uint64
	err := d.call("cuMemCreate", uintptr(unsafe.Pointer(&h)), uintptr(size), uintptr(unsafe.Pointer(prop)), 0)
	return h, err
}

func (d *driver) memRelease(h uint64) error { return d.call("cuMemRelease", uintptr(h)) }

func (d *driver) granularity(prop *memAllocationProp, option int) (uint64, error) {
	var g uint64
	err := d.call("cuMemGetAllocationGranularity", uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(prop)), uintptr(option))
	return g, err
}

func (d *driver) exportPosixFD(h uint64) (int, error) {
	var fd int32 = -1
	err := d.call("cuMemExportToShareableHandle", uintptr(unsafe.Pointer(&fd)), uintptr(h), handleTypePosix, 0)
	return int(fd), err
}

func (d *driver) exportFabric(h uint64) (memFabricHandle, error) {
	var fh memFabricHandle
	err := d.call("cuMemExportToShareableHandle", uintptr(unsafe.Pointer(&fh)), uintptr(h), handleTypeFabric, 0)
	return fh, err
}

// importPosixFD imports an exported allocation; the fd stays the caller's
// to close (the driver keeps its own reference).
func (d *driver) importPosixFD(fd int) (uint64, error) {
	var h uint64
	// The POSIX fd travels in the void* argument by value.
	err := d.call("cuMemImportFromShareableHandle", uintptr(unsafe.Pointer(&h)), uintptr(fd), handleTypePosix)
	return h, err
}

func (d *driver) importFabric(fh *memFabricHandle) (uint64, error) {
	var h uint64
	err := d.call("cuMemImportFromShareableHandle", uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(fh)), handleTypeFabric)
	return h, err
}

func (d *driver) addressReserve(size, align uint64) (uint64, error) {
	var p uint64
	err := d.call("cuMemAddressReserve", uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(align), 0, 0)
	return p, err
}

func (d *driver) addressFree(p, size uint64) error {
	return d.call("cuMemAddressFree", uintptr(p), uintptr(size))
}

func (d *driver) memMap(p, size uint64, h uint64) error {
	return d.call("cuMemMap", uintptr(p), uintptr(size), 0, uintptr(h), 0)
}

func (d *driver) memUnmap(p, size uint64) error {
	return d.call("cuMemUnmap", uintptr(p), uintptr(size))
}

func (d *driver) setAccess(p, size uint64, device int32) error {
	desc := memAccessDesc{Location: memLocation{Type: memLocationTypeDevice, ID: device}, Flags: memAccessFlagsProtReadWrite}
	return d.call("cuMemSetAccess", uintptr(p), uintptr(size), uintptr(unsafe.Pointer(&desc)), 1)
}
