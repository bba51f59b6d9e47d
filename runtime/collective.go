package runtime

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// The collective contract every backend shares: what a call must be
// before any backend looks at memory, and the defaults it takes. Each
// backend calls Resolve once per distinct call and adds only what is its
// own (where the tensors live, alignment, streams).

// ResolvedCall is a collective call checked against the contract, with its
// defaults filled in.
type ResolvedCall struct {
	// ReduceOp is the call's reduce op (sum where unset) for a reducing
	// collective, ReduceUnset for the others.
	ReduceOp ir.ReduceOp
	// Root is the call's root for a rooted collective, else 0.
	Root int
	// Axis and ConcatAxis are the call's, zeroed where its layout names
	// none (ir.Layout.NormaliseAxes), so that equal calls compare equal.
	Axis, ConcatAxis int
	// Access is what the algorithm as called touches remotely (the
	// symmetric-heap table).
	Access ir.RemoteAccess
}

// Resolve checks c against the contract on a world of world ranks: a
// collective with that algorithm, one dtype, a reduce op that exists and
// suits the dtype (avg for floats, nothing for bool), a root in range,
// local shapes that fit the layout, and a size the algorithm takes
// (ir.AlgoFits). A message starts with the call ("all_reduce algo=ring:
// ..."); the backend prefixes its own name and the rank.
func (c *CollectiveCall) Resolve(world int) (ResolvedCall, error) {
	r, err := c.resolve(world)
	if err != nil {
		return r, fmt.Errorf("%s algo=%s: %w", c.Op, c.Algo, err)
	}
	return r, nil
}

func (c *CollectiveCall) resolve(world int) (ResolvedCall, error) {
	var r ResolvedCall
	if !c.Op.IsCollective() {
		return r, fmt.Errorf("%s is not a collective", c.Op)
	}
	access, ok := ir.LookupRule(c.Op, c.Algo)
	if !ok {
		return r, fmt.Errorf("%s has no algorithm %q (it has: %s)", c.Op, c.Algo, strings.Join(ir.Words(ir.Algorithms(c.Op)), ", "))
	}
	r.Access = access
	dt := c.In.DType
	if dt != c.Out.DType {
		return r, fmt.Errorf("input is %s but output is %s", dt, c.Out.DType)
	}
	info := c.Op.Info()
	if info.Reduces {
		r.ReduceOp = c.ReduceOp
		if r.ReduceOp == ir.ReduceUnset {
			r.ReduceOp = ir.ReduceSum
		}
		switch {
		case !r.ReduceOp.Valid():
			return r, fmt.Errorf("unknown reduce op %q (want one of %s)", r.ReduceOp, strings.Join(ir.ReduceOpWords, ", "))
		case dt == ir.Bool:
			return r, fmt.Errorf("cannot reduce %s tensors (op=%s); reductions take f32, f16, bf16, f64, i32 or i64", dt, r.ReduceOp)
		case r.ReduceOp == ir.ReduceAvg && !dt.IsFloat():
			return r, fmt.Errorf("op=avg needs a float dtype, not %s", dt)
		}
	}
	if info.Rooted {
		if c.Root < 0 || c.Root >= world {
			return r, fmt.Errorf("root %d out of range [0, %d)", c.Root, world)
		}
		r.Root = c.Root
	}
	if err := c.CheckShapes(world); err != nil {
		return r, err
	}
	r.Axis, r.ConcatAxis = info.Layout.NormaliseAxes(c.Axis, c.ConcatAxis)
	if err := ir.AlgoFits(c.Op, c.Algo, c.In.Bytes(), c.Out.Bytes(), world); err != nil {
		return r, err
	}
	return r, nil
}

// CheckShapes checks that c's local input and output shapes fit its op on
// a world of d ranks (ir.Layout.CheckShapes).
func (c *CollectiveCall) CheckShapes(d int) error {
	return c.Op.Info().Layout.CheckShapes(c.In.Shape, c.Out.Shape, c.Axis, c.ConcatAxis, d)
}
