package ir

import (
	"slices"
	"strings"
	"testing"
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
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Errorf("%v on %d ranks: error %v, want %q", c.typ, c.mesh, err, c.error)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v on %d ranks: LocalShape = %v, %v; want %v", c.typ, c.mesh, got, err, c.want)
		}
	}
}

func TestTensorTypeHelpers(t *testing.T) {
	base := Tensor(F16, 4, 8)
	s := base.Sharded(1).In(Host)
	if base.IsSharded() || base.Mem != Global {
		t.Errorf("Sharded/In changed the receiver: %v", base)
	}
	if s.ShardAxis() != 1 || s.String() != "f16[4, 8/DIDx] host" {
		t.Errorf("got %v (shard axis %d)", s, s.ShardAxis())
	}
	if u := s.Unsharded(); u.IsSharded() || u.String() != "f16[4, 8] host" {
		t.Errorf("Unsharded = %v", u)
	}
	if s.NumElements() != 32 || Product(nil) != 1 || base.Rank() != 2 {
		t.Errorf("NumElements %d, Product(nil) %d, Rank %d", s.NumElements(), Product(nil), base.Rank())
	}
	if !TypesEqual(s, s.Clone()) || TypesEqual(s, base) || TypesEqual(s, &ScalarType{DType: F16}) {
		t.Error("TypesEqual")
	}
	if !TypesEqual(nil, nil) || !TypesEqual(&StreamType{}, &StreamType{}) || TypesEqual(&HandleType{}, &StreamType{}) {
		t.Error("TypesEqual on non-tensor types")
	}
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
		if ok != c.ok || (ok && !slices.Equal(got, c.want)) {
			t.Errorf("BroadcastShapes(%v) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
