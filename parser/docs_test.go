package parser

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
)

// TestLanguageDoc keeps docs/LANGUAGE.md honest: it shows every op in an
// example, and every error message it quotes is one the parser gives
// (as recorded in testdata/errors/*.err).
func TestLanguageDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/LANGUAGE.md")
	if err != nil {
		t.Skipf("no docs/LANGUAGE.md: %v", err)
	}
	text := string(doc)
	for _, op := range ir.Opcodes() {
		name := regexp.QuoteMeta(op.String())
		if !regexp.MustCompile(`(?m)^\s*(%[\w.]+(, %[\w.]+)* = )?` + name + `( |$)`).MatchString(text) {
			t.Errorf("LANGUAGE.md has no example line using %s", op)
		}
	}
	quoted := regexp.MustCompile(`(?m)^(\w+)\.hir:\d+:\d+: .*$`)
	for _, m := range quoted.FindAllStringSubmatch(text, -1) {
		golden, err := os.ReadFile(filepath.Join("testdata/errors", m[1]+".err"))
		if err != nil {
			t.Errorf("LANGUAGE.md quotes %q, but testdata/errors/%s.err is missing", m[0], m[1])
			continue
		}
		if !strings.Contains(string(golden), m[0]+"\n") {
			t.Errorf("LANGUAGE.md quotes a message the parser does not give:\n%s", m[0])
		}
	}
}
