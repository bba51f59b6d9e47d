package compute

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
)

// View is a typed, strided window into bytes. Element k (row-major over
// Shape) lives at element offset off(k) from Data's start. It knows
// nothing of the buffer the bytes belong to: runtime/sim checks a
// runtime.Tensor against its buffer and hands the kernels and the
// collectives' arithmetic the View.
type View struct {
	Data    []byte // from the tensor's first element to the bytes' end
	DT      ir.DType
	Shape   []int64
	Strides []int64 // in elements
	N       int64   // elements
	Contig  bool
}

// Flat is a 1-D view over raw bytes (staging slots, scratch).
func Flat(dt ir.DType, b []byte) *View {
	n := int64(len(b)) / int64(dt.Size())
	return &View{Data: b, DT: dt, Shape: []int64{n}, Strides: []int64{1}, N: n, Contig: true}
}

// ESize is the size of one element in bytes.
func (v *View) ESize() int64 { return int64(v.DT.Size()) }

// Each calls fn(k, off) for the logical elements k in [lo, hi), with off the
// element offset from v.Data.
func (v *View) Each(lo, hi int64, fn func(k, off int64)) {
	if lo >= hi {
		return
	}
	if v.Contig {
		for k := lo; k < hi; k++ {
			fn(k, k)
		}
		return
	}
	rank := len(v.Shape)
	if rank == 0 {
		fn(0, 0)
		return
	}
	idx := make([]int64, rank)
	rem, off := lo, int64(0)
	for i := rank - 1; i >= 0; i-- {
		idx[i] = rem % v.Shape[i]
		rem /= v.Shape[i]
		off += idx[i] * v.Strides[i]
	}
	for k := lo; k < hi; k++ {
		fn(k, off)
		for i := rank - 1; i >= 0; i-- {
			idx[i]++
			off += v.Strides[i]
			if idx[i] < v.Shape[i] {
				break
			}
			off -= idx[i] * v.Strides[i]
			idx[i] = 0
		}
	}
}

// Slice returns the view of [start, start+n) along axis.
func (v View) Slice(axis int, start, n int64) View {
	c := v
	c.Shape = append([]int64(nil), v.Shape...)
	c.Shape[axis] = n
	c.N = ir.Product(c.Shape)
	if c.N > 0 {
		c.Data = v.Data[start*v.Strides[axis]*v.ESize():]
	}
	c.Contig = runtime.Tensor{Shape: c.Shape, Strides: c.Strides}.IsContiguous()
	return c
}

// isFloatClass says whether values of dt are held as float64 in the
// interpreter (ints and bool are held as int64).
func isFloatClass(dt ir.DType) bool { return dt.IsFloat() }

// LoadF reads elements [lo, hi) as float64 (exact for every float dtype).
func (v *View) LoadF(lo, hi int64) []float64 {
	out := make([]float64, hi-lo)
	if v.Contig {
		for k := lo; k < hi; k++ {
			out[k-lo] = numeric.LoadFloat(v.DT, v.Data, k)
		}
		return out
	}
	v.Each(lo, hi, func(k, off int64) { out[k-lo] = numeric.LoadFloat(v.DT, v.Data, off) })
	return out
}

// LoadI reads elements [lo, hi) as int64 (exact for ints, 0/1 for bool).
func (v *View) LoadI(lo, hi int64) []int64 {
	out := make([]int64, hi-lo)
	v.Each(lo, hi, func(k, off int64) { out[k-lo] = numeric.LoadInt(v.DT, v.Data, off) })
	return out
}

// StoreF writes xs as elements [lo, lo+len(xs)), rounding to the dtype.
func (v *View) StoreF(lo int64, xs []float64) {
	if v.Contig {
		for j, x := range xs {
			numeric.StoreFloat(v.DT, v.Data, lo+int64(j), x)
		}
		return
	}
	v.Each(lo, lo+int64(len(xs)), func(k, off int64) { numeric.StoreFloat(v.DT, v.Data, off, xs[k-lo]) })
}

// StoreI writes xs as elements [lo, lo+len(xs)), wrapping to the dtype.
func (v *View) StoreI(lo int64, xs []int64) {
	v.Each(lo, lo+int64(len(xs)), func(k, off int64) { numeric.StoreInt(v.DT, v.Data, off, xs[k-lo]) })
}

// Packed returns elements [lo, hi) as contiguous bytes.
func (v *View) Packed(lo, hi int64) []byte {
	es := v.ESize()
	if v.Contig {
		return append([]byte(nil), v.Data[lo*es:hi*es]...)
	}
	out := make([]byte, (hi-lo)*es)
	v.Each(lo, hi, func(k, off int64) { copy(out[(k-lo)*es:(k-lo+1)*es], v.Data[off*es:(off+1)*es]) })
	return out
}

// Unpack writes contiguous bytes b as elements [lo, lo+len(b)/esz).
func (v *View) Unpack(lo int64, b []byte) {
	es := v.ESize()
	n := int64(len(b)) / es
	if v.Contig {
		copy(v.Data[lo*es:(lo+n)*es], b)
		return
	}
	v.Each(lo, lo+n, func(k, off int64) { copy(v.Data[off*es:(off+1)*es], b[(k-lo)*es:(k-lo+1)*es]) })
}

// Copy copies src into dst element by element (same dtype and count).
func Copy(dst, src *View) {
	if dst.Contig && src.Contig {
		es := dst.ESize()
		copy(dst.Data[:dst.N*es], src.Data[:src.N*es])
		return
	}
	dst.Unpack(0, src.Packed(0, src.N))
}
