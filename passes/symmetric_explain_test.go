package passes

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// A value recv places on the symmetric heap (promoted at its first remote
// reader) is read in place by the later remote readers; each of them gets a
// note that says so and where recv is.
func TestSymmetricExplainsRecvPlacedValue(t *testing.T) {
	src := `mesh 4
input %x : f32[16/DIDx, 8]
%s = stream
set_stream %s
send %x peer=+1
set_stream
%u = recv peer=-1 : f32[4, 8]
sync_stream %s
%a = reduce_scatter %u algo=one_shot op=sum
%b = reduce_scatter %u op=avg axis=1
%c = all_reduce %u algo=one_shot
output %a, %b, %c
`
	p, err := parser.Parse("recv.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var explain bytes.Buffer
	if err := Check(p, &Context{Explain: &explain, Verified: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"recv.hir:9:6: reduce_scatter (algo=one_shot) reads %u remotely; recv now allocates it on the symmetric heap (no import copy)",
		"recv.hir:10:6: reduce_scatter (algo=auto) reads %u remotely; %u is already on the symmetric heap (recv placed it there at recv.hir:7:6)",
		"recv.hir:11:6: all_reduce (algo=one_shot) reads %u remotely; %u is already on the symmetric heap (recv placed it there at recv.hir:7:6)",
	}
	if got := strings.Split(strings.TrimSuffix(explain.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("explain notes:\n%s\nwant:\n%s", explain.String(), strings.Join(want, "\n"))
	}
	// No import: all three read the recv's own (now symmetric) storage.
	p.Walk(func(op *ir.Op) {
		if op.Code == ir.OpCopy {
			t.Errorf("unexpected import %s", op)
		}
		if op.Code.IsCollective() && op.Operands[0].Name != "u" {
			t.Errorf("%s reads %s, want %%u", op, op.Operands[0])
		}
	})
	for _, op := range p.Body.Ops {
		if op.Code == ir.OpRecv && op.Result().Tensor().Mem != ir.Symmetric {
			t.Errorf("%s is not symmetric", op)
		}
	}
}

// Every collective whose algorithm reads its input remotely gets exactly
// one explain note, whatever made its input peer-addressable (an import, a
// promotion, recv, alloc, an annotation, an input declaration, a view),
// over every program in the repository's testdata that the symmetric pass
// accepts; those that read nothing remotely get none.
func TestSymmetricExplainsEveryRemoteRead(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/*/*.hir", "../testdata/*.hir", "../examples/*.hir"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	readers, checked := 0, 0
	already := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parser.Parse(filepath.Base(file), src)
		if err != nil {
			continue // a parse error case
		}
		var explain bytes.Buffer
		if err := LowerUntil(p, "symmetric", &Context{Explain: &explain, Verified: true}); err != nil {
			continue // rejected: the goldens cover its notes
		}
		checked++
		notes := map[string]int{}
		for _, line := range strings.Split(strings.TrimSuffix(explain.String(), "\n"), "\n") {
			if line == "" {
				continue
			}
			if strings.Contains(line, "is already on the symmetric heap") {
				already++
			}
			pos, _, _ := strings.Cut(line, ": ")
			notes[pos]++
		}
		remote := map[string]bool{}
		p.Walk(func(op *ir.Op) {
			if !op.Code.IsCollective() {
				return
			}
			acc, ok := ir.LookupRule(op.Code, op.Algo())
			if !ok || !acc.ReadsInput || op.Operands[0].Tensor() == nil {
				return
			}
			readers++
			pos := op.Pos.String()
			remote[pos] = true
			if notes[pos] != 1 {
				t.Errorf("%s: %s reads %s remotely; %d explain notes, want 1:\n%s", pos, op.Code, op.Operands[0], notes[pos], explain.String())
			}
		})
		for pos, n := range notes {
			if !remote[pos] {
				t.Errorf("%s: %d explain notes, but no collective there reads remotely", pos, n)
			}
		}
	}
	if checked < 20 || readers < 20 || already < 5 {
		t.Errorf("only %d programs, %d remote readers, %d already-symmetric notes checked", checked, readers, already)
	}
	t.Logf("%d programs, %d remote readers, %d already-symmetric notes", checked, readers, already)
}
