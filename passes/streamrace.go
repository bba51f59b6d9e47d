package passes

import (
	"fmt"

	"github.com/hirlab/hir/ir"
)

// The stream-parallel pass's checks (streamparallel.go): which ops may run
// in a loop with streams, and the loop-carried dependencies that would race
// once its iterations run on different streams.
//
// Values defined in a loop body are the iteration's own, so iterations
// share data only through storage defined outside the loop: what they read
// of it and what they write into it (a copy into a buffer, a collective's
// output buffer, recv's). Two accesses of one storage by different
// iterations race when one of them writes, unless they touch disjoint
// parts: a chain of views that is the same in both up to a `select` on the
// same axis by the loop's own index (each iteration its own slice), or by
// two different literals.

// storageAccess is one op's read or write of storage from outside the loop.
type storageAccess struct {
	op    *ir.Op
	x     *ir.Value // the operand as written
	root  *ir.Value // the storage it lies in (ir.Value.Root)
	path  []viewStep
	write bool
}

// viewStep is one view on the way from a storage to an operand.
type viewStep struct {
	code  ir.Opcode
	axis  int64
	index *ir.Value // select: a literal or a value
	shift string    // select: shift=rank
	shape []int64   // reshape
}

// pathTo returns x's storage and the views from it to x, outermost first.
func pathTo(x *ir.Value) (*ir.Value, []viewStep) {
	var rev []viewStep
	v := x
	for v.Def != nil {
		op := v.Def
		i := op.Code.Info().AliasedOperand(len(op.Operands))
		if i < 0 || op.Operands[i].Lit != nil {
			break
		}
		if op.Code.Class() == ir.ClassView {
			st := viewStep{code: op.Code}
			switch op.Code {
			case ir.OpSelect:
				st.axis, st.index, st.shift = op.IntAttr("axis", 0), op.Operands[1], op.WordAttr("shift", "")
			case ir.OpReshape:
				st.shape = op.IntsAttr("shape")
			}
			rev = append(rev, st)
		}
		v = op.Operands[i] // a write into a buffer lies in the buffer's storage
	}
	path := make([]viewStep, len(rev))
	for i, st := range rev {
		path[len(rev)-1-i] = st
	}
	return v, path
}

// loopScope is what the checks know of one loop with streams.
type loopScope struct {
	loop   *ir.Op
	index  *ir.Value
	inside map[*ir.Value]bool // values defined in the loop (results, indexes)
}

func newLoopScope(loop *ir.Op) *loopScope {
	ls := &loopScope{loop: loop, index: loop.Body.Args[0], inside: map[*ir.Value]bool{}}
	loop.Body.Walk(func(op *ir.Op) {
		for _, r := range op.Results {
			ls.inside[r] = true
		}
		if op.Body != nil {
			for _, a := range op.Body.Args {
				ls.inside[a] = true
			}
		}
	})
	ls.inside[ls.index] = true
	return ls
}

// accesses appends op's reads and writes of tensors to out (bodies of
// loops included, fusions by their operands); with ls set, only those of
// storage defined outside ls's loop.
func (ls *loopScope) accesses(op *ir.Op, out []storageAccess) []storageAccess {
	if op.Code == ir.OpFor {
		for _, in := range op.Body.Ops {
			out = ls.accesses(in, out)
		}
		return out
	}
	if op.Code.Class() == ir.ClassView || op.Code == ir.OpFree || op.Code == ir.OpWait {
		return out // a view reads nothing (its uses do); free and wait touch no data
	}
	dest := -1
	if op.Code.Info().Aliases == ir.AliasDest {
		dest = op.Code.Info().AliasedOperand(len(op.Operands))
	}
	for i, x := range op.Operands {
		if x.Lit != nil || x.Tensor() == nil {
			continue
		}
		root, path := pathTo(x)
		if ls != nil && ls.inside[root] {
			continue // the iteration's own storage
		}
		out = append(out, storageAccess{op: op, x: x, root: root, path: path, write: i == dest})
	}
	return out
}

// disjoint reports whether accesses a and b, made by two different
// iterations of ls's loop, touch disjoint parts of their storage.
func (ls *loopScope) disjoint(a, b storageAccess) bool {
	return pathsDisjoint(a.path, b.path, func(k int) indexRelation {
		return ls.compareIndexes(a.path[k].index, b.path[k].index)
	})
}

// pathsDisjoint reports whether two chains of views of one storage touch
// disjoint parts: they do where, after the same steps so far, they select
// on the same axis (and shift) two indexes that rel, asked about step k,
// says differ. Anything else may meet; one path within the other does.
func pathsDisjoint(a, b []viewStep, rel func(k int) indexRelation) bool {
	for k := 0; k < len(a) && k < len(b); k++ {
		sa, sb := a[k], b[k]
		if sa.code != sb.code {
			return false
		}
		switch sa.code {
		case ir.OpReshape:
			if !equalInts(sa.shape, sb.shape) {
				return false
			}
		case ir.OpSelect:
			if sa.axis != sb.axis || sa.shift != sb.shift {
				return false
			}
			switch rel(k) {
			case indexesDiffer:
				return true
			case indexesMayMeet:
				return false
			}
		}
	}
	return false // one lies within the other
}

type indexRelation uint8

const (
	indexesEqual   indexRelation = iota // the same index in both iterations
	indexesDiffer                       // never the same in two iterations
	indexesMayMeet                      // may be the same
)

// compareIndexes compares two select indexes as two different iterations
// see them.
func (ls *loopScope) compareIndexes(a, b *ir.Value) indexRelation {
	own := func(v *ir.Value) bool { return v == ls.index }
	switch {
	case own(a) && own(b):
		return indexesDiffer // each iteration its own index
	case own(a) || own(b):
		lit := a
		if own(a) {
			lit = b
		}
		if lit.Lit != nil && !ls.hasIndex(lit.Lit.Int) {
			return indexesDiffer // a slice no iteration selects by the index
		}
		return indexesMayMeet
	case a.Lit != nil && b.Lit != nil:
		if a.Lit.Int == b.Lit.Int {
			return indexesEqual
		}
		return indexesDiffer
	case a == b && !ls.inside[a]:
		return indexesEqual // an outer loop's index: fixed while this loop runs
	}
	return indexesMayMeet // an inner loop's index ranges over many
}

// hasIndex reports whether some iteration of the loop has index i.
func (ls *loopScope) hasIndex(i int64) bool {
	from, to, step := ls.loop.IntAttr("from", 0), ls.loop.IntAttr("to", 0), ls.loop.IntAttr("step", 1)
	if i < from || i >= to || step < 1 {
		return false
	}
	return (uint64(i)-uint64(from))%uint64(step) == 0
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkRaces reports every write of ls's loop that another iteration's
// storageAccess (or its own, in another iteration) would race with, once per
// writing op.
func (ls *loopScope) checkRaces(errs *ir.ErrorList) {
	var acc []storageAccess
	for _, op := range ls.loop.Body.Ops {
		acc = ls.accesses(op, acc)
	}
	reported := map[*ir.Op]bool{}
	for _, w := range acc {
		if !w.write || reported[w.op] {
			continue
		}
		for _, a := range acc {
			if a.root != w.root || ls.disjoint(w, a) {
				continue
			}
			reported[w.op] = true
			errs.Add(w.op.Pos, "%s", ls.raceMessage(w, a))
			break
		}
	}
}

func (ls *loopScope) raceMessage(w, a storageAccess) string {
	n := ls.loop.Streams()
	fix := fmt.Sprintf("give each iteration its own slice (`select %s, %s`), or drop `streams %d`", w.root, ls.index, n)
	if a.op == w.op && a.x == w.x {
		return fmt.Sprintf("%s: every iteration of the loop at %s writes into the same %s: with streams %d, iterations on different streams would race; %s",
			w.op.Code, ls.loop.Pos, describeStorage(w), n, fix)
	}
	verb := "reads"
	if a.write {
		verb = "writes into"
	}
	return fmt.Sprintf("%s: an iteration of the loop at %s writes into %s, which the %s at %s %s in other iterations: with streams %d, iterations on different streams would race (a loop-carried dependency); %s",
		w.op.Code, ls.loop.Pos, describeStorage(w), a.op.Code, a.op.Pos, verb, n, fix)
}

// describeStorage names what a storageAccess touches: "%acc (defined outside
// the loop at p.hir:3:1)", or "%o, a view of %acc (...)".
func describeStorage(a storageAccess) string {
	where := fmt.Sprintf("defined outside the loop at %s", a.root.Pos)
	if a.root.Def == nil {
		where = fmt.Sprintf("an input of the program, at %s", a.root.Pos)
	}
	if a.x == a.root {
		return fmt.Sprintf("%s (%s)", a.root, where)
	}
	return fmt.Sprintf("%s, a view of %s (%s)", a.x, a.root, where)
}
