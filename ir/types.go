package ir

import (
	"fmt"
	"strings"
)

// Type is the type of a value: *TensorType, *ScalarType, *StreamType or
// *HandleType.
type Type interface {
	String() string
	isType()
}

// Dim is one axis of a tensor's logical shape.
type Dim struct {
	Extent   int64        // logical extent: the whole axis, as on one device
	Parallel ParallelType // Serial, or DIDx when the axis is split over the mesh
}

// TensorType is a sharded tensor: dtype, logical shape with the parallel type
// of each axis, and memory type. The local shape a rank holds is derived by
// LocalShape.
type TensorType struct {
	DType DType
	Dims  []Dim
	Mem   MemoryType
}

// Tensor returns an unsharded global tensor type.
func Tensor(dt DType, shape ...int64) *TensorType {
	t := &TensorType{DType: dt, Dims: make([]Dim, len(shape))}
	for i, e := range shape {
		t.Dims[i] = Dim{Extent: e}
	}
	return t
}

// Sharded returns a copy of t with axis split over DIDx.
func (t *TensorType) Sharded(axis int) *TensorType {
	c := t.Clone()
	c.Dims[axis].Parallel = DIDx
	return c
}

// In returns a copy of t in memory m.
func (t *TensorType) In(m MemoryType) *TensorType {
	c := t.Clone()
	c.Mem = m
	return c
}

// Unsharded returns a copy of t with every axis serial.
func (t *TensorType) Unsharded() *TensorType {
	c := t.Clone()
	for i := range c.Dims {
		c.Dims[i].Parallel = Serial
	}
	return c
}

// Clone returns a deep copy.
func (t *TensorType) Clone() *TensorType {
	c := *t
	c.Dims = append([]Dim(nil), t.Dims...)
	return &c
}

// Rank is the number of axes.
func (t *TensorType) Rank() int { return len(t.Dims) }

// Shape is the logical shape.
func (t *TensorType) Shape() []int64 {
	s := make([]int64, len(t.Dims))
	for i, d := range t.Dims {
		s[i] = d.Extent
	}
	return s
}

// ShardAxis returns the axis split over DIDx, or -1 when none is.
func (t *TensorType) ShardAxis() int {
	for i, d := range t.Dims {
		if d.Parallel == DIDx {
			return i
		}
	}
	return -1
}

// IsSharded reports whether some axis is split over the mesh.
func (t *TensorType) IsSharded() bool { return t.ShardAxis() >= 0 }

// LocalShape is the shape one rank holds on a mesh of meshSize ranks: a
// DIDx axis of extent k·meshSize has local extent k. It fails when the mesh
// does not divide a sharded extent.
func (t *TensorType) LocalShape(meshSize int) ([]int64, error) {
	if err := t.ShardError(meshSize); err != nil {
		return nil, err
	}
	s := t.Shape()
	for i, d := range t.Dims {
		if d.Parallel == DIDx {
			s[i] = d.Extent / int64(meshSize)
		}
	}
	return s, nil
}

// ShardError is LocalShape's error alone, without making the shape: it
// says which sharded extent a mesh of meshSize ranks does not divide.
func (t *TensorType) ShardError(meshSize int) error {
	for i, d := range t.Dims {
		if d.Parallel == DIDx && (meshSize <= 0 || d.Extent%int64(meshSize) != 0) {
			return fmt.Errorf("axis %d of extent %d is sharded on DIDx, but the mesh of %d ranks does not divide it", i, d.Extent, meshSize)
		}
	}
	return nil
}

// NumElements is the number of elements of the logical shape.
func (t *TensorType) NumElements() int64 { return Product(t.Shape()) }

// Product multiplies the extents of a shape (1 for a scalar shape). It
// wraps when the product does not fit in an int64: use it on the shapes of
// a checked program (the passes reject a type whose size does not fit), and
// ProductChecked on any other.
func Product(shape []int64) int64 {
	n := int64(1)
	for _, e := range shape {
		n *= e
	}
	return n
}

// Equal reports whether t and u are the same type.
func (t *TensorType) Equal(u *TensorType) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.DType != u.DType || t.Mem != u.Mem || len(t.Dims) != len(u.Dims) {
		return false
	}
	for i := range t.Dims {
		if t.Dims[i] != u.Dims[i] {
			return false
		}
	}
	return true
}

// String prints the type as the text format spells it: f32[8/DIDx, 16] symmetric.
func (t *TensorType) String() string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteByte('[')
	for i, d := range t.Dims {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", d.Extent)
		if d.Parallel != Serial {
			b.WriteString("/" + d.Parallel.String())
		}
	}
	b.WriteByte(']')
	if t.Mem != Global {
		b.WriteString(" " + t.Mem.String())
	}
	return b.String()
}

func (*TensorType) isType() {}

// ScalarType is a host scalar: a loop index or a literal operand.
type ScalarType struct{ DType DType }

func (t *ScalarType) String() string { return t.DType.String() }
func (*ScalarType) isType()          {}

// StreamType is the type of a stream made by the stream op.
type StreamType struct{}

func (*StreamType) String() string { return "stream" }
func (*StreamType) isType()        {}

// HandleType is the type of a registration or a transfer handle.
type HandleType struct{}

func (*HandleType) String() string { return "handle" }
func (*HandleType) isType()        {}

// TypesEqual compares two types structurally.
func TypesEqual(a, b Type) bool {
	switch a := a.(type) {
	case *TensorType:
		b, ok := b.(*TensorType)
		return ok && a.Equal(b)
	case *ScalarType:
		b, ok := b.(*ScalarType)
		return ok && a.DType == b.DType
	case *StreamType:
		_, ok := b.(*StreamType)
		return ok
	case *HandleType:
		_, ok := b.(*HandleType)
		return ok
	case nil:
		return b == nil
	}
	return false
}

// BroadcastShapes is NumPy broadcasting of shapes: right aligned, an
// extent of 1 stretches to the other's. ok is false when two extents
// differ and neither is 1.
func BroadcastShapes(shapes ...[]int64) (out []int64, ok bool) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out = make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for j := range s {
			e, o := s[len(s)-1-j], &out[rank-1-j]
			switch {
			case e == *o || e == 1:
			case *o == 1:
				*o = e
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// ContiguousStrides returns the row-major strides of shape, in elements.
// Like Product, it assumes the shape's element count fits in an int64.
func ContiguousStrides(shape []int64) []int64 {
	s := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}
