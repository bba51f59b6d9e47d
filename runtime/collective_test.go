package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/ir"
)

func TestCollectiveCheckShapes(t *testing.T) {
	call := func(op ir.Opcode, in, out []int64, axis, concat int) *CollectiveCall {
		return &CollectiveCall{Op: op, Axis: axis, ConcatAxis: concat,
			In: Tensor{DType: ir.F32, Shape: in}, Out: Tensor{DType: ir.F32, Shape: out}}
	}
	for _, c := range []struct {
		call *CollectiveCall
		err  string // "" when it fits
	}{
		{call(ir.OpAllGather, []int64{2, 3}, []int64{8, 3}, 0, 0), ""},
		{call(ir.OpAllGather, []int64{2, 3}, []int64{2, 12}, 1, 0), ""},
		{call(ir.OpAllGather, []int64{2, 3}, []int64{6, 3}, 0, 0), "is not the input's"},
		{call(ir.OpGather, []int64{2, 3}, []int64{8, 3}, 2, 0), "input axis 2 out of range"},
		{call(ir.OpReduceScatter, []int64{8, 3}, []int64{2, 3}, 0, 0), ""},
		{call(ir.OpScatter, []int64{8, 3}, []int64{2, 4}, 0, 0), "is not the output's"},
		{call(ir.OpAllToAll, []int64{2, 8}, []int64{8, 2}, 1, 0), ""},
		{call(ir.OpAllToAll, []int64{2, 8}, []int64{8, 8}, 1, 0), "do not fit a split"},
		{call(ir.OpAllToAll, []int64{2, 8}, []int64{2, 8}, 1, 1), "both 1"},
		{call(ir.OpAllReduce, []int64{5}, []int64{5}, 0, 0), ""},
		{call(ir.OpBroadcast, []int64{5}, []int64{4}, 0, 0), "differ"},
	} {
		err := c.call.CheckShapes(4)
		if c.err == "" {
			assert.NoErrorf(t, err, "%s %v -> %v", c.call.Op, c.call.In.Shape, c.call.Out.Shape)
		} else {
			assert.ErrorContainsf(t, err, c.err, "%s %v -> %v", c.call.Op, c.call.In.Shape, c.call.Out.Shape)
		}
	}
}
