package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files from the current output")

// result is what one hirrun invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func hirrun(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// argsLine reads the hirrun flags a testdata program asks for on its first
// line: `// args: --input x=random:seed=1`.
func argsLine(src []byte) []string {
	first, _, _ := bytes.Cut(src, []byte("\n"))
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(first), []byte("// args:"))
	if !ok {
		return nil
	}
	return strings.Fields(string(rest))
}

// TestGolden runs every testdata/*.hir with `hirrun run ARGS FILE` and
// compares the exit code, stdout and stderr with testdata/*.golden.
// Run `go test ./cmd/hirrun -run Golden -update` to rewrite the goldens.
func TestGolden(t *testing.T) {
	t.Chdir("../..") // so messages name testdata/x.hir, as a user at the root sees them
	files, err := filepath.Glob("testdata/*.hir")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.hir")
	}
	// testdata/contract: programs that keep the checker's promise
	// (docs/SEMANTICS.md, "The contract"), run like the others
	contract, err := filepath.Glob("testdata/contract/*.hir")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, contract...)
	for _, file := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(file, "testdata/"), ".hir"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{"run"}, argsLine(src)...), file)
			r := hirrun(args...)
			got := fmt.Sprintf("$ hirrun %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./cmd/hirrun -run Golden -update` to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept it):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff shows the lines that differ, for a readable failure.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}
