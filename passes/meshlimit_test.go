package passes_test

import (
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// A mesh past ir.MaxMeshSize is rejected at check time, at the mesh's
// position; the largest allowed passes.
func TestMeshLargerThanTheMaximumIsRejected(t *testing.T) {
	for _, c := range []struct {
		src, want string
	}{
		{"mesh 4097\ninput %x : f32[8]\n%y = add %x, 1.0\noutput %y\n",
			"big.hir:1:1: mesh of 4097 ranks is larger than the 4096 ranks a program may have (ir.MaxMeshSize; docs/RUNTIME.md says why)"},
		{"mesh 4096\ninput %x : f32[8]\n%y = add %x, 1.0\noutput %y\n", ""},
	} {
		prog, err := parser.Parse("big.hir", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		err = passes.Check(prog, &passes.Context{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("mesh %d: %v", prog.Mesh.Size(), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	if ir.MaxMeshSize != 4096 {
		t.Errorf("ir.MaxMeshSize is %d; update the docs and this test", ir.MaxMeshSize)
	}
}
