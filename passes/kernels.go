package passes

import (
	"errors"

	"github.com/hirlab/hir/ir"
)

// checkKernels asks the target backend (Context.CheckKernel) whether it can
// compile each compute op of the fused program: fusions, matmuls, and
// pointwise ops and reductions left alone, in loop bodies too. It reports
// every op it refuses, each at its position, and changes nothing. The pass
// names no backend: the caller chooses the check with the target (the cuda
// backend's is codegen.CheckKernel), so passes stays backend-neutral.
func checkKernels(p *ir.Program, ctx *Context) error {
	if ctx == nil || ctx.CheckKernel == nil {
		return nil
	}
	var errs ir.ErrorList
	var walk func(b *ir.Block)
	walk = func(b *ir.Block) {
		for _, op := range b.Ops {
			switch {
			case op.Code == ir.OpFusion, op.Code == ir.OpMatmul, op.Code.IsPointwise(), op.Code.IsReduction():
				err := ctx.CheckKernel(op, p.Mesh.Size())
				var list ir.ErrorList
				var one *ir.Error
				switch {
				case err == nil:
				case errors.As(err, &list):
					errs = append(errs, list...)
				case errors.As(err, &one):
					errs = append(errs, one)
				default:
					errs.Add(op.Pos, "%s: %v", op.Code, err)
				}
			case op.Body != nil:
				walk(op.Body)
			}
		}
	}
	if p.Body != nil {
		walk(p.Body)
	}
	return errs.Err()
}
