package gpu

import (
	"encoding/binary"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/kernels"
	"slices"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// maxCopyDims is the most dimensions the strided-copy kernel handles.
const maxCopyDims = 8

type copyKernels struct {
	mod *Module
	fn  map[int]*Function // by element size
}

func (d *Device) stridedKernels() (*copyKernels, error) {
	d.copyOnce.Do(func() {
		cubin, err := CompileCUDA(kernels.StridedCopy, "hir_strided_copy.cu", d.Props.ComputeCapability)
		if err != nil {
			d.copyErr = err
			return
		}
		m, err := d.LoadModule(cubin)
		if err != nil {
			d.copyErr = err
			return
		}
		k := &copyKernels{mod: m, fn: map[int]*Function{}}
		for _, es := range []int{1, 2, 4, 8} {
			f, err := m.Function(fmt.Sprintf("hir_strided_copy_%d", es))
			if err != nil {
				m.Unload()
				d.copyErr = err
				return
			}
			k.fn[es] = f
		}
		d.copyKernel = k
	})
	return d.copyKernel, d.copyErr
}

// span checks that t lies inside its buffer and returns its base address;
// what names t in an error.
func (d *Device) Span(t runtime.Tensor, what string) (uint64, error) {
	return d.SpanOf(t, func() string { return what })
}

// spanOf is span with the name made only for an error (a launch names its
// arguments by kernel and index: no formatting on the hot path).
func (d *Device) SpanOf(t runtime.Tensor, what func() string) (uint64, error) {
	b, err := d.Own(t.Buf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what(), err)
	}
	if len(t.Strides) != 0 && len(t.Strides) != len(t.Shape) {
		return 0, fmt.Errorf("cuda: rank %d: %s: %d strides for %d dimensions", d.Opts.Rank, what(), len(t.Strides), len(t.Shape))
	}
	es := int64(t.DType.Size())
	if es == 0 {
		return 0, fmt.Errorf("cuda: rank %d: %s: dtype %v has no size", d.Opts.Rank, what(), t.DType)
	}
	lo, hi := t.Offset, t.Offset+es
	switch n := t.NumElements(); {
	case n == 0:
		hi = t.Offset
	case t.Strides == nil: // contiguous: no strides to make (a launch allocates nothing)
		hi = t.Offset + n*es
	default:
		for k, st := range t.EffectiveStrides() {
			ext := (t.Shape[k] - 1) * st * es
			if ext < 0 {
				lo += ext
			} else {
				hi += ext
			}
		}
	}
	if lo < 0 || hi > b.Bytes {
		return 0, fmt.Errorf("cuda: rank %d: %s: tensor %v%v at offset %d reaches bytes [%d, %d) of a %d-byte buffer",
			d.Opts.Rank, what(), t.DType, t.Shape, t.Offset, lo, hi, b.Bytes)
	}
	return b.Ptr + uint64(t.Offset), nil
}

// CopyFromHost copies src into dst, ordered on s. For a strided dst the
// bytes go through a stream-ordered staging buffer.
func (d *Device) CopyFromHost(dst runtime.Tensor, src []byte, rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	ptr, err := d.Span(dst, "copy from host")
	if err != nil {
		return err
	}
	if int64(len(src)) != dst.Bytes() {
		return fmt.Errorf("cuda: rank %d: copy from host: %d bytes for a tensor of %d", d.Opts.Rank, len(src), dst.Bytes())
	}
	if len(src) == 0 {
		return nil
	}
	if dst.IsContiguous() {
		return d.WithCtx(func() error {
			return d.Drv.MemcpyHtoDAsync.Call4(uintptr(ptr), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), s.H)
		})
	}
	return d.Staged(len(src), s, func(tmp uint64) error {
		if err := d.Drv.MemcpyHtoDAsync.Call4(uintptr(tmp), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), s.H); err != nil {
			return err
		}
		return d.StridedCopy(ptr, dst.EffectiveStrides(), tmp, runtime.ContiguousStrides(dst.Shape), dst, s)
	})
}

// CopyToHost copies src into dst, ordered on s.
func (d *Device) CopyToHost(dst []byte, src runtime.Tensor, rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	ptr, err := d.Span(src, "copy to host")
	if err != nil {
		return err
	}
	if int64(len(dst)) != src.Bytes() {
		return fmt.Errorf("cuda: rank %d: copy to host: %d bytes for a tensor of %d", d.Opts.Rank, len(dst), src.Bytes())
	}
	if len(dst) == 0 {
		return nil
	}
	if src.IsContiguous() {
		return d.WithCtx(func() error {
			return d.Drv.MemcpyDtoHAsync.Call4(uintptr(unsafe.Pointer(&dst[0])), uintptr(ptr), uintptr(len(dst)), s.H)
		})
	}
	return d.Staged(len(dst), s, func(tmp uint64) error {
		if err := d.StridedCopy(tmp, runtime.ContiguousStrides(src.Shape), ptr, src.EffectiveStrides(), src, s); err != nil {
			return err
		}
		return d.Drv.MemcpyDtoHAsync.Call4(uintptr(unsafe.Pointer(&dst[0])), uintptr(tmp), uintptr(len(dst)), s.H)
	})
}

// Copy copies src into dst elementwise, ordered on s. Either may be a
// peer's shard or the contiguous view: all are addresses in this process.
func (d *Device) Copy(dst, src runtime.Tensor, rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	if dst.DType != src.DType || dst.NumElements() != src.NumElements() {
		return fmt.Errorf("cuda: rank %d: copy of %v%v into %v%v: dtype and element count must match",
			d.Opts.Rank, src.DType, src.Shape, dst.DType, dst.Shape)
	}
	dp, err := d.Span(dst, "copy destination")
	if err != nil {
		return err
	}
	sp, err := d.Span(src, "copy source")
	if err != nil {
		return err
	}
	n := dst.Bytes()
	if n == 0 {
		return nil
	}
	if dst.IsContiguous() && src.IsContiguous() {
		return d.WithCtx(func() error {
			return d.Drv.MemcpyAsync.Call4(uintptr(dp), uintptr(sp), uintptr(n), s.H)
		})
	}
	// Different shapes with equal counts: copy in dst's index order over
	// src viewed with dst's shape only when src is contiguous.
	srcStrides := src.EffectiveStrides()
	if !slices.Equal(dst.Shape, src.Shape) {
		if !src.IsContiguous() {
			return fmt.Errorf("cuda: rank %d: strided copy between shapes %v and %v", d.Opts.Rank, src.Shape, dst.Shape)
		}
		srcStrides = runtime.ContiguousStrides(dst.Shape)
	}
	return d.WithCtx(func() error { return d.StridedCopy(dp, dst.EffectiveStrides(), sp, srcStrides, dst, s) })
}

// staged runs f with a stream-ordered temporary of n bytes (under withCtx).
func (d *Device) Staged(n int, s *Stream, f func(tmp uint64) error) error {
	return d.WithCtx(func() error {
		var tmp uint64
		if err := d.Drv.MemAllocAsync.Call3(uintptr(unsafe.Pointer(&tmp)), uintptr(n), s.H); err != nil {
			return d.TooLarge("staging buffer", int64(n), err)
		}
		ferr := f(tmp)
		if err := d.Drv.MemFreeAsync.Call2(uintptr(tmp), s.H); ferr == nil {
			ferr = err
		}
		return ferr
	})
}

// stridedCopy launches the strided-copy kernel for shape t.Shape (under
// withCtx: the caller holds the thread and context).
func (d *Device) StridedCopy(dst uint64, dstStrides []int64, src uint64, srcStrides []int64, t runtime.Tensor, s *Stream) error {
	es := t.DType.Size()
	if len(t.Shape) > maxCopyDims {
		return fmt.Errorf("cuda: rank %d: strided copy of %d dimensions (at most %d)", d.Opts.Rank, len(t.Shape), maxCopyDims)
	}
	if dst%uint64(es) != 0 || src%uint64(es) != 0 {
		return fmt.Errorf("cuda: rank %d: strided copy of %d-byte elements at misaligned addresses", d.Opts.Rank, es)
	}
	k, err := d.stridedKernels()
	if err != nil {
		return err
	}
	f := k.fn[es]
	if f == nil {
		return fmt.Errorf("cuda: rank %d: no strided copy for %d-byte elements", d.Opts.Rank, es)
	}
	n := t.NumElements()
	a := stridedArgsPool.Get().(*stridedArgs)
	defer stridedArgsPool.Put(a)
	a.dst, a.src = dst, src
	le := binary.LittleEndian
	le.PutUint64(a.layout[0:], uint64(n))
	le.PutUint32(a.layout[8:], uint32(len(t.Shape)))
	le.PutUint32(a.layout[12:], 0)
	at := 16
	for _, arr := range [3][]int64{t.Shape, dstStrides, srcStrides} {
		for i := 0; i < maxCopyDims; i++ {
			v := int64(1)
			if i < len(arr) {
				v = arr[i]
			}
			le.PutUint64(a.layout[at:], uint64(v))
			at += 8
		}
	}
	const block = 256
	grid := (n + block - 1) / block
	grid = min(grid, int64(max(d.Props.Multiprocessors, 1))*16)
	a.params = [3]unsafe.Pointer{unsafe.Pointer(&a.dst), unsafe.Pointer(&a.src), unsafe.Pointer(&a.layout[0])}
	return d.LaunchOwn(f.H, Dim3{X: uint32(grid)}, Dim3{X: block}, 0, s.H, unsafe.Pointer(&a.params[0]))
}

// stridedArgs is one strided-copy launch's arguments: the two addresses
// and the layout block (element count, rank, then shape and both strides,
// maxCopyDims each), pooled so that a launch, one-sided transfers' small
// copies among them, allocates nothing. The driver copies the arguments
// at launch, so the pool takes them back when LaunchOwn returns.
type stridedArgs struct {
	dst, src uint64
	layout   [16 + 3*8*maxCopyDims]byte
	params   [3]unsafe.Pointer
}

var stridedArgsPool = sync.Pool{New: func() any { return new(stridedArgs) }}
