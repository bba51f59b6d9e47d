// Package host holds tensors on the host: dense row-major arrays of any
// hir dtype (elements read and written by package numeric's rules), a
// deterministic random generator, sharding along an axis, NPY files, NPZ
// archives and safetensors files, comparison with a reference under a
// tolerance, and readable summaries.
package host

import (
	"fmt"
	"slices"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// Array is a dense tensor in host memory: row-major, little-endian elements
// of DType. A scalar has an empty Shape and one element.
type Array struct {
	DType ir.DType
	Shape []int64
	Data  []byte
}

// New returns a zero-filled array. It panics on an invalid dtype or a
// negative extent: callers validate user-given shapes first (ReadNPY does).
func New(dt ir.DType, shape []int64) *Array {
	if !dt.Valid() {
		panic(fmt.Sprintf("host.New: invalid dtype %v", dt))
	}
	for _, e := range shape {
		if e < 0 {
			panic(fmt.Sprintf("host.New: negative extent in shape %v", shape))
		}
	}
	n := ir.Product(shape)
	return &Array{DType: dt, Shape: append([]int64{}, shape...), Data: make([]byte, n*int64(dt.Size()))}
}

// Len is the number of elements.
func (a *Array) Len() int64 { return ir.Product(a.Shape) }

// At returns element i (flat, row-major) as a float64.
func (a *Array) At(i int64) float64 { return numeric.LoadFloat(a.DType, a.Data, i) }

// Set stores v as element i, rounded (floats) or cast (ints, bool) to the
// array's dtype.
func (a *Array) Set(i int64, v float64) { numeric.StoreFloat(a.DType, a.Data, i, v) }

// AtInt returns element i as an int64 (exact for integer dtypes).
func (a *Array) AtInt(i int64) int64 { return numeric.LoadInt(a.DType, a.Data, i) }

// SetInt stores v as element i (exact for i64, wrapped for i32).
func (a *Array) SetInt(i int64, v int64) { numeric.StoreInt(a.DType, a.Data, i, v) }

// Clone returns a deep copy.
func (a *Array) Clone() *Array {
	return &Array{DType: a.DType, Shape: append([]int64{}, a.Shape...), Data: append([]byte{}, a.Data...)}
}

// TypeString spells the array's dtype and shape as the text format does:
// f32[2, 3].
func (a *Array) TypeString() string {
	return ir.Tensor(a.DType, a.Shape...).String()
}

// Convert returns the array's elements as dtype dt, by the cast rules of
// docs/SEMANTICS.md: floats round to nearest even, floats to integers
// truncate toward zero and saturate, anything to bool is x != 0. Integers
// convert exactly between integer types (wrapping to i32).
func (a *Array) Convert(dt ir.DType) *Array {
	if dt == a.DType {
		return a.Clone()
	}
	out := New(dt, a.Shape)
	n := a.Len()
	srcExact := a.DType.IsInt() || a.DType == ir.Bool
	for i := int64(0); i < n; i++ {
		if srcExact {
			out.SetInt(i, a.AtInt(i))
			continue
		}
		out.Set(i, a.At(i))
	}
	return out
}

// Shard returns rank's block of a along axis when the axis is split into
// size equal blocks: the local tensor a rank holds of a DIDx-sharded input.
func (a *Array) Shard(axis, rank, size int) (*Array, error) {
	if axis < 0 || axis >= len(a.Shape) {
		return nil, fmt.Errorf("shard %s: axis %d is out of range for a tensor of rank %d", a.TypeString(), axis, len(a.Shape))
	}
	if size <= 0 {
		return nil, fmt.Errorf("shard %s: the number of shards must be positive, got %d", a.TypeString(), size)
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("shard %s: rank %d is out of range for %d shards", a.TypeString(), rank, size)
	}
	extent := a.Shape[axis]
	if extent%int64(size) != 0 {
		return nil, fmt.Errorf("shard %s: axis %d has extent %d, which %d shards do not divide", a.TypeString(), axis, extent, size)
	}
	chunk := extent / int64(size)
	shape := append([]int64{}, a.Shape...)
	shape[axis] = chunk
	out := New(a.DType, shape)
	outer, inner := splitAt(a.Shape, axis, a.DType)
	block := chunk * inner
	for o := int64(0); o < outer; o++ {
		src := (o*extent + int64(rank)*chunk) * inner
		copy(out.Data[o*block:(o+1)*block], a.Data[src:src+block])
	}
	return out, nil
}

// Unshard joins shards along axis, in order: the inverse of Shard.
func Unshard(shards []*Array, axis int) (*Array, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("unshard: no shards")
	}
	first := shards[0]
	if first == nil {
		return nil, fmt.Errorf("unshard: shard 0 is missing")
	}
	if axis < 0 || axis >= len(first.Shape) {
		return nil, fmt.Errorf("unshard %s: axis %d is out of range for a tensor of rank %d", first.TypeString(), axis, len(first.Shape))
	}
	for r, s := range shards[1:] {
		if s == nil {
			return nil, fmt.Errorf("unshard: shard %d is missing", r+1)
		}
		if s.DType != first.DType || !slices.Equal(s.Shape, first.Shape) {
			return nil, fmt.Errorf("unshard: shard %d is %s but shard 0 is %s", r+1, s.TypeString(), first.TypeString())
		}
	}
	chunk := first.Shape[axis]
	shape := append([]int64{}, first.Shape...)
	shape[axis] = chunk * int64(len(shards))
	out := New(first.DType, shape)
	outer, inner := splitAt(first.Shape, axis, first.DType)
	block := chunk * inner
	for r, s := range shards {
		for o := int64(0); o < outer; o++ {
			dst := (o*shape[axis] + int64(r)*chunk) * inner
			copy(out.Data[dst:dst+block], s.Data[o*block:(o+1)*block])
		}
	}
	return out, nil
}

// splitAt returns the number of blocks before axis and the bytes of one
// index step along axis.
func splitAt(shape []int64, axis int, dt ir.DType) (outer, innerBytes int64) {
	return ir.Product(shape[:axis]), ir.Product(shape[axis+1:]) * int64(dt.Size())
}

// Index converts a flat element index to a multi-index of shape.
func Index(shape []int64, flat int64) []int64 {
	idx := make([]int64, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] > 0 {
			idx[i] = flat % shape[i]
			flat /= shape[i]
		}
	}
	return idx
}
