package ir

import (
	"fmt"
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

// allLayouts is every Layout value, LayoutNone included.
var allLayouts = []Layout{LayoutNone, LayoutSame, LayoutGather, LayoutScatter, LayoutAllToAll}

// The type rule of a collective, for every layout: the result type, or
// the error the checker prints after "op: " (testdata's goldens show them
// with their positions).
func TestLayoutResultType(t *testing.T) {
	x := &Value{Name: "x"}
	plain := Tensor(F32, 8, 6).In(Symmetric)
	rows := plain.Sharded(0)
	cols := plain.Sharded(1)
	for _, c := range []struct {
		layout Layout
		op     string
		t      *TensorType
		axis   int64
		want   *TensorType // nil: err
		err    string
	}{
		{layout: LayoutNone, op: "copy", t: rows, want: rows},
		{layout: LayoutSame, op: "all_reduce", t: rows, axis: 5, want: rows},
		{layout: LayoutSame, op: "broadcast", t: plain, want: plain},
		{layout: LayoutGather, op: "all_gather", t: rows, want: plain},
		{layout: LayoutGather, op: "gather", t: cols, axis: 9, want: plain},
		{layout: LayoutGather, op: "all_gather", t: plain, err: "%x is not sharded (f32[8, 6] symmetric); there is nothing to gather"},
		{layout: LayoutScatter, op: "reduce_scatter", t: plain, want: rows},
		{layout: LayoutScatter, op: "scatter", t: plain, axis: 1, want: cols},
		{layout: LayoutScatter, op: "reduce_scatter", t: cols, err: "%x is already sharded on axis 1; reduce_scatter needs an unsharded tensor"},
		{layout: LayoutScatter, op: "scatter", t: plain, axis: 2, err: "axis=2 is out of range for %x of type f32[8, 6] symmetric (rank 2)"},
		{layout: LayoutScatter, op: "scatter", t: plain, axis: -1, err: "axis=-1 is out of range for %x of type f32[8, 6] symmetric (rank 2)"},
		{layout: LayoutAllToAll, op: "all_to_all", t: rows, axis: 1, want: cols},
		{layout: LayoutAllToAll, op: "all_to_all", t: cols, want: rows},
		{layout: LayoutAllToAll, op: "all_to_all", t: plain, axis: 1, err: "%x is not sharded (f32[8, 6] symmetric); all_to_all moves the sharding from one axis to another"},
		{layout: LayoutAllToAll, op: "all_to_all", t: rows, axis: 3, err: "axis=3 is out of range for %x of type f32[8/DIDx, 6] symmetric (rank 2)"},
		{layout: LayoutAllToAll, op: "all_to_all", t: rows, err: "%x is already sharded on axis 0; axis= must name another axis"},
	} {
		name := fmt.Sprintf("%s/%s/axis=%d", c.op, c.t, c.axis)
		before := c.t.Clone()
		cloned := 0
		res, err := c.layout.ResultType(c.op, x, c.t, c.axis, func(t *TensorType) *TensorType { cloned++; return t.Clone() })
		assert.True(t, before.Equal(c.t), "%s: the operand's type changed", name)
		if c.want == nil {
			assert.EqualError(t, err, c.err, name)
			assert.Nil(t, res, name)
			continue
		}
		if assert.NoError(t, err, name) {
			assert.True(t, c.want.Equal(res), "%s: got %s, want %s", name, res, c.want)
			assert.Equal(t, 1, cloned, "%s: the result is not one copy made by clone", name)
		}
		again, err := c.layout.ResultType(c.op, x, c.t, c.axis, nil) // nil: Clone
		if assert.NoError(t, err, name) {
			assert.True(t, c.want.Equal(again), "%s: with no clone, got %s", name, again)
			assert.NotSame(t, c.t, again, name)
		}
	}
}

// The shapes a benchmark call uses, for every layout and world size: as
// the doc says, and fitting CheckShapes; none for a size below the world.
func TestLayoutBenchShapes(t *testing.T) {
	type shapes struct {
		in, out      []int64
		axis, concat int
		ok           bool
	}
	for _, c := range []struct {
		layout Layout
		n      int64
		world  int
		want   shapes
	}{
		{LayoutNone, 4096, 4, shapes{}},
		{LayoutSame, 4096, 4, shapes{[]int64{4096}, []int64{4096}, 0, 0, true}},
		{LayoutSame, 4095, 4, shapes{[]int64{4095}, []int64{4095}, 0, 0, true}},
		{LayoutGather, 4096, 4, shapes{[]int64{1024}, []int64{4096}, 0, 0, true}},
		{LayoutGather, 4095, 4, shapes{[]int64{1023}, []int64{4092}, 0, 0, true}},
		{LayoutScatter, 4096, 4, shapes{[]int64{4096}, []int64{1024}, 0, 0, true}},
		{LayoutScatter, 6, 3, shapes{[]int64{6}, []int64{2}, 0, 0, true}},
		{LayoutAllToAll, 4096, 4, shapes{[]int64{1, 4096}, []int64{4, 1024}, 1, 0, true}},
		{LayoutAllToAll, 4096, 1, shapes{[]int64{1, 4096}, []int64{1, 4096}, 1, 0, true}},
		{LayoutGather, 3, 4, shapes{}},
		{LayoutSame, 3, 4, shapes{}},
		{LayoutAllToAll, 0, 2, shapes{}},
		{LayoutSame, 4096, 0, shapes{}},
	} {
		name := fmt.Sprintf("layout %d, n=%d on %d", c.layout, c.n, c.world)
		var got shapes
		got.in, got.out, got.axis, got.concat, got.ok = c.layout.BenchShapes(c.n, c.world)
		assert.Equal(t, c.want, got, name)
		if got.ok {
			assert.NoError(t, c.layout.CheckShapes(got.in, got.out, got.axis, got.concat, c.world), name)
			sized := got.in
			if c.layout.SizedByOutput() {
				sized = got.out
			}
			want := c.n
			if c.layout != LayoutSame {
				want -= c.n % int64(c.world) // rounded down to a multiple of the world
			}
			assert.Equal(t, want, Product(sized), "%s: the size counted is not n", name)
		}
	}
	for _, l := range allLayouts {
		assert.Equal(t, l == LayoutGather, l.SizedByOutput(), "layout %d", l)
	}
}
