package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
)

func TestLocalShape(t *testing.T) {
	cases := []struct {
		typ   *TensorType
		mesh  int
		want  []int64
		error string
	}{
		{typ: Tensor(F32, 8, 16), mesh: 4, want: []int64{8, 16}},
		{typ: Tensor(F32, 8, 16).Sharded(0), mesh: 4, want: []int64{2, 16}},
		{typ: Tensor(F32, 8, 16).Sharded(1), mesh: 4, want: []int64{8, 4}},
		{typ: Tensor(F32, 4, 3).Sharded(0), mesh: 4, want: []int64{1, 3}},
		{typ: Tensor(BF16).In(Symmetric), mesh: 2, want: []int64{}},
		{typ: Tensor(F32, 6, 2).Sharded(0), mesh: 4, error: "axis 0 of extent 6 is sharded on DIDx, but the mesh of 4 ranks does not divide it"},
		{typ: Tensor(F32, 8).Sharded(0), mesh: 0, error: "does not divide"},
	}
	for _, c := range cases {
		got, err := c.typ.LocalShape(c.mesh)
		if c.error != "" {
			assert.ErrorContains(t, err, c.error, "%v on %d ranks", c.typ, c.mesh)
			continue
		}
		if assert.NoError(t, err, "%v on %d ranks", c.typ, c.mesh) {
			// nil and empty are the same shape, as with slices.Equal
			assert.Empty(t, cmp.Diff(c.want, got, cmpopts.EquateEmpty()), "%v on %d ranks: LocalShape (-want +got)", c.typ, c.mesh)
		}
	}
}

func TestTensorTypeHelpers(t *testing.T) {
	base := Tensor(F16, 4, 8)
	s := base.Sharded(1).In(Host)
	assert.False(t, base.IsSharded(), "Sharded/In changed the receiver: %v", base)
	assert.Equal(t, Global, base.Mem, "Sharded/In changed the receiver: %v", base)
	assert.Equal(t, 1, s.ShardAxis(), "shard axis of %v", s)
	assert.Equal(t, "f16[4, 8/DIDx] host", s.String())
	u := s.Unsharded()
	assert.False(t, u.IsSharded(), "Unsharded = %v", u)
	assert.Equal(t, "f16[4, 8] host", u.String(), "Unsharded")
	assert.Equal(t, int64(32), s.NumElements(), "NumElements")
	assert.Equal(t, int64(1), Product(nil), "Product(nil)")
	assert.Equal(t, 2, base.Rank(), "Rank")
	assert.True(t, TypesEqual(s, s.Clone()), "TypesEqual(s, s.Clone())")
	assert.False(t, TypesEqual(s, base), "TypesEqual(s, base)")
	assert.False(t, TypesEqual(s, &ScalarType{DType: F16}), "TypesEqual(s, f16 scalar)")
	assert.True(t, TypesEqual(nil, nil), "TypesEqual(nil, nil)")
	assert.True(t, TypesEqual(&StreamType{}, &StreamType{}), "TypesEqual on stream types")
	assert.False(t, TypesEqual(&HandleType{}, &StreamType{}), "TypesEqual(handle, stream)")
}

func TestBroadcastShapes(t *testing.T) {
	for _, c := range []struct {
		in   [][]int64
		want []int64
		ok   bool
	}{
		{[][]int64{{4, 3}, {3}}, []int64{4, 3}, true},
		{[][]int64{{4, 1}, {1, 5}}, []int64{4, 5}, true},
		{[][]int64{{2, 1, 3}, {4, 1}, {}}, []int64{2, 4, 3}, true},
		{[][]int64{{0, 3}, {1}}, []int64{0, 3}, true},
		{[][]int64{{4, 3}, {2}}, nil, false},
		{nil, []int64{}, true},
	} {
		got, ok := BroadcastShapes(c.in...)
		if assert.Equal(t, c.ok, ok, "BroadcastShapes(%v) ok, shape %v", c.in, got) && ok {
			// nil and empty are the same shape, as with slices.Equal
			assert.Empty(t, cmp.Diff(c.want, got, cmpopts.EquateEmpty()), "BroadcastShapes(%v) (-want +got)", c.in)
		}
	}
}
