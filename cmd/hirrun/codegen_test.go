package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCodegenGolden runs `hirrun codegen` on every testdata/codegen/*.hir
// and compares the exit code and output with the .golden beside it
// (`go test ./cmd/hirrun -run CodegenGolden -update` rewrites them).
func TestCodegenGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/codegen/*.hir")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/codegen/*.hir: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".hir"), func(t *testing.T) {
			r := hirrun("codegen", file)
			got := fmt.Sprintf("$ hirrun codegen %s\nexit %d\n-- stdout --\n%s-- stderr --\n%s", file, r.code, r.stdout, r.stderr)
			golden := strings.TrimSuffix(file, ".hir") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./cmd/hirrun -run CodegenGolden -update` to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept it):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

func TestCodegenMisuse(t *testing.T) {
	r := hirrun("codegen")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "codegen: takes one program, got 0 arguments")
	r = hirrun("codegen", "testdata/codegen/nosuch.hir")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "no such file")
}
