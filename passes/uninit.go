package passes

import (
	"github.com/hirlab/hir/ir"
)

// checkUninit is validate's part for `alloc uninit=true`: such a tensor
// holds undefined memory until something writes it, so one that no op of
// the program ever writes (no op's destination, in whole or through a
// view, and no registration a peer may write through) but that some op
// reads holds nothing but undefined memory wherever it is read: a certain
// bug, reported at the alloc. Every rank runs the same program, so a
// peer's write through its view of a symmetric tensor is a write by an op
// of this program too. Which element is written before which read is not
// checked (the CPU runtime's NaNs show that in tests, SEMANTICS.md).
func checkUninit(p *ir.Program, v *validator) {
	// state of each uninit alloc's storage; most programs have none, and
	// pay one walk for it
	const read, written = 1, 2
	state := map[*ir.Value]int{}
	var uninit []*ir.Value
	p.Walk(func(op *ir.Op) {
		if op.Uninit() && len(op.Results) == 1 {
			uninit = append(uninit, op.Results[0])
			state[op.Results[0]] = 0
		}
	})
	if len(uninit) == 0 {
		return
	}
	mark := func(x *ir.Value, how int) {
		if x == nil || x.Tensor() == nil {
			return
		}
		if st, ok := state[x.Root()]; ok {
			state[x.Root()] = st | how
		}
	}
	p.Walk(func(op *ir.Op) {
		info := op.Code.Info()
		dst := info.Destination(len(op.Operands))
		for i, x := range op.Operands {
			switch {
			case i == dst || info.PeersWrite:
				mark(x, written)
			case op.Code != ir.OpFree && info.Class != ir.ClassView:
				mark(x, read)
			}
		}
	})
	for _, out := range p.Outputs {
		mark(out, read)
	}
	for _, x := range uninit {
		if state[x] == read {
			v.errs.Add(x.Pos, "%s is allocated uninit=true but no op writes it (no op's destination, in whole or through a view, and no register): every read sees undefined memory; drop uninit=true for a zero-filled tensor, or write it before reading it", x)
		}
	}
}
