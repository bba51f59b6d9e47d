package passes

import (
	"slices"

	"github.com/hirlab/hir/ir"
)

// A fusion is one kernel, and a kernel walks one iteration space (the
// broadcast of its values' local shapes, or the input of its trailing
// reduction); see docs/CODEGEN.md. fits keeps independent ops of
// incompatible shapes, which are consecutive but unrelated, out of one run.

// fits reports whether op may join run without leaving its iteration space.
func (f *fuser) fits(run []*ir.Op, op *ir.Op) bool {
	if len(run) == 0 {
		return true
	}
	var space []int64
	shapes := make([][]int64, len(run))
	for i, r := range run {
		s, ok := f.local(r.Results[0])
		if !ok {
			return false
		}
		if space, ok = ir.BroadcastShapes(space, s); !ok {
			return false
		}
		shapes[i] = s
	}
	if op.Code.IsReduction() {
		// Every value of the run is computed per element of the
		// reduction's input, so each must broadcast into it.
		in, ok := f.local(op.Operands[0])
		if !ok {
			return false
		}
		for _, s := range shapes {
			if b, ok := ir.BroadcastShapes(in, s); !ok || !slices.Equal(b, in) {
				return false
			}
		}
		return true
	}
	s, ok := f.local(op.Results[0])
	if !ok {
		return false
	}
	_, ok = ir.BroadcastShapes(space, s)
	return ok
}

// local is v's local shape on the program's mesh.
func (f *fuser) local(v *ir.Value) ([]int64, bool) {
	t := v.Tensor()
	if t == nil {
		return nil, false
	}
	s, err := t.LocalShape(max(f.mesh, 1))
	return s, err == nil
}
