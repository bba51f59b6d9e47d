package host

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/ir"
)

func TestSummary(t *testing.T) {
	withValues := func(dt ir.DType, shape []int64, vs ...float64) *Array {
		a := New(dt, shape)
		for i, v := range vs {
			a.Set(int64(i), v)
		}
		return a
	}
	withNaN := iota(ir.F32, 8, 8)
	withNaN.Set(3, math.NaN())
	for _, tc := range []struct {
		a    *Array
		want string
	}{
		{iota(ir.F32, 2, 3), "f32[2, 3] = [[0, 1, 2], [3, 4, 5]]"},
		{withValues(ir.F32, nil, 1.5), "f32[] = 1.5"},
		{withValues(ir.F32, []int64{3}, 0.1, -2.5e-9, 1e30), "f32[3] = [0.1, -2.5e-09, 1e+30]"},
		{withValues(ir.F64, []int64{2}, 0.1, 1.0/3), "f64[2] = [0.1, 0.3333333333333333]"},
		{withValues(ir.BF16, []int64{4}, 0.1, 1.0/3, 100, math.Inf(-1)), "bf16[4] = [0.1, 0.334, 100, -inf]"},
		{withValues(ir.F16, []int64{3}, math.NaN(), 65504, 1.0/3), "f16[3] = [nan, 65500, 0.3333]"},
		{withValues(ir.Bool, []int64{3}, 1, 0, 1), "bool[3] = [true, false, true]"},
		{New(ir.I32, []int64{0, 3}), "i32[0, 3] = []"},
		{New(ir.I32, []int64{2, 0}), "i32[2, 0] = [[], []]"},
		{iota(ir.I64, 2, 2, 2), "i64[2, 2, 2] = [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]"},
		{iota(ir.I32, 4, 16), "i32[4, 16] = [0, 1, 2, 3, 4, 5, 6, 7, ...] min=0 max=63 mean=31.5 sum=2016"},
		{iota(ir.F32, 33), "f32[33] = [0, 1, 2, 3, 4, 5, 6, 7, ...] min=0 max=32 mean=16 sum=528"},
		{withNaN, "f32[8, 8] = [0, 1, 2, nan, 4, 5, 6, 7, ...] min=0 max=63 mean=31.9524 sum=2013 nan=1"},
		{iota(ir.Bool, 40), "bool[40] = [false, true, true, true, true, true, true, true, ...] min=false max=true mean=0.975 sum=39"},
	} {
		assert.Equal(t, tc.want, tc.a.Summary())
	}
}
