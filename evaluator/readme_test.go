package evaluator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## The Go API\n")
	if !ok {
		t.Fatal(`README.md has no "## The Go API" section`)
	}
	_, block, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal("the Go API section has no ```go block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("the ```go block is not closed")
	}
	if !strings.HasPrefix(block, "package main\n") {
		t.Fatalf("the README's Go block is not a whole program (it must start with package main):\n%s", block)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "readme-example-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(block+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "run", "./"+filepath.ToSlash(dir))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run of the README's example: %v\n%s\nthe program:\n%s", err, out, block)
	}
	const want = "[8 4] relu(x) on every rank: true\n"
	if string(out) != want {
		t.Errorf("the README's example printed %q, want %q", out, want)
	}
	if !strings.Contains(section, "It prints `"+strings.TrimSuffix(want, "\n")+"`") {
		t.Errorf("the README does not say what its example prints (%q)", strings.TrimSuffix(want, "\n"))
	}
}
