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

// TestCUDAProgramsGolden runs testdata/cuda/*.hir, programs of only the ops
// the CUDA runtime runs without compute kernels or collectives (alloc,
// copy, free, select, reshape, symmetric_contiguous_view, barrier, streams,
// for), on the CPU runtime and compares with their goldens, in
// TestGolden's format. scripts/device-run.sh runs the same programs on
// GPUs and compares their stdout with these goldens byte for byte.
// `go test ./cmd/hirrun -run CUDAProgramsGolden -update` rewrites them.
func TestCUDAProgramsGolden(t *testing.T) {
	t.Chdir("../..")
	files, err := filepath.Glob("testdata/cuda/*.hir")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no testdata/cuda/*.hir")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".hir"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			args := append(append([]string{"run"}, argsLine(src)...), file)
			r := hirrun(args...)
			got := fmt.Sprintf("$ hirrun %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			assert.Equal(t, exitOK, r.code, "a testdata/cuda program must run: %s", r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/hirrun -run CUDAProgramsGolden -update` to create it")
			assert.Empty(t, cmp.Diff(string(want), got), "output differs from %s (run with -update to accept it) (-want +got)", golden)
		})
	}
}
