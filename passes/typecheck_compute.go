package passes

import (
	"math"

	"github.com/hirlab/hir/ir"
)

// Compute ops: the types of pointwise ops (NumPy broadcasting, literals
// taking the dtype), reductions and matmul.

// pointwise: operands broadcast as in NumPy and share one dtype; literals
// take it.
func (c *checker) pointwise(op *ir.Op) ([]inferred, bool) {
	name := op.Code.String()
	var dt ir.DType
	var first *ir.Value
	tensors, types := c.pwVals[:0], c.pwTypes[:0]
	ok := true
	for i, x := range op.Operands {
		if x.Lit != nil {
			if op.Code == ir.OpWhere && i == 0 {
				c.errs.Add(op.Pos, "where: the condition must be a bool tensor, not the literal %s", x)
				ok = false
			}
			continue
		}
		t, good := c.tensor(op, x)
		if !good {
			ok = false
			continue
		}
		tensors, types = append(tensors, x), append(types, t)
		if op.Code == ir.OpWhere && i == 0 {
			if t.DType != ir.Bool {
				c.errs.Add(op.Pos, "where: the condition %s is %s, not bool", x, t.DType)
				ok = false
			}
			continue
		}
		if first == nil {
			first, dt = x, t.DType
		} else if t.DType != dt {
			c.errs.Add(op.Pos, "%s: %s is %s but %s is %s; cast one of them", name, first, dt, x, t.DType)
			ok = false
		}
	}
	c.pwVals, c.pwTypes = tensors, types // for the next op to reuse
	if !ok {
		return nil, false
	}
	if len(tensors) == 0 {
		c.errs.Add(op.Pos, "%s needs at least one tensor operand", name)
		return nil, false
	}
	if first == nil { // where with two literal branches: the annotation says the dtype
		ann, isTensor := op.Results[0].Type.(*ir.TensorType)
		if !isTensor {
			c.errs.Add(op.Pos, "where: both branches are literals; annotate the result type")
			return nil, false
		}
		dt = ann.DType
	}
	switch {
	case op.Code.Info().FloatOnly && !dt.IsFloat():
		c.errs.Add(op.Pos, "%s: %s is %s; %s needs a float tensor (cast it first)", name, first, dt, name)
		return nil, false
	case op.Code != ir.OpCast && op.Code != ir.OpWhere && dt == ir.Bool:
		c.errs.Add(op.Pos, "%s: %s is bool; %s needs numbers (cast it first)", name, first, name)
		return nil, false
	}
	for i, x := range op.Operands {
		if x.Lit == nil || (op.Code == ir.OpWhere && i == 0) {
			continue
		}
		if !literalFits(x.Lit, dt) {
			c.errs.Add(op.Pos, "%s: the literal %s does not fit the dtype %s", name, x, dt)
			ok = false
		}
	}
	dims, good := c.broadcast(op, tensors, types)
	if !ok || !good {
		return nil, false
	}
	if op.Code == ir.OpCast {
		dt, _ = ir.ParseDType(op.WordAttr("dtype", ""))
	}
	return c.built(dt, dims), true
}

// literalFits reports whether a literal operand can take dtype dt.
func literalFits(l *ir.Literal, dt ir.DType) bool {
	if dt.IsFloat() {
		return true
	}
	v := l.Value()
	if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
		return false
	}
	switch dt {
	case ir.Bool:
		return v == 0 || v == 1
	case ir.I32:
		return v >= math.MinInt32 && v <= math.MaxInt32
	case ir.I64:
		// An integer literal is an int64 already; a float one must lie in
		// [-2^63, 2^63) (float64(MaxInt64) rounds up to 2^63, which does not).
		return !l.IsFloat || (v >= math.MinInt64 && v < math.MaxInt64)
	}
	return true
}

// broadcast right-aligns the shapes. A result axis is sharded when an
// operand's aligned axis of full extent is; those must all agree.
func (c *checker) broadcast(op *ir.Op, vals []*ir.Value, types []*ir.TensorType) ([]ir.Dim, bool) {
	rank := 0
	for _, t := range types {
		rank = max(rank, t.Rank())
	}
	dims := c.scratchDims(rank)[:rank]
	for j := range dims {
		dims[j] = ir.Dim{Extent: 1}
	}
	for i, t := range types {
		off := rank - t.Rank()
		for k, d := range t.Dims {
			r := &dims[off+k]
			switch {
			case d.Extent == r.Extent || d.Extent == 1:
			case r.Extent == 1:
				r.Extent = d.Extent
			default:
				w := c.widest(types, off+k, rank, r.Extent)
				c.errs.Add(op.Pos, "%s: the shapes of %s %s and %s %s do not broadcast", op.Code, vals[w], shapeString(types[w].Shape()), vals[i], shapeString(t.Shape()))
				return nil, false
			}
		}
	}
	sharded := -1
	for j := range dims {
		var on, off *ir.Value
		for i, t := range types {
			k := j - (rank - t.Rank())
			if k < 0 || t.Dims[k].Extent != dims[j].Extent {
				continue
			}
			if t.Dims[k].Parallel == ir.DIDx {
				on = vals[i]
			} else if off == nil {
				off = vals[i]
			}
		}
		if on == nil {
			continue
		}
		if off != nil {
			c.errs.Add(op.Pos, "%s: axis %d of the result is sharded on DIDx in %s but not in %s", op.Code, j, on, off)
			return nil, false
		}
		if sharded >= 0 {
			c.errs.Add(op.Pos, "%s: the result would be sharded on axes %d and %d, but the mesh has one dimension (DIDx), so at most one axis may be sharded; all_gather one of the operands first", op.Code, sharded, j)
			return nil, false
		}
		sharded = j
		dims[j].Parallel = ir.DIDx
	}
	return dims, true
}

// widest finds the operand that set a result axis's extent, for messages.
func (c *checker) widest(types []*ir.TensorType, j, rank int, extent int64) int {
	for i, t := range types {
		k := j - (rank - t.Rank())
		if k >= 0 && t.Dims[k].Extent == extent {
			return i
		}
	}
	return 0
}

// shapeString spells a shape as the text format does: [4, 8].
func shapeString(s []int64) string {
	return ir.FormatAttrValue(ir.AttrValue{Kind: ir.KindInts, Ints: s})
}

func (c *checker) reduction(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if !ok {
		return nil, false
	}
	name := op.Code.String()
	switch {
	case t.DType == ir.Bool:
		c.errs.Add(op.Pos, "%s: %s is bool; %s needs numbers (cast it first)", name, x, name)
		return nil, false
	case op.Code == ir.OpMean && !t.DType.IsFloat():
		c.errs.Add(op.Pos, "mean: %s is %s; mean needs a float tensor (cast it first)", x, t.DType)
		return nil, false
	}
	reduced, axisErrs := ir.ReducedAxes(op.IntsAttr("axes"), t.Rank())
	for _, e := range axisErrs {
		if e.Twice {
			c.errs.Add(op.Pos, "%s: %v", name, e)
		} else {
			c.errs.Add(op.Pos, "%s: axis %d is out of range for %s of type %s (rank %d)", name, e.Axis, x, t, t.Rank())
		}
		ok = false
	}
	for a, r := range reduced {
		if r && t.Dims[a].Parallel == ir.DIDx {
			c.errs.Add(op.Pos, "%s: axis %d of %s is sharded on DIDx; reduce across ranks with all_reduce", name, a, x)
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	keep := op.BoolAttr("keepdim")
	dims := c.scratchDims(t.Rank())
	for i, d := range t.Dims {
		switch {
		case !reduced[i]:
			dims = append(dims, d)
		case keep:
			dims = append(dims, ir.Dim{Extent: 1})
		}
	}
	return c.built(t.DType, dims), true
}

// matmul: a[..., M, K] × b[K, N] or b[..., K, N] with a's batch dims.
func (c *checker) matmul(op *ir.Op) ([]inferred, bool) {
	ts, ok := c.tensors(op, 2)
	if !ok {
		return nil, false
	}
	a, b := ts[0], ts[1]
	x, y := op.Operands[0], op.Operands[1]
	fail := func(format string, args ...any) ([]inferred, bool) {
		c.errs.Add(op.Pos, "matmul: "+format, args...)
		return nil, false
	}
	switch {
	case !a.DType.IsFloat():
		return fail("%s is %s; matmul needs float tensors", x, a.DType)
	case a.DType != b.DType:
		return fail("%s is %s but %s is %s; cast one of them", x, a.DType, y, b.DType)
	case a.Rank() < 2:
		return fail("%s must have rank 2 or more ([..., M, K]); it is %s", x, a)
	case b.Rank() != 2 && b.Rank() != a.Rank():
		return fail("%s must be [K, N] or batched like %s; it is %s", y, x, b)
	case b.IsSharded():
		return fail("%s must be unsharded (all_gather it first); it is %s", y, b)
	case a.Dims[a.Rank()-1].Parallel == ir.DIDx:
		return fail("the contracted axis %d of %s must not be sharded", a.Rank()-1, x)
	}
	if k, kb := a.Dims[a.Rank()-1].Extent, b.Dims[b.Rank()-2].Extent; k != kb {
		return fail("%s is %s and %s is %s: the contracted extents %d and %d differ", x, a, y, b, k, kb)
	}
	if b.Rank() > 2 {
		for i := 0; i < b.Rank()-2; i++ {
			if a.Dims[i].Extent != b.Dims[i].Extent {
				return fail("the batch dims of %s %s and %s %s differ", x, shapeString(a.Shape()[:a.Rank()-2]), y, shapeString(b.Shape()[:b.Rank()-2]))
			}
			if a.Dims[i].Parallel == ir.DIDx {
				return fail("with a batched %s, the batch axis %d of %s must not be sharded", y, i, x)
			}
		}
	}
	dims := append(append(c.scratchDims(a.Rank()), a.Dims[:a.Rank()-1]...), ir.Dim{Extent: b.Dims[b.Rank()-1].Extent})
	if len(op.Operands) < 3 {
		if op.BoolAttr("accumulate") {
			return fail("accumulate=true adds the product into a destination, and none is given: matmul %s, %s, %%dst accumulate=true", x, y)
		}
		return c.built(a.DType, dims), true
	}
	dst := op.Operands[2]
	d, ok := c.tensor(op, dst)
	if !ok {
		return nil, false
	}
	if product := (ir.TensorType{DType: a.DType, Dims: dims}); !equalIn(&product, d.Mem, d) {
		return fail("the product is %s but the destination %s is %s; they must agree in dtype, shape and sharding", &product, dst, d)
	}
	return []inferred{{t: d, base: dst}}, true
}
