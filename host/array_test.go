package host

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.Equal(t, int64(6), a.Len(), "len")
	require.Len(t, a.Data, 24, "bytes")
	a.Set(4, 1.5)
	assert.Equal(t, 1.5, a.At(4), "At(4)")
	s := New(ir.I64, nil)
	assert.Equal(t, int64(1), s.Len(), "scalar Len")
	s.SetInt(0, -1<<62)
	assert.Equal(t, int64(-1<<62), s.AtInt(0), "AtInt")
	b := New(ir.BF16, []int64{1})
	b.Set(0, 1.00390625) // halfway between 1 and the next bf16 (1 + 2^-7): even is 1
	assert.Equal(t, 1.0, b.At(0), "bf16 Set rounds")
}

func TestConvert(t *testing.T) {
	a := New(ir.F32, []int64{4})
	for i, v := range []float64{1.00390625, -2.7, 3.5, 1.01171875} {
		a.Set(int64(i), v)
	}
	b := a.Convert(ir.BF16)
	// Ties (elements 0 and 3) go to the even neighbour.
	want := []float64{1, -2.703125, 3.5, 1.015625}
	assert.Equal(t, want, []float64{b.At(0), b.At(1), b.At(2), b.At(3)}, "bf16 elements")
	c := a.Convert(ir.I32)
	assert.Equal(t, []int64{1, -2, 3, 1}, []int64{c.AtInt(0), c.AtInt(1), c.AtInt(2), c.AtInt(3)}, "f32 -> i32")
	big := New(ir.I64, []int64{1})
	big.SetInt(0, 1<<40+3)
	assert.Equal(t, int64(3), big.Convert(ir.I32).AtInt(0), "i64 -> i32 wraps")
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
				require.NoError(t, err)
				shards[r] = s
			}
			back, err := Unshard(shards, tc.axis)
			require.NoError(t, err)
			assert.Empty(t, cmp.Diff(a, back), "%v %v axis %d over %d: Unshard(Shard) differs", dt, tc.shape, tc.axis, tc.size)
		}
	}
}

func TestShardPicksBlock(t *testing.T) {
	a := iota(ir.I32, 2, 4)
	s, err := a.Shard(1, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, "i32[2, 2] = [[2, 3], [6, 7]]", s.Summary())
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
		assert.ErrorContains(t, err, tc.want, "Shard(%d, %d, %d)", tc.axis, tc.rank, tc.size)
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
		assert.ErrorContains(t, err, tc.want, "Unshard")
	}
}

func TestEqualAndAllClose(t *testing.T) {
	a := iota(ir.F32, 2, 3)
	b := a.Clone()
	assert.NoError(t, Equal(a, b), "Equal on a clone")
	b.Set(4, 4.5)
	b.Set(5, 7)
	assert.EqualError(t, Equal(a, b), "2 of 6 elements differ; the first at [1 1]: got 4, want 4.5")
	assert.EqualError(t, Equal(a, New(ir.F32, []int64{3, 2})), "got f32[2, 3], want f32[3, 2]", "Equal on shapes")
	assert.NoError(t, AllClose(a, b, 0, 3), "AllClose(atol 3)")
	assert.EqualError(t, AllClose(a, b, 0.2, 0), "1 of 6 elements differ (rtol 0.2, atol 0); the first at [1 2]: got 5, want 7")
	// NaN matches NaN, and different dtypes compare by value.
	n := New(ir.F64, []int64{2})
	n.Set(0, nan())
	m := New(ir.F16, []int64{2})
	m.Set(0, nan())
	assert.NoError(t, AllClose(m, n, 0, 0), "AllClose with NaNs")
	assert.NoError(t, Equal(iota(ir.I64, 3), iota(ir.I64, 3)), "Equal on ints")
}

func nan() float64 { return math.NaN() }
