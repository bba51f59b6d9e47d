package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
)

// maxPackageLines is the most lines of non-test Go a package under
// runtime/ may have (issue 21: runtime/cuda in layers a reader can see).
const maxPackageLines = 4000

// overLimit are the packages over maxPackageLines, each with the ceiling
// it may not pass until it is split: none now (runtime/sim had 4,737
// lines until its arithmetic went to runtime/sim/internal/compute).
var overLimit = map[string]int{}

// TestPackagesStaySmall fails when a package under runtime/ grows over
// maxPackageLines lines of non-test Go.
func TestPackagesStaySmall(t *testing.T) {
	// runtime/, found from this file's own path: the test binary may run
	// from anywhere (the GPU machine runs it from the repository root),
	// or where the sources are not.
	_, file, _, _ := goruntime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	if _, err := os.Stat(filepath.Join(root, "runtime.go")); err != nil {
		t.Skipf("the sources of runtime/ are not here: %v", err)
	}
	lines := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines[filepath.Dir(path)] += bytes.Count(b, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 5 {
		t.Fatalf("found only %d packages under runtime/: %v", len(lines), lines)
	}
	for dir, n := range lines {
		limit := maxPackageLines
		if rel, _ := filepath.Rel(root, dir); overLimit[filepath.ToSlash(rel)] > 0 {
			limit = overLimit[filepath.ToSlash(rel)]
		}
		if n > limit {
			t.Errorf("%s has %d lines of non-test Go, over %d: split it into layers (docs/ARCHITECTURE.md)", dir, n, limit)
		}
	}
}
