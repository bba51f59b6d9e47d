package sim

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
)

func errorf(rank int, format string, args ...any) error {
	return fmt.Errorf("rank %d: "+format, append([]any{rank}, args...)...)
}

// view is a checked, typed window into a buffer: the runtime's form of a
// runtime.Tensor. Element k (row-major over shape) lives at element offset
// off(k) from data's start.
type view struct {
	buf     *buffer
	off     int64  // the tensor's byte offset in buf
	data    []byte // from the tensor's offset to the buffer's end
	dt      ir.DType
	shape   []int64
	strides []int64 // in elements
	n       int64
	contig  bool
}

// view checks t against its buffer's bounds and returns its view.
func (rt *Runtime) view(t runtime.Tensor) (*view, error) {
	v := &view{}
	if err := rt.fillView(v, t); err != nil {
		return nil, err
	}
	return v, nil
}

// fillView is view into v, reusing the capacity of v's shape and strides
// (a launch record's views: no allocation once warm).
func (rt *Runtime) fillView(v *view, t runtime.Tensor) error {
	b, err := rt.own(t.Buf)
	if err != nil {
		return err
	}
	if !t.DType.Valid() {
		return fmt.Errorf("tensor has invalid dtype %v", t.DType)
	}
	for _, e := range t.Shape {
		if e < 0 {
			return fmt.Errorf("tensor has negative extent in shape %v", t.Shape)
		}
	}
	var strides []int64
	if t.Strides != nil {
		strides = append(v.strides[:0], t.Strides...)
	} else {
		// the contiguous strides (runtime.ContiguousStrides), in place
		strides = append(v.strides[:0], t.Shape...)
		acc := int64(1)
		for i := len(strides) - 1; i >= 0; i-- {
			strides[i], acc = acc, acc*t.Shape[i]
		}
	}
	if len(strides) != len(t.Shape) {
		return fmt.Errorf("tensor has %d strides for %d axes", len(strides), len(t.Shape))
	}
	for _, s := range strides {
		if s < 0 {
			return fmt.Errorf("tensor has a negative stride in %v (not supported)", strides)
		}
	}
	if t.Offset < 0 || t.Offset > b.Size() {
		return fmt.Errorf("tensor offset %d outside buffer %d of %d bytes", t.Offset, b.id, b.Size())
	}
	*v = view{buf: b, off: t.Offset, data: b.data[t.Offset:], dt: t.DType, shape: append(v.shape[:0], t.Shape...),
		strides: strides, n: t.NumElements(), contig: t.IsContiguous()}
	if v.n > 0 {
		last := int64(0)
		for i, e := range v.shape {
			last += (e - 1) * v.strides[i]
		}
		if end := t.Offset + (last+1)*int64(t.DType.Size()); end > b.Size() {
			return fmt.Errorf("tensor %s%v (offset %d, strides %v) reaches byte %d of buffer %d, which has %d",
				t.DType, t.Shape, t.Offset, strides, end, b.id, b.Size())
		}
	}
	return nil
}

func (v *view) esz() int64 { return int64(v.dt.Size()) }

// each calls fn(k, off) for the logical elements k in [lo, hi), with off the
// element offset from v.data.
func (v *view) each(lo, hi int64, fn func(k, off int64)) {
	if lo >= hi {
		return
	}
	if v.contig {
		for k := lo; k < hi; k++ {
			fn(k, k)
		}
		return
	}
	rank := len(v.shape)
	if rank == 0 {
		fn(0, 0)
		return
	}
	idx := make([]int64, rank)
	rem, off := lo, int64(0)
	for i := rank - 1; i >= 0; i-- {
		idx[i] = rem % v.shape[i]
		rem /= v.shape[i]
		off += idx[i] * v.strides[i]
	}
	for k := lo; k < hi; k++ {
		fn(k, off)
		for i := rank - 1; i >= 0; i-- {
			idx[i]++
			off += v.strides[i]
			if idx[i] < v.shape[i] {
				break
			}
			off -= idx[i] * v.strides[i]
			idx[i] = 0
		}
	}
}

// flatView is a 1-D view over raw bytes (staging slots, scratch).
func flatView(dt ir.DType, b []byte) *view {
	n := int64(len(b)) / int64(dt.Size())
	return &view{data: b, dt: dt, shape: []int64{n}, strides: []int64{1}, n: n, contig: true}
}

// on returns the same tensor placed at byte offset base+v.off of other
// bytes: a peer's shard, or a rank's place in a contiguous view.
func (v *view) on(b *buffer, base int64) *view {
	c := *v
	c.buf = b
	c.data = b.data[base+v.off:]
	return &c
}

// slice returns the view of [start, start+n) along axis.
func (v *view) slice(axis int, start, n int64) *view {
	c := *v
	c.shape = append([]int64(nil), v.shape...)
	c.shape[axis] = n
	c.n = ir.Product(c.shape)
	if c.n > 0 {
		c.data = v.data[start*v.strides[axis]*v.esz():]
	}
	c.contig = runtime.Tensor{Shape: c.shape, Strides: c.strides}.IsContiguous()
	return &c
}

// isFloatClass says whether values of dt are held as float64 in the
// interpreter (ints and bool are held as int64).
func isFloatClass(dt ir.DType) bool { return dt.IsFloat() }

// loadF reads elements [lo, hi) as float64 (exact for every float dtype).
func (v *view) loadF(lo, hi int64) []float64 {
	out := make([]float64, hi-lo)
	if v.contig {
		for k := lo; k < hi; k++ {
			out[k-lo] = numeric.LoadFloat(v.dt, v.data, k)
		}
		return out
	}
	v.each(lo, hi, func(k, off int64) { out[k-lo] = numeric.LoadFloat(v.dt, v.data, off) })
	return out
}

// loadI reads elements [lo, hi) as int64 (exact for ints, 0/1 for bool).
func (v *view) loadI(lo, hi int64) []int64 {
	out := make([]int64, hi-lo)
	v.each(lo, hi, func(k, off int64) { out[k-lo] = numeric.LoadInt(v.dt, v.data, off) })
	return out
}

// storeF writes xs as elements [lo, lo+len(xs)), rounding to the dtype.
func (v *view) storeF(lo int64, xs []float64) {
	if v.contig {
		for j, x := range xs {
			numeric.StoreFloat(v.dt, v.data, lo+int64(j), x)
		}
		return
	}
	v.each(lo, lo+int64(len(xs)), func(k, off int64) { numeric.StoreFloat(v.dt, v.data, off, xs[k-lo]) })
}

// storeI writes xs as elements [lo, lo+len(xs)), wrapping to the dtype.
func (v *view) storeI(lo int64, xs []int64) {
	v.each(lo, lo+int64(len(xs)), func(k, off int64) { numeric.StoreInt(v.dt, v.data, off, xs[k-lo]) })
}

// packed returns elements [lo, hi) as contiguous bytes.
func (v *view) packed(lo, hi int64) []byte {
	es := v.esz()
	if v.contig {
		return append([]byte(nil), v.data[lo*es:hi*es]...)
	}
	out := make([]byte, (hi-lo)*es)
	v.each(lo, hi, func(k, off int64) { copy(out[(k-lo)*es:(k-lo+1)*es], v.data[off*es:(off+1)*es]) })
	return out
}

// unpack writes contiguous bytes b as elements [lo, lo+len(b)/esz).
func (v *view) unpack(lo int64, b []byte) {
	es := v.esz()
	n := int64(len(b)) / es
	if v.contig {
		copy(v.data[lo*es:(lo+n)*es], b)
		return
	}
	v.each(lo, lo+n, func(k, off int64) { copy(v.data[off*es:(off+1)*es], b[(k-lo)*es:(k-lo+1)*es]) })
}

// copyView copies src into dst element by element (same dtype and count).
func copyView(dst, src *view) {
	if dst.contig && src.contig {
		es := dst.esz()
		copy(dst.data[:dst.n*es], src.data[:src.n*es])
		return
	}
	dst.unpack(0, src.packed(0, src.n))
}

func runtimeStrides(shape []int64) []int64 { return runtime.ContiguousStrides(shape) }
