package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The layout facts every consumer asks: the axes a call names, read off
// the operand types, fit the shapes the layout checks, for each layout.
func TestLayoutFacts(t *testing.T) {
	const D = 4
	x := Tensor(F32, 8, 6).Sharded(0) // local [2, 6]
	for _, c := range []struct {
		layout        Layout
		in, out       *TensorType
		axis, concat  int
		inLoc, outLoc []int64
	}{
		{LayoutSame, x, x, 0, 0, []int64{2, 6}, []int64{2, 6}},
		{LayoutGather, x, x.Unsharded(), 0, 0, []int64{2, 6}, []int64{8, 6}},
		{LayoutScatter, Tensor(F32, 8, 8), Tensor(F32, 8, 8).Sharded(1), 1, 0, []int64{8, 8}, []int64{8, 2}},
		{LayoutAllToAll, x, x.Unsharded().Sharded(1), 1, 0, []int64{2, 8}, []int64{8, 2}},
	} {
		axis, concat := c.layout.CallAxes(c.in, c.out)
		assert.Equal(t, [2]int{c.axis, c.concat}, [2]int{axis, concat}, "layout %d", c.layout)
		assert.NoError(t, c.layout.CheckShapes(c.inLoc, c.outLoc, axis, concat, D), "layout %d", c.layout)
		a, k := c.layout.NormaliseAxes(axis+7, concat+9)
		switch c.layout {
		case LayoutSame:
			assert.Equal(t, [2]int{0, 0}, [2]int{a, k})
		case LayoutGather, LayoutScatter:
			assert.Equal(t, [2]int{axis + 7, 0}, [2]int{a, k})
		default:
			assert.Equal(t, [2]int{axis + 7, concat + 9}, [2]int{a, k})
		}
	}
	assert.ErrorContains(t, LayoutGather.CheckShapes([]int64{2, 6}, []int64{8, 5}, 0, 0, D), "is not the input's")
	assert.ErrorContains(t, LayoutAllToAll.CheckShapes([]int64{2, 6}, []int64{2, 6}, 0, 0, D), "both 0")
	assert.ErrorContains(t, LayoutSame.CheckShapes([]int64{2}, []int64{3}, 0, 0, D), "differ")
}

// The reduction-axes rule: in range, none twice, no negative axes; every
// problem listed. The checker, codegen and the CPU runtime call it
// (TestReductionAxesAgree in passes holds them to it).
func TestReducedAxes(t *testing.T) {
	r, errs := ReducedAxes([]int64{2, 0}, 3)
	assert.Equal(t, []bool{true, false, true}, r)
	assert.Empty(t, errs)
	assert.Equal(t, []int64{4}, ReducedShape([]int64{2, 4, 6}, r, false))
	assert.Equal(t, []int64{1, 4, 1}, ReducedShape([]int64{2, 4, 6}, r, true))
	_, errs = ReducedAxes([]int64{-1, 1, 1, 3}, 3)
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	assert.Equal(t, []string{"axis -1 is out of range for a rank-3 input", "axis 1 is listed twice", "axis 3 is out of range for a rank-3 input"}, msgs)
}

// The collectives hirrun bench times and auto's table ranks: one fact in
// the op table, read by bench, cudabench and the table.
func TestBenchmarkedCollectives(t *testing.T) {
	assert.Equal(t, []string{"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}, Words(BenchmarkedCollectives()))
	for _, op := range BenchmarkedCollectives() {
		assert.True(t, op.IsCollective(), "%s", op)
	}
}
