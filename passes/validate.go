package passes

import (
	"fmt"

	"github.com/hirlab/hir/ir"
)

// validate checks what depends on the mesh and on memory: sharded extents
// the mesh divides, the rules of symmetric_contiguous_view, peers and roots
// inside the mesh, collectives on device memory, frees (no free of an
// input, no use after free), and `alloc uninit=true` tensors read but never
// written. It runs on a typed program.
func validate(p *ir.Program, _ *Context) error {
	if n := p.Mesh.Size(); n > ir.MaxMeshSize {
		var errs ir.ErrorList
		errs.Add(p.Mesh.Pos, "mesh of %d ranks is larger than the %d ranks a program may have (ir.MaxMeshSize; docs/RUNTIME.md says why)", n, ir.MaxMeshSize)
		return errs.Err()
	}
	v := &validator{size: p.Mesh.Size(), inputs: map[*ir.Value]bool{}, outputs: map[*ir.Value]*ir.Value{}, badShard: map[*ir.Value]bool{}}
	for _, out := range p.Outputs {
		v.outputs[out.Root()] = out
	}
	for _, in := range p.Inputs {
		v.inputs[in] = true
		v.divisible(in, "input "+in.String(), false)
	}
	top := &freeScope{freed: map[*ir.Value]ir.Pos{}}
	v.block(p.Body, top)
	checkTransfers(p, v)
	checkTransferRaces(p, v)
	checkPointToPoint(p, v)
	checkUninit(p, v)
	return v.errs.Err()
}

type validator struct {
	size     int
	errs     ir.ErrorList
	inputs   map[*ir.Value]bool
	outputs  map[*ir.Value]*ir.Value // storage root -> the output that needs it
	badShard map[*ir.Value]bool      // values already reported as indivisible
}

// freeScope records the storage freed in a block; a for body's scope sees
// its parent's.
type freeScope struct {
	parent  *freeScope
	freed   map[*ir.Value]ir.Pos // storage root -> the free's position
	defined map[*ir.Value]bool   // values defined in a for body (nil at top)
}

func (s *freeScope) lookup(root *ir.Value) (ir.Pos, bool) {
	for ; s != nil; s = s.parent {
		if pos, ok := s.freed[root]; ok {
			return pos, true
		}
	}
	return ir.Pos{}, false
}

// divisible reports a tensor whose size does not fit in an int64
// (ir.TensorType.SizeError) or whose sharded extent the mesh does not
// divide. A value computed from one already reported is not reported again.
func (v *validator) divisible(x *ir.Value, what string, derived bool) {
	t := x.Tensor()
	if t == nil {
		return
	}
	if err := t.SizeError(); err != nil {
		v.badShard[x] = true
		if !derived {
			v.errs.Add(x.Pos, "%s : %s: %v", what, t, err)
		}
		return
	}
	if err := t.ShardError(v.size); err != nil {
		v.badShard[x] = true
		if !derived {
			v.errs.Add(x.Pos, "%s : %s: %v", what, t, err)
		}
	}
}

func (v *validator) block(b *ir.Block, s *freeScope) {
	for _, op := range b.Ops {
		v.op(op, s)
	}
}

func (v *validator) op(op *ir.Op, s *freeScope) {
	derived := false
	for _, x := range op.Operands {
		if x.Lit != nil {
			continue
		}
		derived = derived || v.badShard[x]
		if pos, freed := s.lookup(x.Root()); freed {
			if r := x.Root(); op.Code == ir.OpFree && r == x {
				v.errs.Add(op.Pos, "free: %s is freed twice (first at %s)", x, pos)
			} else if r != x {
				v.errs.Add(op.Pos, "%s: %s (which aliases %s) is used after `free` at %s", op.Code, x, r, pos)
			} else {
				v.errs.Add(op.Pos, "%s: %s is used after `free` at %s", op.Code, x, pos)
			}
		}
	}
	for _, r := range op.Results {
		pos := r.Pos
		if !pos.IsValid() {
			pos = op.Pos
		}
		if t := r.Tensor(); t != nil {
			if err := t.SizeError(); err != nil {
				// every size computed from t (bytes, strides, offsets)
				// would wrap: report it instead
				v.badShard[r] = true
				if !derived {
					v.errs.Add(pos, "%s: %s : %s: %v", op.Code, r, t, err)
				}
			} else if err := t.ShardError(v.size); err != nil {
				v.badShard[r] = true
				if !derived {
					v.errs.Add(pos, "%s: %s : %s: %v", op.Code, r, t, err)
				}
			}
		}
		if s.defined != nil {
			s.defined[r] = true
		}
	}
	switch {
	case op.Code == ir.OpFree:
		v.free(op, s)
	case op.Code == ir.OpSymmetricContiguousView:
		v.contiguousView(op)
	case op.Code.IsCollective():
		v.collective(op)
	}
	if _, has := op.Attr("peer"); has {
		v.peer(op)
	}
	if op.Code == ir.OpFor {
		inner := &freeScope{parent: s, freed: map[*ir.Value]ir.Pos{}, defined: map[*ir.Value]bool{}}
		v.block(op.Body, inner)
	}
	if op.Code == ir.OpFusion && !derived {
		v.fusionSizes(op)
	}
}

// fusionSizes reports a value inside a fusion body whose size does not fit
// in an int64 (a broadcast the trailing reduction shrinks again): the body
// means what it means op by op, so its intermediates must have sizes too.
func (v *validator) fusionSizes(op *ir.Op) {
	for _, in := range op.Body.Ops {
		for _, r := range in.Results {
			if t := r.Tensor(); t != nil {
				if err := t.SizeError(); err != nil {
					pos := r.Pos
					if !pos.IsValid() {
						pos = in.Pos
					}
					v.errs.Add(pos, "%s: %s : %s: %v", in.Code, r, t, err)
					return
				}
			}
		}
	}
}

func (v *validator) free(op *ir.Op, s *freeScope) {
	x := op.Operands[0]
	r := x.Root()
	switch {
	case v.inputs[r] && r == x:
		v.errs.Add(op.Pos, "free: %s is a program input; its storage belongs to the caller", x)
		return
	case v.inputs[r]:
		v.errs.Add(op.Pos, "free: %s aliases the program input %s, whose storage belongs to the caller", x, r)
		return
	case r != x:
		v.errs.Add(op.Pos, "free: %s aliases %s's storage; free %s instead", x, r, r)
		return
	case s.defined != nil && !s.defined[r]:
		v.errs.Add(op.Pos, "free: %s is defined outside this for loop; freeing it in the body would free it on every iteration", x)
		return
	case v.outputs[r] == x:
		v.errs.Add(op.Pos, "free: %s is a program output; outputs live to the end of the program", x)
		return
	case v.outputs[r] != nil:
		v.errs.Add(op.Pos, "free: the program output %s aliases %s; outputs live to the end of the program", v.outputs[r], x)
		return
	}
	if _, freed := s.lookup(r); !freed {
		s.freed[r] = op.Pos
	}
}

// contiguousView checks the view's rules, each with its own message.
func (v *validator) contiguousView(op *ir.Op) {
	x := op.Operands[0]
	t := x.Tensor()
	if t == nil {
		return
	}
	if t.Mem != ir.Symmetric {
		v.errs.Add(op.Pos, "symmetric_contiguous_view: %s is in %s memory; it must be symmetric (copy it with mem=symmetric)", x, t.Mem)
	}
	switch {
	case t.Rank() == 0:
		v.errs.Add(op.Pos, "symmetric_contiguous_view: %s is a scalar (rank 0); it needs an axis 0 sharded on DIDx", x)
	case t.Dims[0].Parallel != ir.DIDx:
		v.errs.Add(op.Pos, "symmetric_contiguous_view: axis 0 of %s (%s) is not sharded on DIDx", x, t)
	case t.Dims[0].Extent != int64(v.size):
		v.errs.Add(op.Pos, "symmetric_contiguous_view: axis 0 of %s has extent %d, so each rank holds %s rows; it must hold 1 (extent = the mesh size %d)", x, t.Dims[0].Extent, localRows(t.Dims[0].Extent, v.size), v.size)
	}
}

func localRows(extent int64, size int) string {
	if size > 0 && extent%int64(size) == 0 {
		return fmt.Sprint(extent / int64(size))
	}
	return fmt.Sprintf("%d/%d", extent, size)
}

func (v *validator) collective(op *ir.Op) {
	for _, x := range op.Operands {
		if t := x.Tensor(); t != nil && t.Mem == ir.Host {
			v.errs.Add(op.Pos, "%s: %s is in host memory; collectives work on device memory (copy it to global or symmetric first)", op.Code, x)
		}
	}
	if r := op.Result(); len(op.Operands) == 1 && r != nil {
		if t := r.Tensor(); t != nil && t.Mem == ir.Host {
			v.errs.Add(op.Pos, "%s: the result %s is annotated host memory; collectives work on device memory", op.Code, r)
		}
	}
	v.algoFits(op)
	if _, has := op.Attr("root"); has {
		if k := op.Root(); k < 0 || k >= v.size {
			v.errs.Add(op.Pos, "%s: root=%d is outside the mesh of %d ranks (0..%d)", op.Code, k, v.size, v.size-1)
		}
	}
}

// algoFits reports a collective too large for its algorithm (ir.AlgoFits:
// algo=ll sending more to a peer than the protocol stages), a size known
// before any rank runs.
func (v *validator) algoFits(op *ir.Op) {
	if !op.Algo().SizeLimited() {
		return
	}
	in, out := op.Operands[0].Tensor(), op.Result().Tensor()
	if in == nil || out == nil || v.badShard[op.Operands[0]] || v.badShard[op.Result()] {
		return
	}
	bytes := func(t *ir.TensorType) int64 {
		s, err := t.LocalShape(v.size)
		if err != nil {
			return 0
		}
		return ir.Product(s) * int64(t.DType.Size())
	}
	if err := ir.AlgoFits(op.Code, op.Algo(), bytes(in), bytes(out), v.size); err != nil {
		v.errs.Add(op.Pos, "%s: %v", op.Code, err)
	}
}

func (v *validator) peer(op *ir.Op) {
	a, _ := op.Attr("peer")
	n := int64(v.size)
	switch {
	case a.Relative && (a.Int <= -n || a.Int >= n):
		v.errs.Add(op.Pos, "%s: peer=%s reaches past the mesh of %d ranks (a relative peer lies between -%d and +%d)", op.Code, ir.FormatAttrValue(a), n, n-1, n-1)
	case !a.Relative && (a.Int < 0 || a.Int >= n):
		v.errs.Add(op.Pos, "%s: peer=%d is outside the mesh of %d ranks (0..%d)", op.Code, a.Int, n, n-1)
	}
}
