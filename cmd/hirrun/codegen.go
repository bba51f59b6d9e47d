package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
)

var codegenCommand = &command{
	name:    "codegen",
	args:    "prog.hir",
	summary: "print the CUDA C the cuda backend compiles for each compute op",
	help: `Lowers the program (every pass, with the cuda backend's kernel check) and
prints, for every compute op that becomes a kernel (fusions, pointwise ops
and reductions left alone, matmuls; loop bodies included), a header naming
the op, its source position and its local shapes on the program's mesh,
then the CUDA C that NVRTC compiles for it. A matmul runs through cuBLAS
where the library loads; what is printed for it is the tiled kernel that
runs where it does not. The launch geometry shown assumes 132 SMs (H100
and H200 have 132); the runtime uses the device's own count.`,
	run: func(c *cli, _ any, args []string) int {
		if len(args) != 1 {
			c.errorf("codegen: takes one program, got %d arguments (usage: %s)", len(args), usageLine("codegen"))
			return exitUsage
		}
		prog, code := c.parse(args[0])
		if code != exitOK {
			return code
		}
		ctx := c.passContext(false)
		ctx.CheckKernel = codegen.CheckKernel
		if err := passes.Lower(prog, ctx); err != nil {
			c.report(err)
			return exitFail
		}
		if err := writeKernels(c.stdout, prog); err != nil {
			c.report(err)
			return exitFail
		}
		return exitOK
	},
}

// writeKernels prints the kernel of every compute op of a lowered program.
func writeKernels(w io.Writer, prog *ir.Program) error {
	ops := kernelOps(prog.Body)
	mesh := prog.Mesh.Size()
	if len(ops) == 0 {
		fmt.Fprintf(w, "// no compute ops: nothing to compile\n")
		return nil
	}
	for i, op := range ops {
		if i > 0 {
			fmt.Fprintln(w)
		}
		ins, outs, err := codegen.LocalShapes(op, mesh)
		if err != nil {
			return err
		}
		var k *codegen.Kernel
		if op.Code == ir.OpMatmul {
			if len(ins) != 2 || len(outs) != 1 {
				return ir.Errorf(op.Pos, "matmul takes two tensors and gives one")
			}
			k, err = codegen.Matmul(ins[0], ins[1], outs[0])
			if err != nil {
				return ir.Errorf(op.Pos, "%v", err)
			}
		} else if k, err = codegen.Fusion(op, ins, outs); err != nil {
			return err
		}
		what := op.Code.String()
		if op.Code == ir.OpFusion {
			var body []string
			for _, b := range op.Body.Ops {
				if b.Code != ir.OpYield {
					body = append(body, b.Code.String())
				}
			}
			what += " of " + strings.Join(body, ", ")
		}
		fmt.Fprintf(w, "// ==== %s at %s: %s -> %s (local shapes on a mesh of %d)\n", what, op.Pos, shapeList(ins), shapeList(outs), mesh)
		if op.Code == ir.OpMatmul {
			fmt.Fprintf(w, "// runs as cublasGemmEx where libcublas loads; where it does not, as this kernel:\n")
		}
		grid, block := k.Launch(codegen.DefaultSMs)
		fmt.Fprintf(w, "// kernel %s, strategy %s, grid %v, block %v\n", k.Name, k.Strategy, grid, block)
		io.WriteString(w, k.Source)
	}
	return nil
}

// kernelOps lists the ops that become kernels: fusions, matmuls, and
// pointwise ops and reductions outside fusions, in program order.
func kernelOps(b *ir.Block) []*ir.Op {
	var ops []*ir.Op
	if b == nil {
		return nil
	}
	for _, op := range b.Ops {
		switch {
		case op.Code == ir.OpFusion, op.Code == ir.OpMatmul, op.Code.IsPointwise(), op.Code.IsReduction():
			ops = append(ops, op)
		case op.Body != nil:
			ops = append(ops, kernelOps(op.Body)...)
		}
	}
	return ops
}

func shapeList(ss []codegen.Shape) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
