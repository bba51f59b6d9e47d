package ir

import "testing"

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
	for _, op := range Opcodes() {
		info := op.Info()
		if info.FloatOnly != floats[op] {
			t.Errorf("%s: FloatOnly = %v", op, info.FloatOnly)
		}
		if info.Layout != layouts[op] || info.Reduces != reduces[op] || info.Rooted != rooted[op] {
			t.Errorf("%s: Layout %d Reduces %v Rooted %v", op, info.Layout, info.Reduces, info.Rooted)
		}
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
			}
			if got := info.AliasedOperand(n); got != want {
				t.Errorf("%s with %d operands: AliasedOperand = %d, want %d", op, n, got, want)
			}
		}
	}
}
