package evaluator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeGoExample runs the README's Go block verbatim, imports
// included: it is written as a main package in a temporary directory under
// testdata/ (inside the module, so it builds against this tree) and run
// with go run.
func TestReadmeGoExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## The Go API\n")
	require.True(t, ok, `README.md has no "## The Go API" section`)
	_, block, ok := strings.Cut(section, "\n```go\n")
	require.True(t, ok, "the Go API section has no ```go block")
	block, _, ok = strings.Cut(block, "\n```\n")
	require.True(t, ok, "the ```go block is not closed")
	require.True(t, strings.HasPrefix(block, "package main\n"), "the README's Go block is not a whole program (it must start with package main):\n%s", block)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	dir, err := os.MkdirTemp("testdata", "readme-example-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(block+"\n"), 0o644))
	cmd := exec.Command(goTool, "run", "./"+filepath.ToSlash(dir))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run of the README's example\n%s\nthe program:\n%s", out, block)
	const want = "[8 4] relu(x) on every rank: true\n"
	assert.Equal(t, want, string(out), "what the README's example printed")
	assert.True(t, strings.Contains(section, "It prints `"+strings.TrimSuffix(want, "\n")+"`"), "the README does not say what its example prints (%q)", strings.TrimSuffix(want, "\n"))
}
