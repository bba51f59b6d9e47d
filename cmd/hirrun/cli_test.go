package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	require.NotEmpty(t, files, "no testdata/*.hir")
	// testdata/contract: programs that keep the checker's promise
	// (docs/SEMANTICS.md, "The contract"), run like the others
	contract, err := filepath.Glob("testdata/contract/*.hir")
	require.NoError(t, err)
	files = append(files, contract...)
	for _, file := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(file, "testdata/"), ".hir"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			args := append(append([]string{"run"}, argsLine(src)...), file)
			r := hirrun(args...)
			got := fmt.Sprintf("$ hirrun %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/hirrun -run Golden -update` to create it")
			assert.Empty(t, cmp.Diff(string(want), got), "output differs from %s (run with -update to accept it) (-want +got)", golden)
		})
	}
}
