package evaluator

import (
	"fmt"
	"slices"

	"github.com/hirlab/hir/ir"
)

// inputWriters finds, by input index, an op that may write the input's
// storage in place: one whose destination operand is the input or a view
// of it, or one that lets the peers write it (a registration). Such an
// input cannot keep its value between Runs (Options.KeepInputs); nil where
// none does.
func inputWriters(prog *ir.Program) []*ir.Op {
	index := make(map[*ir.Value]int, len(prog.Inputs))
	for i, in := range prog.Inputs {
		index[in] = i
	}
	writers := make([]*ir.Op, len(prog.Inputs))
	prog.Walk(func(op *ir.Op) {
		info := op.Code.Info()
		var target *ir.Value
		switch {
		case info.PeersWrite && len(op.Operands) > 0:
			target = op.Operands[0]
		case info.Aliases == ir.AliasDest:
			if a := info.AliasedOperand(len(op.Operands)); a >= 0 {
				target = op.Operands[a]
			}
		}
		if target == nil {
			return
		}
		// A view's or a destination's storage is what it aliases.
		if i, ok := index[target.Root()]; ok && writers[i] == nil {
			writers[i] = op
		}
	})
	return writers
}

// keptInputError says why input i cannot be left out of a Run.
func (j *Job) keptInputError(i int) string {
	in := j.prog.Inputs[i]
	switch {
	case !j.opts.KeepInputs:
		return fmt.Sprintf("%s : %s", in, in.Tensor())
	case j.writers[i] != nil:
		w := j.writers[i]
		return fmt.Sprintf("%s : %s (kept inputs must not change, but %s at %s may write it: pass it to every Run)",
			in, in.Tensor(), w.Code, w.Pos)
	default:
		return fmt.Sprintf("%s : %s (no earlier Run gave it, so there is nothing to keep)", in, in.Tensor())
	}
}

// KeepsInput reports whether a Run may leave out the input name once a
// Run has given it: Options.KeepInputs is set and the program never
// writes the input in place.
func (j *Job) KeepsInput(name string) bool {
	i := slices.IndexFunc(j.prog.Inputs, func(in *ir.Value) bool { return in.Name == name })
	return j.opts.KeepInputs && i >= 0 && j.writers[i] == nil
}
