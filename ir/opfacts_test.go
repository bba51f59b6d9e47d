package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOpFacts(t *testing.T) {
	floats := map[Opcode]bool{OpExp: true, OpLog: true, OpTanh: true, OpSigmoid: true, OpGelu: true}
	layouts := map[Opcode]Layout{
		OpAllGather: LayoutGather, OpGather: LayoutGather,
		OpReduceScatter: LayoutScatter, OpScatter: LayoutScatter,
		OpAllToAll:  LayoutAllToAll,
		OpAllReduce: LayoutSame, OpBroadcast: LayoutSame, OpReduce: LayoutSame,
	}
	reduces := map[Opcode]bool{OpAllReduce: true, OpReduceScatter: true, OpReduce: true}
	rooted := map[Opcode]bool{OpBroadcast: true, OpReduce: true, OpGather: true, OpScatter: true}
	offStream := map[Opcode]bool{OpStream: true, OpSetStream: true, OpPickStream: true, OpWaitStream: true, OpWait: true, OpTransfer: true}
	for _, op := range Opcodes() {
		info := op.Info()
		kernel := op.Class() == ClassPointwise || op.Class() == ClassReduction || op.Class() == ClassMatmul || op.IsCollective() ||
			op == OpFusion || op == OpCopy || op == OpAlloc || op == OpStreamBarrier
		assert.Equal(t, kernel, info.Kernel, "%s: Kernel", op)
		assert.Equal(t, op == OpBarrier || op == OpStreamBarrier, info.Meets, "%s: Meets", op)
		assert.Equal(t, offStream[op], info.OffStream != "", "%s: OffStream", op)
		assert.False(t, info.Kernel && info.OffStream != "", "%s: Kernel work on another stream", op)
		assert.Equal(t, floats[op], info.FloatOnly, "%s: FloatOnly", op)
		assert.Equal(t, layouts[op], info.Layout, "%s: Layout", op)
		assert.Equal(t, reduces[op], info.Reduces, "%s: Reduces", op)
		assert.Equal(t, rooted[op], info.Rooted, "%s: Rooted", op)
		for n := info.MinOperands; n <= max(info.MaxOperands, info.MinOperands+2); n++ {
			want := -1
			switch {
			case op.Class() == ClassView, op == OpRegister:
				want = 0
			case op == OpCopy, op.IsCollective(), op == OpTransfer:
				if n == 2 {
					want = 1
				}
			case op == OpRecv:
				if n == 1 {
					want = 0
				}
			case op == OpMatmul:
				if n == 3 {
					want = 2 // the destination
				}
			}
			assert.Equal(t, want, info.AliasedOperand(n), "%s with %d operands: AliasedOperand", op, n)
		}
	}
}
