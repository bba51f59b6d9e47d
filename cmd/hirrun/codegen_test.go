package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCodegenGolden runs `hirrun codegen` on every testdata/codegen/*.hir
// and compares the exit code and output with the .golden beside it
// (`go test ./cmd/hirrun -run CodegenGolden -update` rewrites them).
func TestCodegenGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/codegen/*.hir")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no testdata/codegen/*.hir")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".hir"), func(t *testing.T) {
			r := hirrun("codegen", file)
			got := fmt.Sprintf("$ hirrun codegen %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", file, r.code, r.stdout, r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/hirrun -run CodegenGolden -update` to create it")
			assert.Empty(t, cmp.Diff(string(want), got), "output differs from %s (run with -update to accept it) (-want +got)", golden)
		})
	}
}
