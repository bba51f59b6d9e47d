package compute

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// TestReductionAxesAgree: the checker, codegen and the CPU runtime's
// compiler give one answer on every axes list of a reduction (they all call
// ir.ReducedAxes): negative axes, axes past the rank and repeated axes are
// refused alike, good lists give one shape.
func TestReductionAxesAgree(t *testing.T) {
	in := []int64{2, 3, 4}
	for _, axes := range [][]int64{{0}, {2}, {0, 2}, {-1}, {-3}, {3}, {1, 1}, {2, 0, 1}} {
		words := make([]string, len(axes))
		for i, a := range axes {
			words[i] = fmt.Sprint(a)
		}
		src := fmt.Sprintf("mesh 1\ninput %%x : f32[2, 3, 4]\n%%y = sum %%x axes=[%s]\noutput %%y\n", strings.Join(words, ", "))
		prog, err := parser.Parse("axes.hir", []byte(src))
		checkErr := err
		if err == nil {
			checkErr = passes.Check(prog, nil)
		}
		op := reduceOp(ir.OpSum, false, axes...)
		outs, cgErr := codegen.ResultShapes(op, []codegen.Shape{{DType: ir.F32, Shape: in}})
		reduced, errs := ir.ReducedAxes(axes, len(in))
		var want []int64
		if len(errs) == 0 {
			want = ir.ReducedShape(in, reduced, false)
		}
		_, simErr := Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: in}},
			Outputs: []runtime.TensorShape{{DType: ir.F32, Shape: want}}}, nil)
		ok := len(errs) == 0
		assert.Equal(t, ok, checkErr == nil, "axes %v: the checker says %v", axes, checkErr)
		assert.Equal(t, ok, cgErr == nil, "axes %v: codegen says %v", axes, cgErr)
		assert.Equal(t, ok, simErr == nil, "axes %v: the CPU runtime says %v", axes, simErr)
		if ok && cgErr == nil {
			assert.Equal(t, want, outs[0].Shape, "axes %v: codegen's shape", axes)
		}
	}
}
