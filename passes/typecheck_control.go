package passes

import (
	"github.com/hirlab/hir/ir"
)

// Ops with a body: for (its index and range; the body checked in a child
// block state) and fusion (pointwise ops and one trailing reduction).

func (c *checker) forOp(op *ir.Op, st *blockState) {
	from, to, step := op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1)
	idx := op.Body.Args[0]
	if idx.Type == nil {
		idx.Type = &ir.ScalarType{DType: ir.I64}
	}
	if s, ok := idx.Type.(*ir.ScalarType); !ok || s.DType != ir.I64 {
		c.errs.Add(op.Pos, "for: the index %s must be an i64 scalar, not %s", idx, idx.Type)
	}
	switch {
	case from > to:
		c.errs.Add(op.Pos, "for: the range %d to %d runs backwards (from must not exceed to)", from, to)
	case step > 0 && to > from:
		c.loops[idx] = loopRange{first: from, last: ir.LoopLast(from, to, step)}
	}
	c.block(op.Body, st.child())
}

// fusion: the body holds pointwise ops and at most one trailing reduction;
// the results are the yielded values, freshly allocated.
func (c *checker) fusion(op *ir.Op) ([]inferred, bool) {
	ok := true
	ops := op.Body.Ops
	for i, in := range ops {
		switch {
		case in.Code == ir.OpYield, in.Code.IsPointwise():
		case in.Code.IsReduction() && i == len(ops)-2:
		case in.Code.IsReduction():
			c.errs.Add(in.Pos, "fusion: the reduction %s must be the last op before yield", in.Code)
			ok = false
		default:
			c.errs.Add(in.Pos, "fusion: the body may hold only pointwise ops and one trailing reduction, not %s", in.Code)
			ok = false
		}
	}
	for _, x := range op.Operands {
		if _, good := c.tensor(op, x); !good {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	before := len(c.errs)
	// The body holds no async op and no wait (rejected above): its state
	// stays empty, and maps that are only read may be nil.
	c.block(op.Body, &blockState{})
	if len(c.errs) > before {
		return nil, false
	}
	y := ops[len(ops)-1]
	res := make([]inferred, len(y.Operands))
	for i, v := range y.Operands {
		t, good := c.tensor(y, v)
		if !good {
			return nil, false
		}
		res[i] = inferred{t: t}
	}
	return res, true
}
