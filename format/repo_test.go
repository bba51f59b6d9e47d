package format

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryProgramsAreFormatted: every program of the repository a
// user reads as an example (testdata/, examples/, passes/testdata/) is in
// fmt's canonical form. Programs that do not parse (the parse-error
// goldens) are left as they are; parser/testdata and format/testdata hold
// deliberately odd layouts. `hirrun fmt -w FILE` mends one.
func TestRepositoryProgramsAreFormatted(t *testing.T) {
	checked := 0
	for _, dir := range []string{"../testdata", "../examples", "../passes/testdata"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".hir") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			got, err := Source(path, src)
			if err != nil {
				return nil // a program that shows a parse error
			}
			checked++
			if string(got) != string(src) {
				t.Errorf("%s is not in fmt's canonical form: run `go run ./cmd/hirrun fmt -w %s`", path, strings.TrimPrefix(path, "../"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d programs checked: the walk missed the repository's programs", checked)
	}
}
