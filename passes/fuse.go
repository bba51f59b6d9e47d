package passes

import (
	"github.com/hirlab/hir/ir"
)

// fuse groups each maximal run of consecutive pointwise ops of a block (plus
// at most one trailing reduction) into one fusion op when the run holds two
// ops or more. A run shares one iteration space (fuseshapes.go): an op
// whose local shape does not broadcast with the run's, or a reduction whose
// input does not hold every value of the run, starts a new run. The values the run uses from outside become the fusion's
// operands in first-use order; the values used after the run (or output)
// become its results, keeping their names, while the body's copies get fresh
// ones (%a.f). Ops whose results live in other than global memory stay out.
func fuse(p *ir.Program, _ *Context) error {
	f := &fuser{names: newNamer(p), outputs: outputSet(p), users: map[*ir.Value][]*ir.Op{}, mesh: p.Mesh.Size()}
	p.Walk(func(op *ir.Op) {
		for _, x := range op.Operands {
			f.users[x] = append(f.users[x], op)
		}
	})
	f.block(p.Body)
	return nil
}

type fuser struct {
	names   namer
	outputs map[*ir.Value]bool
	users   map[*ir.Value][]*ir.Op
	mesh    int // local shapes decide whether ops share one iteration space
}

// fusible says whether op may join a run: pointwise (or, to end it, a
// reduction) with a result in global memory.
func fusible(op *ir.Op) (ok, ends bool) {
	if !op.Code.IsPointwise() && !op.Code.IsReduction() {
		return false, false
	}
	if t := op.Results[0].Tensor(); t == nil || t.Mem != ir.Global {
		return false, false
	}
	return true, op.Code.IsReduction()
}

func (f *fuser) block(b *ir.Block) {
	var out, run []*ir.Op
	flush := func() {
		if len(run) >= 2 {
			out = append(out, f.group(run))
		} else {
			out = append(out, run...)
		}
		run = nil
	}
	for _, op := range b.Ops {
		ok, ends := fusible(op)
		if ok && !f.fits(run, op) {
			flush() // one fusion is one kernel: one iteration space
		}
		switch {
		case !ok:
			flush()
			out = append(out, op)
		case ends:
			run = append(run, op)
			flush()
		default:
			run = append(run, op)
		}
	}
	flush()
	b.Ops = out
	// Bodies after the block's own runs, so the use lists above stay those
	// of the original ops.
	for _, op := range b.Ops {
		if op.Code == ir.OpFor {
			f.block(op.Body)
		}
	}
}

// group turns a run into one fusion op. The run's result values move to the
// fusion, so later uses need no rewriting.
func (f *fuser) group(run []*ir.Op) *ir.Op {
	inRun := map[*ir.Op]bool{}
	for _, op := range run {
		inRun[op] = true
	}
	fusion := &ir.Op{Code: ir.OpFusion, Pos: run[0].Pos, Body: &ir.Block{}}
	inner := map[*ir.Value]*ir.Value{}
	captured := map[*ir.Value]bool{}
	for _, op := range run {
		clone := &ir.Op{Code: op.Code, Attrs: append([]ir.Attr(nil), op.Attrs...), Pos: op.Pos}
		for _, x := range op.Operands {
			if in := inner[x]; in != nil {
				clone.Operands = append(clone.Operands, in)
				continue
			}
			if x.Lit == nil && !captured[x] {
				captured[x] = true
				fusion.Operands = append(fusion.Operands, x)
			}
			clone.Operands = append(clone.Operands, x)
		}
		r := op.Results[0]
		v := &ir.Value{Name: f.names.fresh(r.Name, ".f"), Type: r.Type, Def: clone, Pos: r.Pos}
		clone.Results = []*ir.Value{v}
		inner[r] = v
		fusion.Body.Ops = append(fusion.Body.Ops, clone)
	}
	var yields []*ir.Value
	for _, op := range run {
		if r := op.Results[0]; f.usedAfter(r, inRun) {
			fusion.Results = append(fusion.Results, r)
		}
	}
	if len(fusion.Results) == 0 { // dead run: keep its last value
		fusion.Results = []*ir.Value{run[len(run)-1].Results[0]}
	}
	for _, r := range fusion.Results {
		yields = append(yields, inner[r])
		r.Def = fusion
	}
	fusion.Body.Ops = append(fusion.Body.Ops, &ir.Op{Code: ir.OpYield, Operands: yields, Pos: run[len(run)-1].Pos})
	return fusion
}

func (f *fuser) usedAfter(v *ir.Value, inRun map[*ir.Op]bool) bool {
	if f.outputs[v] {
		return true
	}
	for _, u := range f.users[v] {
		if !inRun[u] {
			return true
		}
	}
	return false
}
