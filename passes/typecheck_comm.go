package passes

import (
	"github.com/hirlab/hir/ir"
)

// Data movement: the types of copy and the collectives, the registration
// handles of transfer and deregister, and wait (async collectives and
// transfers).

func (c *checker) copyOp(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if len(op.Operands) == 1 {
		if !ok {
			return nil, false
		}
		res := t.Clone()
		if w, has := op.Attr("mem"); has {
			m, _ := ir.ParseMemoryType(w.Word)
			if ann, isTensor := op.Results[0].Type.(*ir.TensorType); isTensor && ann.Mem != ir.Global && ann.Mem != m {
				c.errs.Add(op.Pos, "copy: mem=%s but %s is annotated %s memory", m, op.Results[0], ann.Mem)
				return nil, false
			}
			// the attribute wins over an annotation that names no memory
			return []inferred{{t: res.In(m), memFixed: true}}, true
		}
		return c.one(res), true
	}
	dst := op.Operands[1]
	d, ok2 := c.tensor(op, dst)
	if !ok || !ok2 {
		return nil, false
	}
	if _, has := op.Attr("mem"); has {
		c.errs.Add(op.Pos, "copy: mem= cannot go with a destination; the result lives in %s's memory", dst)
		return nil, false
	}
	if !equalIn(t, d.Mem, d) {
		c.errs.Add(op.Pos, "copy: %s is %s but the destination %s is %s; they must agree in dtype, shape and sharding", x, t, dst, d)
		return nil, false
	}
	return []inferred{{t: d, base: dst}}, true
}

// collective gives the result type of the table in SEMANTICS.md, as the
// op's layout gives it (ir.Layout.ResultType), from the checker's slabs.
func (c *checker) collective(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if !ok {
		return nil, false
	}
	name := op.Code.String()
	fail := func(format string, args ...any) ([]inferred, bool) {
		c.errs.Add(op.Pos, name+": "+format, args...)
		return nil, false
	}
	if op.Code.Info().Reduces {
		switch {
		case t.DType == ir.Bool:
			return fail("%s is bool; reducing over ranks needs numbers", x)
		case op.ReduceOp() == ir.ReduceAvg && !t.DType.IsFloat():
			return fail("op=avg needs a float tensor; %s is %s", x, t.DType)
		}
	}
	res, err := op.Code.Info().Layout.ResultType(name, x, t, op.IntAttr("axis", 0), c.clone)
	if err != nil {
		return fail("%s", err.Error())
	}
	if len(op.Operands) == 2 {
		out := op.Operands[1]
		o, good := c.tensor(op, out)
		if !good {
			return nil, false
		}
		if !equalIn(res, o.Mem, o) {
			return fail("the output buffer %s is %s, but %s gives %s", out, o, name, res.In(o.Mem))
		}
		return []inferred{{t: o, base: out}}, true
	}
	return c.one(res), true
}

func (c *checker) registration(op *ir.Op, h *ir.Value) bool {
	if h.Type == nil {
		return false
	}
	if h.Def == nil || h.Def.Code != ir.OpRegister {
		c.errs.Add(op.Pos, "%s: %s is not a registration handle (make one with register)", op.Code, h)
		return false
	}
	return true
}

func (c *checker) wait(op *ir.Op, st *blockState) bool {
	v := op.Operands[0]
	d := v.Def
	switch {
	case d != nil && d.Code.IsCollective() && d.Async():
		if pos, ok := st.waited[v]; ok {
			c.errs.Add(op.Pos, "wait: %s was already waited for at %s; wait once per async result", v, pos)
			return false
		}
		if st.outer[v] {
			c.errs.Add(op.Pos, "wait: %s is an async result from outside this for loop; waiting for it in the body would wait on every iteration (wait before or after the loop)", v)
			return false
		}
		delete(st.pending, v)
		st.waited[v] = op.Pos
		return true
	case d != nil && d.Code == ir.OpTransfer:
		return true
	case d != nil && d.Code.IsCollective():
		c.errs.Add(op.Pos, "wait: %s comes from %s without async=true; make it async or drop the wait", v, d.Code)
	default:
		c.errs.Add(op.Pos, "wait: %s is not the result of an async collective or a transfer", v)
	}
	return false
}
