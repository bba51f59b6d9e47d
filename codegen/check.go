package codegen

import (
	"github.com/hirlab/hir/ir"
)

// CheckKernel reports whether op (a fusion, pointwise op, reduction or
// matmul) can be compiled for a mesh of meshSize ranks: every check Fusion
// or Matmul makes, shapes included, on the local shapes the op's types
// give, without writing any text. A compile pipeline calls it for every
// compute op before anything runs (passes.Context.CheckKernel), so a
// program the kernels cannot express is rejected with the op's position,
// not halfway through a run. It returns nil or an ir.ErrorList.
func CheckKernel(op *ir.Op, meshSize int) error {
	var errs ir.ErrorList
	if op == nil {
		errs.Add(ir.Pos{}, "codegen: no op")
		return errs.Err()
	}
	ins, outs, err := LocalShapes(op, meshSize)
	if err != nil {
		return err
	}
	if op.Code == ir.OpMatmul {
		if len(ins) != 2+btoi(op.ReadsDestination()) || len(outs) != 1 {
			errs.Add(op.Pos, "matmul takes two tensors (and the destination it accumulates into) and gives one")
			return errs.Err()
		}
		if _, err := matmulCheck(ins[0], ins[1], outs[0]); err != nil {
			errs.Add(op.Pos, "%v", err)
		}
		return errs.Err()
	}
	_, err = analyze(op, ins, outs, true)
	return err
}

// LocalShapes returns the local shapes of op's non-literal operands and of
// its results on a mesh of meshSize ranks, from the types the values carry
// (an i64 scalar operand gives a Shape with no extents).
func LocalShapes(op *ir.Op, meshSize int) (ins, outs []Shape, err error) {
	var errs ir.ErrorList
	local := func(v *ir.Value, what string) (Shape, bool) {
		switch t := v.Type.(type) {
		case *ir.TensorType:
			s, err := t.LocalShape(meshSize)
			if err != nil {
				errs.Add(op.Pos, "%s: %s %s: %v", op.Code, what, v, err)
				return Shape{}, false
			}
			return Shape{DType: t.DType, Shape: s}, true
		case *ir.ScalarType:
			return Shape{DType: t.DType}, true
		case nil:
			errs.Add(op.Pos, "%s: %s %s has no type yet (run type inference first)", op.Code, what, v)
		default:
			errs.Add(op.Pos, "%s: %s %s is a %s, not a tensor", op.Code, what, v, t)
		}
		return Shape{}, false
	}
	ins, outs = []Shape{}, []Shape{}
	for i, v := range op.Operands { // the inputs: not a destination it only writes
		if v == nil || v.Lit != nil || !op.InputOperand(i) {
			continue
		}
		if s, ok := local(v, "operand"); ok {
			ins = append(ins, s)
		}
	}
	for _, r := range op.Results {
		if r == nil {
			continue
		}
		if s, ok := local(r, "result"); ok {
			outs = append(outs, s)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs.Err()
	}
	return ins, outs, nil
}

// matmulCheck checks a matmul's shapes without generating it.
func matmulCheck(a, b, out Shape) (*Kernel, error) {
	if _, _, _, _, _, err := matmulDims(a, b); err != nil {
		return nil, err
	}
	return Matmul(a, b, out)
}

// ResultShapes returns the local shapes of op's results (a fusion,
// pointwise op or reduction) over inputs: what Fusion computes them to be.
func ResultShapes(op *ir.Op, inputs []Shape) ([]Shape, error) {
	p, err := analyze(op, inputs, nil, true)
	if err != nil {
		return nil, err
	}
	outs := make([]Shape, len(p.yields))
	for i, y := range p.yields {
		outs[i] = Shape{DType: y.dtype, Shape: append([]int64{}, y.shape...)}
	}
	return outs, nil
}
