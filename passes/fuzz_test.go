package passes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hirlab/hir/parser"
)

// FuzzLower: whatever parses, the pipeline accepts or rejects with errors,
// never a panic (a program a user writes reaches every pass).
func FuzzLower(f *testing.F) {
	for _, pattern := range []string{"testdata/*/*.hir", "../testdata/*.hir", "../testdata/cuda/*.hir", "../parser/testdata/*.hir", "../examples/*.hir"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		prog, err := parser.Parse("fuzz.hir", src)
		if err != nil {
			return
		}
		_ = Lower(prog, &Context{})
	})
}
