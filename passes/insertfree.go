package passes

import (
	"github.com/hirlab/hir/ir"
)

// insertFree frees every value that owns fresh storage after its last use in
// its block. A use of a view, of an op that wrote into the value, or of a
// registration handle counts as a use of the value. In a for body the body's
// values are freed at the end of the body; values from outside are never
// freed inside. Outputs, storage an output aliases, values the user frees,
// and async results never waited for are left alone.
func insertFree(p *ir.Program, _ *Context) error {
	fr := &freer{keep: map[*ir.Value]bool{}, waited: map[*ir.Value]bool{}}
	for _, out := range p.Outputs {
		fr.keep[out.Root()] = true
	}
	p.Walk(func(op *ir.Op) {
		switch op.Code {
		case ir.OpFree:
			fr.keep[op.Operands[0].Root()] = true
		case ir.OpWait:
			fr.waited[op.Operands[0]] = true
		}
	})
	fr.block(p.Body, false)
	return nil
}

type freer struct {
	keep   map[*ir.Value]bool // storage not to free: outputs, user frees
	waited map[*ir.Value]bool
}

// owns reports whether v holds storage of its own that this pass frees.
func (fr *freer) owns(v *ir.Value) bool {
	op := v.Def
	if op == nil || v.Tensor() == nil || fr.keep[v] {
		return false
	}
	if op.Code.IsCollective() && op.Async() && !fr.waited[v] {
		return false // still in flight: no point at which freeing is safe
	}
	switch op.Code.Class() {
	case ir.ClassPointwise, ir.ClassReduction, ir.ClassMatmul:
		return true
	}
	if op.Code == ir.OpAlloc || op.Code == ir.OpFusion {
		return true
	}
	// copy, a collective, recv: fresh unless given a destination.
	info := op.Code.Info()
	return info.Aliases == ir.AliasDest && info.AliasedOperand(len(op.Operands)) < 0
}

// uses calls f for every value op reads, its body included.
func uses(op *ir.Op, f func(*ir.Value)) {
	for _, x := range op.Operands {
		if x.Lit == nil {
			f(x)
		}
	}
	if op.Body != nil {
		for _, in := range op.Body.Ops {
			uses(in, f)
		}
	}
}

func (fr *freer) block(b *ir.Block, inLoop bool) {
	last := map[*ir.Value]int{} // storage root -> index of its last use
	for i, op := range b.Ops {
		uses(op, func(x *ir.Value) { last[x.Root()] = i })
	}
	after := map[int][]*ir.Value{}
	var atEnd []*ir.Value
	for i, op := range b.Ops {
		if op.Code == ir.OpFor {
			fr.block(op.Body, true)
		}
		for _, r := range op.Results {
			if !fr.owns(r) {
				continue
			}
			if inLoop {
				atEnd = append(atEnd, r)
				continue
			}
			j := i
			if l, used := last[r]; used && l > j {
				j = l
			}
			after[j] = append(after[j], r)
		}
	}
	for i, op := range b.Ops {
		if e := loopJoinEnd(b.Ops, i); op.Code == ir.OpFor && e != i && after[i] != nil {
			after[e] = append(after[e], after[i]...)
			delete(after, i)
		}
	}
	var out []*ir.Op
	for i, op := range b.Ops {
		out = append(out, op)
		for _, v := range after[i] {
			out = append(out, freeOp(v, op.Pos))
		}
	}
	for _, v := range atEnd {
		out = append(out, freeOp(v, v.Def.Pos))
	}
	b.Ops = out
}

func freeOp(v *ir.Value, pos ir.Pos) *ir.Op {
	return &ir.Op{Code: ir.OpFree, Operands: []*ir.Value{v}, Pos: pos}
}

// loopJoinEnd is, for the loop at ops[i], the index of the last op of the
// join the stream-parallel pass put after it (set_stream back, then
// wait_stream for the loop's streams): a free after the loop goes after
// the join, on the stream the loop's streams joined; i when there is none.
func loopJoinEnd(ops []*ir.Op, i int) int {
	end := i
	for j := i + 1; j < len(ops) && (ops[j].Code == ir.OpSetStream || ops[j].Code == ir.OpWaitStream); j++ {
		if ops[j].Code == ir.OpWaitStream {
			end = j
		}
	}
	return end
}
