package cuda

import (
	"errors"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	goruntime "runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// Compute kernels: a fusion, pointwise op or reduction becomes the CUDA C
// of codegen.Fusion, compiled by NVRTC for the device's sm_XY through the
// kernel cache (kernelcache.go) and launched with codegen's grid, block
// and argument layout. matmul runs through cuBLAS (cublas.go) where it
// loads, else as codegen's tiled kernel.

// computeState is what a device keeps for compute kernels.
type computeState struct {
	blasOnce sync.Once
	blasH    *blasHandle
	blasErr  error
}

// Kernel implementations, as KernelImpl reports them.
const (
	ImplGenerated = "generated" // codegen.Fusion through NVRTC
	ImplCUBLAS    = "cublas"    // matmul through cublasGemmEx
	ImplTiled     = "tiled"     // matmul as codegen.Matmul through NVRTC
)

// computeKernel is a compiled compute op.
type computeKernel struct {
	name            string
	code            ir.Opcode
	pos             ir.Pos
	inputs, outputs []runtime.TensorShape
	impl            string
	note            string // why matmul did not use cuBLAS

	gen    *codegen.Kernel // generated kernels (ImplGenerated, ImplTiled)
	params *kernelParams   // gen's parameter block, reused by every launch
	fn     *gpu.Function
	from   string // where the image came from: memory, disk or nvrtc

	blas *blasHandle // ImplCUBLAS
	mm   struct {
		batch, m, k, n int64
		bBatched       bool
		// accumulate: matmul accumulate=true; its inputs are a, b and
		// the destination, which cuBLAS reads in place (beta = 1)
		accumulate bool
	}
}

var _ runtime.Kernel = (*computeKernel)(nil)

func (k *computeKernel) Name() string { return k.name }

// KernelImpl says what runs a kernel the cuda runtime compiled (ImplGenerated,
// ImplCUBLAS or ImplTiled), where its image came from (memory, disk, nvrtc;
// empty for cuBLAS) and, for a tiled matmul, why cuBLAS was not used.
func KernelImpl(k runtime.Kernel) (impl, from, note string) {
	ck, ok := k.(*computeKernel)
	if !ok {
		return "", "", ""
	}
	return ck.impl, ck.from, ck.note
}

// KernelSource is the CUDA C of a kernel the cuda runtime compiled (empty
// for cuBLAS).
func KernelSource(k runtime.Kernel) string {
	if ck, ok := k.(*computeKernel); ok && ck.gen != nil {
		return ck.gen.Source
	}
	return ""
}

func codegenShapes(ts []runtime.TensorShape) []codegen.Shape {
	out := make([]codegen.Shape, len(ts))
	for i, t := range ts {
		out[i] = codegen.Shape(t)
	}
	return out
}

func cloneShapes(ts []runtime.TensorShape) []runtime.TensorShape {
	out := make([]runtime.TensorShape, len(ts))
	for i, t := range ts {
		out[i] = runtime.TensorShape{DType: t.DType, Shape: append([]int64(nil), t.Shape...)}
	}
	return out
}

// Compile prepares the kernel of a compute op over the spec's local
// shapes. Unsupported ops, dtypes and shapes are reported by codegen with
// the op's position before anything is compiled; an NVRTC failure carries
// the compiler's log and the path of the generated source.
func (d *Device) Compile(spec *runtime.KernelSpec) (runtime.Kernel, error) {
	if spec == nil || spec.Op == nil {
		return nil, fmt.Errorf("cuda: rank %d: compile: no op", d.Opts.Rank)
	}
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	op := spec.Op
	k := &computeKernel{code: op.Code, pos: op.Pos, inputs: cloneShapes(spec.Inputs), outputs: cloneShapes(spec.Outputs)}
	ins, outs := codegenShapes(spec.Inputs), codegenShapes(spec.Outputs)
	if op.Code == ir.OpMatmul {
		return d.compileMatmul(k, ins, outs, op.ReadsDestination())
	}
	gen, err := codegen.FusionTuned(op, ins, outs, codegen.Tuning{Unroll: d.Tune.CodegenUnroll, BlocksPerSM: d.Tune.CodegenBlocksPerSM, ScalarColumns: d.Tune.CodegenScalarColumns, ScalarRows: d.Tune.CodegenScalarRows, Capped: d.Tune.CodegenCapped})
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: compile %s at %s: %w", d.Opts.Rank, op.Code, op.Pos, err)
	}
	return d.finishGenerated(k, gen, ImplGenerated)
}

func (d *Device) finishGenerated(k *computeKernel, gen *codegen.Kernel, impl string) (*computeKernel, error) {
	lk, err := d.LoadKernel(gen.Source, gen.Name, codegen.CompileOptions())
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: compile %s at %s: %w", d.Opts.Rank, k.code, k.pos, err)
	}
	params, err := newKernelParams(gen, d.Props.Multiprocessors)
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: compile %s at %s: %w", d.Opts.Rank, k.code, k.pos, err)
	}
	k.gen, k.params, k.fn, k.from, k.name, k.impl = gen, params, lk.Fn, lk.From, gen.Name, impl
	return k, nil
}

// compileMatmul picks cuBLAS, or the tiled kernel when cuBLAS is not
// loadable, cannot take the problem, or HIR_CUDA_MATMUL=tiled.
func (d *Device) compileMatmul(k *computeKernel, ins, outs []codegen.Shape, accumulate bool) (runtime.Kernel, error) {
	fail := func(err error) (runtime.Kernel, error) {
		return nil, fmt.Errorf("cuda: rank %d: compile matmul at %s: %w", d.Opts.Rank, k.pos, err)
	}
	nIn, generate, suffix := 2, codegen.Matmul, ""
	if accumulate {
		nIn, generate, suffix = 3, codegen.MatmulAccumulate, "_acc"
	}
	if len(ins) != nIn || len(outs) != 1 {
		return fail(fmt.Errorf("matmul takes %d inputs and 1 output, got %d and %d", nIn, len(ins), len(outs)))
	}
	if accumulate && (ins[2].DType != outs[0].DType || !slices.Equal(ins[2].Shape, outs[0].Shape)) {
		return fail(fmt.Errorf("accumulate=true: the destination read is %s, written %s", ins[2], outs[0]))
	}
	batch, m, kk, n, bBatched, err := codegen.MatmulDims(ins[0], ins[1])
	if err != nil {
		return fail(err)
	}
	gen, err := generate(ins[0], ins[1], outs[0]) // checks the output too
	if err != nil {
		return fail(err)
	}
	k.mm.batch, k.mm.m, k.mm.k, k.mm.n, k.mm.bBatched, k.mm.accumulate = batch, m, kk, n, bBatched, accumulate
	mode := d.Tune.Matmul
	if mode == "tiled" {
		k.note = coll.EnvMatmul + "=tiled"
	} else {
		bh, err := d.blas()
		switch {
		case err != nil:
			k.note = err.Error()
		case !blasFits(batch, m, kk, n, bBatched):
			k.note = "the problem exceeds cuBLAS's int dimensions"
		default:
			k.blas, k.impl, k.name = bh, ImplCUBLAS, "cublasGemmEx_"+ins[0].DType.String()+suffix
			return k, nil
		}
		if mode == "cublas" {
			return fail(fmt.Errorf("%s=cublas, but cuBLAS cannot run it: %s", coll.EnvMatmul, k.note))
		}
	}
	return d.finishGenerated(k, gen, ImplTiled)
}

// launchArg is one argument as Launch places it.
type launchArg struct {
	t      runtime.Tensor
	ptr    uint64 // the tensor's address
	lo, hi uint64 // the bytes it spans
	stage  bool   // goes through a contiguous temporary
	addr   uint64 // what the kernel gets: ptr, or the temporary
	// ld and batch: the row and matrix strides a cuBLAS operand has as it
	// lies (blasLayout); 0 when it is not one or not such a batch.
	ld, batch int64
}

// blas is the argument as cuBLAS takes it: the tensor as it lies, or
// its contiguous temporary.
func (a *launchArg) blas() blasMatrix {
	if !a.stage && a.ld > 0 {
		return blasMatrix{addr: a.addr, ld: a.ld, batch: a.batch}
	}
	r := len(a.t.Shape)
	rows, cols := a.t.Shape[r-2], a.t.Shape[r-1]
	return blasMatrix{addr: a.addr, ld: max(cols, 1), batch: rows * max(cols, 1)}
}

// Launch runs k on stream s: args are the op's tensor inputs in order,
// then its outputs. Strided tensors (but a matmul's operands cuBLAS can
// take as they lie: blasLayout), and outputs that overlap an input,
// go through contiguous stream-ordered temporaries, so the kernel sees
// contiguous tensors and every input is read before any output is written
// (as on the CPU runtime). The launch itself is checked; with
// HIR_CUDA_CHECK_LAUNCHES=1 the stream is synchronised after it too.
func (d *Device) Launch(rk runtime.Kernel, args []runtime.Tensor, rs runtime.Stream) error {
	k, ok := rk.(*computeKernel)
	if !ok || k == nil {
		return fmt.Errorf("cuda: rank %d: launch: %T is not a kernel of the cuda runtime", d.Opts.Rank, rk)
	}
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	nIn := len(k.inputs)
	if len(args) != nIn+len(k.outputs) {
		return fmt.Errorf("cuda: rank %d: launch %s (%s at %s): %d arguments, want %d inputs and %d outputs",
			d.Opts.Rank, k.name, k.code, k.pos, len(args), nIn, len(k.outputs))
	}
	// Up to eight arguments live on the stack: a launch allocates nothing.
	var store [8]launchArg
	la := store[:0]
	if len(args) > len(store) {
		la = make([]launchArg, 0, len(args))
	}
	la = la[:len(args)]
	for i, t := range args {
		want := k.inputs
		j := i
		if i >= nIn {
			want, j = k.outputs, i-nIn
		}
		if t.DType != want[j].DType || !slices.Equal(t.Shape, want[j].Shape) {
			return fmt.Errorf("cuda: rank %d: launch %s (%s at %s): argument %d is %s%v, the kernel was compiled for %s%v",
				d.Opts.Rank, k.name, k.code, k.pos, i, t.DType, t.Shape, want[j].DType, want[j].Shape)
		}
		ptr, err := d.SpanOf(t, func() string { return fmt.Sprintf("launch %s argument %d", k.name, i) })
		if err != nil {
			return err
		}
		if es := uint64(t.DType.Size()); ptr%es != 0 {
			return fmt.Errorf("cuda: rank %d: launch %s: argument %d at %#x is not aligned to its %d-byte elements", d.Opts.Rank, k.name, i, ptr, es)
		}
		lo, hi := byteSpan(t, ptr)
		la[i] = launchArg{t: t, ptr: ptr, lo: lo, hi: hi, addr: ptr, stage: t.NumElements() > 0 && !t.IsContiguous()}
		if k.impl == ImplCUBLAS { // cuBLAS takes row and matrix strides
			// an output's matrices must not overlap (a stride-0 view)
			if ld, batch, ok := blasLayout(t); ok && (i < nIn || batch >= t.Shape[len(t.Shape)-2]*ld) {
				la[i].ld, la[i].batch, la[i].stage = ld, batch, false
			}
		}
	}
	// cuBLAS accumulating reads C where it writes D (beta = 1): the
	// destination read (the last input) is never staged; where it is the
	// output itself (the evaluator's case) it does not stage the output
	// either, and where it is not, D starts as a copy of it (prefill).
	inPlace, prefill := -1, false
	if k.impl == ImplCUBLAS && k.mm.accumulate {
		c, out := &la[nIn-1], &la[nIn]
		c.stage = false
		if c.ptr == out.ptr && slices.Equal(c.t.EffectiveStrides(), out.t.EffectiveStrides()) {
			inPlace = nIn - 1
		} else {
			prefill = true
		}
	}
	for o := nIn; o < len(la); o++ {
		for i := 0; i < nIn; i++ {
			if i != inPlace && la[o].lo < la[i].hi && la[i].lo < la[o].hi {
				la[o].stage = true
			}
		}
	}
	staged := prefill || slices.ContainsFunc(la, func(a launchArg) bool { return a.stage })
	// The context is made current inline, not through withCtx: a closure
	// over la would move it to the heap.
	goruntime.LockOSThread()
	err = d.Drv.SetCurrent(d.Ctx)
	if err == nil {
		if staged {
			err = d.launchStaged(k, la, nIn, s)
		} else {
			err = d.launchCompute(k, la, s)
		}
		if err == nil && d.Tune.CheckLaunches { // Tuning: a fault names the op that caused it
			err = d.Drv.StreamSynchronize.Call1(s.H)
		}
	}
	goruntime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("cuda: rank %d: launch %s (%s at %s): %w", d.Opts.Rank, k.name, k.code, k.pos, err)
	}
	return nil
}

// launchStaged runs k with its strided arguments, and outputs that overlap
// an input, copied through stream-ordered temporaries (under the context).
func (d *Device) launchStaged(k *computeKernel, la []launchArg, nIn int, s *gpu.Stream) error {
	var temps []uint64
	run := func() error {
		for i := range la {
			a := &la[i]
			if !a.stage {
				continue
			}
			addr := new(uint64) // not &a.addr: the call's pointer would move la to the heap
			if err := d.Drv.MemAllocAsync.Call3(uintptr(unsafe.Pointer(addr)), uintptr(a.t.Bytes()), s.H); err != nil {
				return d.TooLarge("kernel staging buffer", a.t.Bytes(), err)
			}
			a.addr = *addr
			temps = append(temps, a.addr)
			if i < nIn {
				if err := d.StridedCopy(a.addr, runtime.ContiguousStrides(a.t.Shape), a.ptr, a.t.EffectiveStrides(), a.t, s); err != nil {
					return err
				}
			}
		}
		if c, out := &la[nIn-1], &la[nIn]; k.impl == ImplCUBLAS && k.mm.accumulate && (out.stage || out.addr != c.ptr) {
			// cuBLAS adds into its output: D (or its temporary) starts as C
			strides := out.t.EffectiveStrides()
			if out.stage {
				strides = runtime.ContiguousStrides(out.t.Shape)
			}
			if err := d.StridedCopy(out.addr, strides, c.ptr, c.t.EffectiveStrides(), c.t, s); err != nil {
				return err
			}
		}
		if err := d.launchCompute(k, la, s); err != nil {
			return err
		}
		for _, a := range la[nIn:] {
			if a.stage {
				if err := d.StridedCopy(a.ptr, a.t.EffectiveStrides(), a.addr, runtime.ContiguousStrides(a.t.Shape), a.t, s); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := run()
	for _, tmp := range temps {
		err = errors.Join(err, d.Drv.MemFreeAsync.Call2(uintptr(tmp), s.H))
	}
	return err
}

// launchCompute enqueues the kernel itself (under withCtx).
func (d *Device) launchCompute(k *computeKernel, la []launchArg, s *gpu.Stream) error {
	if k.impl == ImplCUBLAS {
		mm := k.mm
		out := la[len(la)-1]
		switch {
		case mm.batch == 0 || mm.m == 0 || mm.n == 0:
			return nil
		case mm.k == 0 && mm.accumulate: // adds a sum of nothing
			return nil
		case mm.k == 0: // a sum of nothing: zeros
			return d.Drv.MemsetD8Async.Call4(uintptr(out.addr), 0, uintptr(out.t.Bytes()), s.H)
		}
		return k.blas.gemm(s, k.inputs[0].DType, la[0].blas(), la[1].blas(), out.blas(), mm.batch, mm.m, mm.k, mm.n, mm.bBatched, mm.accumulate)
	}
	kp := k.params
	kp.mu.Lock()
	kp.fill(la)
	err := d.LaunchOwn(k.fn.H, gpu.Dim3{X: kp.grid[0], Y: kp.grid[1], Z: kp.grid[2]},
		gpu.Dim3{X: kp.block[0], Y: kp.block[1], Z: kp.block[2]}, 0, s.H, unsafe.Pointer(&kp.ptrs[0]))
	kp.mu.Unlock()
	return err
}

// byteSpan is the address range [lo, hi) a tensor at ptr touches.
func byteSpan(t runtime.Tensor, ptr uint64) (lo, hi uint64) {
	n := t.NumElements()
	if n == 0 {
		return ptr, ptr
	}
	es := int64(t.DType.Size())
	if t.Strides == nil { // contiguous
		return ptr, ptr + uint64(n*es)
	}
	l, h := int64(0), es
	for i, st := range t.EffectiveStrides() {
		ext := (t.Shape[i] - 1) * st * es
		if ext < 0 {
			l += ext
		} else {
			h += ext
		}
	}
	return uint64(int64(ptr) + l), uint64(int64(ptr) + h)
}

// closeCompute destroys the cuBLAS handle (from Device.close, with the
// context still held, after the kernel table's modules are unloaded).
func (d *Device) closeCompute() error {
	c := &d.compute
	var errs []error
	c.blasOnce.Do(func() {}) // no handle is made after close
	if c.blasH != nil {
		errs = append(errs, d.WithCtx(c.blasH.destroy))
		c.blasH = nil
	}
	return errors.Join(errs...)
}
