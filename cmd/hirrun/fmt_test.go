package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/format"
	"github.com/hirlab/hir/parser"
)

// TestFmtWriteShipped runs `hirrun fmt -w` on a copy of every .hir file of
// the repository that parses (the files themselves are left alone: goldens
// quote their positions): each copy is then what format.Source gives, and
// `fmt -l` lists none.
func TestFmtWriteShipped(t *testing.T) {
	dir := t.TempDir()
	var copies []string
	want := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".hir") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := parser.Parse(path, src); err != nil {
			return nil // testdata of error messages
		}
		copyPath := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(path, "../../"), "/", "_"))
		if err := os.WriteFile(copyPath, src, 0o644); err != nil {
			return err
		}
		out, err := format.Source(copyPath, src)
		if err != nil {
			return err
		}
		copies = append(copies, copyPath)
		want[copyPath] = string(out)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(copies), 150)

	r := hirrun(append([]string{"fmt", "-w"}, copies...)...)
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stdout)
	assert.Empty(t, r.stderr)
	for _, path := range copies {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, want[path], string(got), "fmt -w wrote %s", path)
	}
	r = hirrun(append([]string{"fmt", "-l"}, copies...)...)
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stdout, "fmt -l after fmt -w")
}
