package passes

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

func lowerWith(t *testing.T, src string, check func(op *ir.Op, mesh int) error) error {
	t.Helper()
	prog, err := parser.Parse("k.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return Lower(prog, &Context{CheckKernel: check})
}

// The pass asks about every compute op, loop bodies included, reports
// each refusal at its op, and asks nothing when no check is set.
func TestKernelsPass(t *testing.T) {
	const src = `mesh 2
input %x : f32[4/DIDx, 8]
input %w : f32[8, 3]
%a = mul %x, 2.0
%b = relu %a
for %i = 0 to 2 {
  %m = matmul %b, %w
  %e = exp %m
}
%s = sum %b axes=[1]
output %s
`
	var seen []string
	err := lowerWith(t, src, func(op *ir.Op, mesh int) error {
		seen = append(seen, fmt.Sprintf("%s@%d/%d", op.Code, op.Pos.Line, mesh))
		if op.Code == ir.OpMatmul {
			return errors.New("no BLAS today")
		}
		if op.Code == ir.OpExp {
			var l ir.ErrorList
			l.Add(op.Pos, "exp refused")
			return l
		}
		return nil
	})
	if got := strings.Join(seen, " "); got != "fusion@4/2 matmul@7/2 exp@8/2 sum@10/2" {
		t.Errorf("checked %s", got)
	}
	if err == nil || err.Error() != "k.hir:7:8: matmul: no BLAS today\nk.hir:8:8: exp refused" {
		t.Errorf("error %v", err)
	}
	if err := lowerWith(t, src, nil); err != nil {
		t.Errorf("without a check: %v", err)
	}
}

// What type checking accepts, the generated kernels compile: every
// pointwise op and reduction in every dtype, alone and fused, and matmul,
// on a sharded tensor. (codegen.CheckKernel is the cuda backend's check.)
func TestKernelsAgreeWithTypecheck(t *testing.T) {
	unary := []string{"neg", "exp", "log", "tanh", "relu", "gelu", "sigmoid", "abs"}
	binary := []string{"add", "sub", "mul", "div", "max", "min"}
	reductions := []string{"sum", "mean", "max"}
	accepted, checked := 0, 0
	try := func(src string) {
		prog, err := parser.Parse("k.hir", []byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		if err := LowerUntil(prog, "fuse", &Context{}); err != nil {
			return // rejected for every backend
		}
		accepted++
		if err := checkKernels(prog, &Context{CheckKernel: codegen.CheckKernel}); err != nil {
			t.Errorf("typecheck accepts, the kernels refuse: %v\n%s", err, src)
		}
		checked++
	}
	for _, dt := range ir.AllDTypes {
		head := fmt.Sprintf("mesh 2\ninput %%x : %s[4/DIDx, 6]\ninput %%c : bool[4/DIDx, 6]\n", dt)
		for _, op := range unary {
			try(head + fmt.Sprintf("%%y = %s %%x\noutput %%y\n", op))
			try(head + fmt.Sprintf("%%a = %s %%x\n%%y = add %%a, %%x\noutput %%y\n", op))
		}
		for _, op := range binary {
			try(head + fmt.Sprintf("%%y = %s %%x, %%x\noutput %%y\n", op))
			try(head + fmt.Sprintf("%%a = %s %%x, 3\n%%y = %s %%a, %%x\noutput %%y\n", op, op))
		}
		for _, op := range reductions {
			try(head + fmt.Sprintf("%%y = %s %%x axes=[1]\noutput %%y\n", op))
			try(head + fmt.Sprintf("%%a = neg %%x\n%%y = %s %%a axes=[1] keepdim=true\noutput %%a, %%y\n", op))
		}
		for _, to := range ir.AllDTypes {
			try(head + fmt.Sprintf("%%a = cast %%x dtype=%s\n%%y = where %%c, %%a, %%a\noutput %%y\n", to))
		}
		try(head + "input %w : " + dt.String() + "[6, 5]\n%y = matmul %x, %w\noutput %y\n")
	}
	if accepted < 100 || checked != accepted {
		t.Errorf("%d programs accepted, %d checked", accepted, checked)
	}
	t.Logf("%d programs accepted by type checking; the kernels check took them all", accepted)
}
