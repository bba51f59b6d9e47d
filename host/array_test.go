package host

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hirlab/hir/ir"
)

func iota(dt ir.DType, shape ...int64) *Array {
	a := New(dt, shape)
	for i := range a.Len() {
		a.SetInt(i, i)
	}
	return a
}

func TestNewAtSet(t *testing.T) {
	a := New(ir.F32, []int64{2, 3})
	if a.Len() != 6 || len(a.Data) != 24 {
		t.Fatalf("len %d, %d bytes; want 6, 24", a.Len(), len(a.Data))
	}
	a.Set(4, 1.5)
	if got := a.At(4); got != 1.5 {
		t.Errorf("At(4) = %v, want 1.5", got)
	}
	s := New(ir.I64, nil)
	if s.Len() != 1 {
		t.Errorf("scalar Len = %d, want 1", s.Len())
	}
	s.SetInt(0, -1<<62)
	if got := s.AtInt(0); got != -1<<62 {
		t.Errorf("AtInt = %d", got)
	}
	b := New(ir.BF16, []int64{1})
	b.Set(0, 1.00390625) // halfway between 1 and the next bf16 (1 + 2^-7): even is 1
	if got := b.At(0); got != 1 {
		t.Errorf("bf16 Set rounds to %v, want 1", got)
	}
}

func TestConvert(t *testing.T) {
	a := New(ir.F32, []int64{4})
	for i, v := range []float64{1.00390625, -2.7, 3.5, 1.01171875} {
		a.Set(int64(i), v)
	}
	b := a.Convert(ir.BF16)
	// Ties (elements 0 and 3) go to the even neighbour.
	want := []float64{1, -2.703125, 3.5, 1.015625}
	for i, w := range want {
		if got := b.At(int64(i)); got != w {
			t.Errorf("bf16 element %d = %v, want %v", i, got, w)
		}
	}
	c := a.Convert(ir.I32)
	if diff := cmp.Diff([]int64{1, -2, 3, 1}, []int64{c.AtInt(0), c.AtInt(1), c.AtInt(2), c.AtInt(3)}); diff != "" {
		t.Errorf("f32 -> i32 (-got +want):\n%s", diff)
	}
	big := New(ir.I64, []int64{1})
	big.SetInt(0, 1<<40+3)
	if got := big.Convert(ir.I32).AtInt(0); got != 3 {
		t.Errorf("i64 -> i32 wraps to %d, want 3", got)
	}
}

func TestShardUnshardInverse(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		axis  int
		size  int
	}{
		{[]int64{8}, 0, 4},
		{[]int64{8, 3}, 0, 2},
		{[]int64{2, 6, 5}, 1, 3},
		{[]int64{2, 3, 4}, 2, 4},
		{[]int64{4, 4}, 1, 1},
	} {
		for _, dt := range ir.AllDTypes {
			a := Random(dt, tc.shape, 7)
			shards := make([]*Array, tc.size)
			for r := range shards {
				s, err := a.Shard(tc.axis, r, tc.size)
				if err != nil {
					t.Fatal(err)
				}
				shards[r] = s
			}
			back, err := Unshard(shards, tc.axis)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(a, back); diff != "" {
				t.Errorf("%v axis %d over %d: Unshard(Shard) differs:\n%s", tc.shape, tc.axis, tc.size, diff)
			}
		}
	}
}

func TestShardPicksBlock(t *testing.T) {
	a := iota(ir.I32, 2, 4)
	s, err := a.Shard(1, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Summary(), "i32[2, 2] = [[2, 3], [6, 7]]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestShardErrors(t *testing.T) {
	a := New(ir.F32, []int64{6, 4})
	for _, tc := range []struct {
		axis, rank, size int
		want             string
	}{
		{2, 0, 2, "axis 2 is out of range for a tensor of rank 2"},
		{-1, 0, 2, "axis -1 is out of range"},
		{0, 0, 4, "axis 0 has extent 6, which 4 shards do not divide"},
		{0, 3, 3, "rank 3 is out of range for 3 shards"},
		{0, 0, 0, "must be positive"},
	} {
		_, err := a.Shard(tc.axis, tc.rank, tc.size)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Shard(%d, %d, %d) = %v, want an error containing %q", tc.axis, tc.rank, tc.size, err, tc.want)
		}
	}
	x, y := New(ir.F32, []int64{2, 2}), New(ir.F32, []int64{3, 2})
	for _, tc := range []struct {
		shards []*Array
		axis   int
		want   string
	}{
		{nil, 0, "no shards"},
		{[]*Array{x, y}, 0, "shard 1 is f32[3, 2] but shard 0 is f32[2, 2]"},
		{[]*Array{x, New(ir.I32, []int64{2, 2})}, 0, "shard 1 is i32[2, 2]"},
		{[]*Array{x, nil}, 0, "shard 1 is missing"},
		{[]*Array{x, x}, 2, "axis 2 is out of range"},
	} {
		_, err := Unshard(tc.shards, tc.axis)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unshard: %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestEqualAndAllClose(t *testing.T) {
	a := iota(ir.F32, 2, 3)
	b := a.Clone()
	if err := Equal(a, b); err != nil {
		t.Errorf("Equal on a clone: %v", err)
	}
	b.Set(4, 4.5)
	b.Set(5, 7)
	err := Equal(a, b)
	if err == nil || err.Error() != "2 of 6 elements differ; the first at [1 1]: got 4, want 4.5" {
		t.Errorf("Equal = %v", err)
	}
	if err := Equal(a, New(ir.F32, []int64{3, 2})); err == nil || err.Error() != "got f32[2, 3], want f32[3, 2]" {
		t.Errorf("Equal on shapes = %v", err)
	}
	if err := AllClose(a, b, 0, 3); err != nil {
		t.Errorf("AllClose(atol 3) = %v", err)
	}
	err = AllClose(a, b, 0.2, 0)
	if err == nil || err.Error() != "1 of 6 elements differ (rtol 0.2, atol 0); the first at [1 2]: got 5, want 7" {
		t.Errorf("AllClose = %v", err)
	}
	// NaN matches NaN, and different dtypes compare by value.
	n := New(ir.F64, []int64{2})
	n.Set(0, nan())
	m := New(ir.F16, []int64{2})
	m.Set(0, nan())
	if err := AllClose(m, n, 0, 0); err != nil {
		t.Errorf("AllClose with NaNs: %v", err)
	}
	if err := Equal(iota(ir.I64, 3), iota(ir.I64, 3)); err != nil {
		t.Errorf("Equal on ints: %v", err)
	}
}

func nan() float64 { return math.NaN() }
