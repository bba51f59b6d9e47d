package parser

import (
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
)

// TestVerifyUnknownAttrs: ir.Verify names each key an op does not take
// once, and each later one as given twice, whatever the order of the list
// (the parser's are sorted; a list may be unsorted from the start or only
// past some point).
func TestVerifyUnknownAttrs(t *testing.T) {
	for _, tc := range []struct {
		keys string // the op's attributes' keys, at columns 1, 2, ...
		want []string
	}{
		{"aabbc", []string{"got a", "a is given twice", "got b", "b is given twice", "got c"}},
		{"babca", []string{"got b", "got a", "b is given twice", "got c", "a is given twice"}},
		{"aaba", []string{"got a", "a is given twice", "got b", "a is given twice"}},
		{"abcb", []string{"got a", "got b", "got c", "b is given twice"}},
	} {
		prog, err := Parse("v.hir", []byte("mesh 1\ninput %x : f32[4]\n%y = relu %x\noutput %y\n"))
		if err != nil {
			t.Fatal(err)
		}
		op := prog.Body.Ops[0]
		for i, k := range tc.keys {
			op.Attrs = append(op.Attrs, ir.Attr{Key: string(k), Value: ir.AttrValue{Kind: ir.KindInt, Int: 1}, Pos: ir.NewPos("v.hir", 3, i+1)})
		}
		err = ir.Verify(prog)
		if err == nil {
			t.Fatalf("%s: verified", tc.keys)
		}
		got := strings.Split(err.Error(), "\n")
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d errors, want %d:\n%v", tc.keys, len(got), len(tc.want), err)
		}
		for i, w := range tc.want {
			if !strings.HasSuffix(got[i], w) {
				t.Errorf("%s: error %d is %q, want it to end %q", tc.keys, i, got[i], w)
			}
		}
	}
}
