package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/cuda/*.hir (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".hir"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{"run"}, argsLine(src)...), file)
			r := hirrun(args...)
			got := fmt.Sprintf("$ hirrun %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			if r.code != exitOK {
				t.Errorf("exit %d: a testdata/cuda program must run: %s", r.code, r.stderr)
			}
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./cmd/hirrun -run CUDAProgramsGolden -update` to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept it):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}
