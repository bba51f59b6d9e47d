package passes

import (
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// TestLongNamesInMessages: a checker error about a value with a
// 5000-character name quotes a cut name (ir.Errorf clips every message),
// still at file:line:col.
func TestLongNamesInMessages(t *testing.T) {
	name := "%" + strings.Repeat("v", 5000)
	src := "mesh 1\ninput %x : f32[4]\ninput %w : i32[4]\n" + name + " = relu %x\n%q = add " + name + ", %w\noutput %q\n"
	p, err := parser.Parse("long.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, &Context{})
	if err == nil {
		t.Fatal("a mix of f32 and i32 passed the checker")
	}
	msg := err.Error()
	cut := "%" + strings.Repeat("v", ir.MaxQuote-1) + "…"
	if !strings.HasPrefix(msg, "long.hir:5:6: add: ") || !strings.Contains(msg, cut) || strings.Contains(msg, cut[:len(cut)-len("…")]+"v") {
		t.Errorf("got %.400s\nwant long.hir:5:6: add: ... %s ...", msg, cut)
	}
	if len(msg) > 300 {
		t.Errorf("message of %d bytes: %.400s", len(msg), msg)
	}
}

// TestWrongAnnotationDoesNotCascade: a result annotated with a type its
// op does not give is one error; the ops using it are checked against
// the type the op gives (they used to fail again: "%g is already sharded
// on axis 0" after "%g is annotated f32[4/DIDx, 4], but all_gather gives
// f32[4, 4]").
func TestWrongAnnotationDoesNotCascade(t *testing.T) {
	src := "mesh 4\ninput %x : f32[4/DIDx, 4] symmetric\n" +
		"%g = all_gather %x algo=ring : f32[4/DIDx, 4]\n" +
		"%r = reduce_scatter %g op=sum axis=1 : f32[4, 4/DIDx]\n" +
		"output %g, %r\n"
	p, err := parser.Parse("annot.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, &Context{})
	want := "annot.hir:3:6: all_gather: %g is annotated f32[4/DIDx, 4], but all_gather gives f32[4, 4]"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestMatmulAccumulateNeedsDestination: accumulate=true adds into a
// destination; without one it is an error at the matmul, and an
// accumulating matmul into one is accepted.
func TestMatmulAccumulateNeedsDestination(t *testing.T) {
	src := "mesh 1\ninput %x : f32[4, 8]\ninput %w : f32[8, 3]\n%y = matmul %x, %w accumulate=true\noutput %y\n"
	p, err := parser.Parse("acc.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, &Context{})
	want := "acc.hir:4:6: matmul: accumulate=true adds the product into a destination, and none is given: matmul %x, %w, %dst accumulate=true"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	src = "mesh 1\ninput %x : f32[4, 8]\ninput %w : f32[8, 3]\n%d = alloc : f32[4, 3]\n%y = matmul %x, %w, %d accumulate=true\noutput %y\n"
	if p, err = parser.Parse("acc.hir", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if err := Check(p, &Context{}); err != nil {
		t.Fatal(err)
	}
}
