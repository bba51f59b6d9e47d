package passes

import (
	"github.com/hirlab/hir/ir"
)

// insertFree frees every value that owns fresh storage after its last use in
// its block. A use of a view, of an op that wrote into the value, or of a
// registration handle counts as a use of the value. In a for body the body's
// values are freed at the end of the body; values from outside are never
// freed inside. Outputs, storage an output aliases, values the user frees,
// and async results never waited for are left alone. An async op reads its
// operands until it completes, so their last use is its result's wait
// (uses), and an async op never waited for keeps its operands to the end
// of the Run: freed right after the post, an operand's buffer was taken
// by the next allocation of its size while the collective still read it
// (tp.ChunkedAsync's reduce_scatter gave wrong sums on the CPU runtime).
func insertFree(p *ir.Program, _ *Context) error {
	fr := &freer{keep: map[*ir.Value]bool{}, waited: map[*ir.Value]bool{}}
	for _, out := range p.Outputs {
		fr.keep[out.Root()] = true
	}
	var async []*ir.Op
	p.Walk(func(op *ir.Op) {
		switch op.Code {
		case ir.OpFree:
			fr.keep[op.Operands[0].Root()] = true
		case ir.OpWait:
			fr.waited[op.Operands[0]] = true
		}
		if op.Async() {
			async = append(async, op)
		}
	})
	for _, op := range async {
		if len(op.Results) > 0 && fr.waited[op.Results[0]] {
			continue
		}
		for _, x := range op.Operands {
			if x.Lit == nil {
				fr.keep[x.Root()] = true
			}
		}
	}
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
	info := op.Code.Info()
	if info.AliasedOperand(len(op.Operands)) >= 0 {
		return false // a view, or written into a destination it was given
	}
	switch op.Code.Class() {
	case ir.ClassPointwise, ir.ClassReduction, ir.ClassMatmul:
		return true
	}
	if op.Code == ir.OpAlloc || op.Code == ir.OpFusion {
		return true
	}
	// copy, a collective, recv: fresh unless given a destination.
	return info.Aliases == ir.AliasDest
}

// uses calls f for every value op reads, its body included; a wait also
// reads what the async op it waits for reads (in flight until then).
func uses(op *ir.Op, f func(*ir.Value)) {
	for _, x := range op.Operands {
		if x.Lit == nil {
			f(x)
		}
	}
	if op.Code == ir.OpWait && op.Operands[0].Def != nil && op.Operands[0].Def.Async() {
		for _, x := range op.Operands[0].Def.Operands {
			if x.Lit == nil {
				f(x)
			}
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
