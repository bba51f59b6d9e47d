package passes

import (
	"slices"

	"github.com/hirlab/hir/ir"
)

// Views: the types of symmetric_contiguous_view, select (its index) and
// reshape (of a sharded tensor too).

func (c *checker) view(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if !ok {
		return nil, false
	}
	res := t.Clone()
	switch op.Code {
	case ir.OpSymmetricContiguousView:
		// validate checks the view's three rules; here only the type.
		res = c.unsharded(t)
	case ir.OpSelect:
		axis := op.IntAttr("axis", 0)
		if axis < 0 || axis >= int64(t.Rank()) {
			c.errs.Add(op.Pos, "select: axis %d is out of range for %s of type %s (rank %d)", axis, x, t, t.Rank())
			return nil, false
		}
		d := t.Dims[axis]
		if d.Parallel == ir.DIDx {
			c.errs.Add(op.Pos, "select: axis %d of %s is sharded on DIDx; select a serial axis", axis, x)
			return nil, false
		}
		if !c.index(op, op.Operands[1], axis, d.Extent) {
			return nil, false
		}
		res.Dims = append(res.Dims[:axis:axis], t.Dims[axis+1:]...)
	case ir.OpReshape:
		shape := op.IntsAttr("shape")
		for _, e := range shape {
			if e < 0 {
				c.errs.Add(op.Pos, "reshape: shape=%s has the negative extent %d", shapeString(shape), e)
				return nil, false
			}
		}
		n, fits := ir.ProductChecked(shape)
		if !fits {
			c.errs.Add(op.Pos, "reshape: shape=%s has %s elements, which do not fit in a 64-bit size", shapeString(shape), ir.BigProduct(shape))
			return nil, false
		}
		if n != t.NumElements() {
			c.errs.Add(op.Pos, "reshape: %s has %d elements (%s) but shape=%s has %d", x, t.NumElements(), shapeString(t.Shape()), shapeString(shape), n)
			return nil, false
		}
		res = ir.Tensor(t.DType, shape...).In(t.Mem)
		if t.IsSharded() {
			if res = c.shardedReshape(op, x, t, shape); res == nil {
				return nil, false
			}
		}
	}
	return []inferred{{t: res, base: x}}, true
}

// shardedReshape types the reshape of a sharded tensor, which may only
// split its sharded axis into new axes, the first of them sharded
// (f32[8/DIDx, 4] with shape=[2, 2, 2, 4] is f32[2/DIDx, 2, 2, 4]), or
// merge it with the axes right after it into one sharded axis (the
// reverse), the other axes kept. Each rank's shard is then a whole block of
// the sharded axis, contiguous in both layouts, so the local shard
// reshapes in place. The mesh must divide the sharded axis (validate).
func (c *checker) shardedReshape(op *ir.Op, x *ir.Value, t *ir.TensorType, shape []int64) *ir.TensorType {
	a := t.ShardAxis()
	old := t.Shape()
	res := ir.Tensor(t.DType, shape...).In(t.Mem)
	switch {
	case len(shape) >= len(old) && slices.Equal(shape[:a], old[:a]):
		k := len(shape) - len(old) + 1 // the axes the sharded one is split into
		if slices.Equal(shape[a+k:], old[a+1:]) && ir.Product(shape[a:a+k]) == old[a] {
			res.Dims[a].Parallel = ir.DIDx
			return res
		}
	case len(shape) < len(old) && slices.Equal(shape[:a], old[:a]):
		k := len(old) - len(shape) + 1 // the axes merged into the sharded one
		if slices.Equal(shape[a+1:], old[a+k:]) && ir.Product(old[a:a+k]) == shape[a] {
			res.Dims[a].Parallel = ir.DIDx
			return res
		}
	}
	c.errs.Add(op.Pos, "reshape: %s is sharded (%s); a sharded tensor can only have its sharded axis %d split into new axes (e.g. shape=%s) or merged with the axes after it, the other axes kept, and shape=%s does neither",
		x, t, a, shapeString(splitExample(old, a)), shapeString(shape))
	return nil
}

// splitExample is old with its axis a split in two where it can be.
func splitExample(old []int64, a int) []int64 {
	out := append([]int64(nil), old[:a]...)
	e := old[a]
	f := int64(1)
	for d := int64(2); d < e; d++ {
		if e%d == 0 {
			f = d
			break
		}
	}
	out = append(out, f, e/f)
	return append(out, old[a+1:]...)
}

// index checks select's index: an integer literal or a loop index, inside
// the axis.
func (c *checker) index(op *ir.Op, i *ir.Value, axis, extent int64) bool {
	if i.Lit != nil {
		if i.Lit.IsFloat {
			c.errs.Add(op.Pos, "select: the index %s must be an integer", i)
			return false
		}
		if i.Lit.Int < 0 || i.Lit.Int >= extent {
			c.errs.Add(op.Pos, "select: index %d is out of range for axis %d of extent %d", i.Lit.Int, axis, extent)
			return false
		}
		return true
	}
	if s, ok := i.Type.(*ir.ScalarType); !ok || !s.DType.IsInt() {
		if i.Type != nil {
			c.errs.Add(op.Pos, "select: the index must be an integer literal or a loop index, not %s of type %s", i, i.Type)
		}
		return false
	}
	if r, ok := c.loops[i]; ok && (r.first < 0 || r.last >= extent) {
		c.errs.Add(op.Pos, "select: %s runs from %d to %d, out of range for axis %d of extent %d", i, r.first, r.last, axis, extent)
		return false
	}
	return true
}
