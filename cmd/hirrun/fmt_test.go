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

// withStdin makes src what `hirrun fmt -` reads, for the test.
func withStdin(t *testing.T, src string) {
	t.Helper()
	old := fmtStdin
	fmtStdin = strings.NewReader(src)
	t.Cleanup(func() { fmtStdin = old })
}

func TestFmtStdin(t *testing.T) {
	src := "// head\nmesh 2   // two ranks\n\n\ninput %x:f32[4/DIDx,3]\n  // above\n%y=relu %x\noutput %y\n"
	want := "// head\nmesh 2 // two ranks\n\ninput %x : f32[4/DIDx, 3]\n// above\n%y = relu %x\noutput %y\n"
	withStdin(t, src)
	r := hirrun("fmt", "-")
	expectCode(t, r, exitOK)
	assert.Equal(t, want, r.stdout)
	assert.Empty(t, r.stderr)

	withStdin(t, src)
	r = hirrun("fmt", "-l", "-")
	expectCode(t, r, exitOK)
	assert.Equal(t, "<standard input>\n", r.stdout)
	withStdin(t, want)
	r = hirrun("fmt", "-l", "-")
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stdout)

	withStdin(t, src)
	r = hirrun("fmt", "-w", "-")
	expectCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "cannot use -w with standard input")

	withStdin(t, "mesh 2\ninput %x : f33[2] // f32?\n")
	r = hirrun("fmt", "-")
	expectCode(t, r, exitFail)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "<standard input>:2:12: unknown dtype \"f33\" (did you mean f32?)\n", r.stderr)
}

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
