package passes

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// TestGolden runs every testdata/<pass>/*.hir through the pipeline up to and
// including <pass>. An accepted program is compared with <name>.golden (its
// text, ir.Print), a rejected one with <name>.err (the error text); notes
// written to ctx.Explain go to <name>.explain. -update rewrites them.
func TestGolden(t *testing.T) {
	total := 0
	for _, pass := range Pipeline() {
		files, err := filepath.Glob(filepath.Join("testdata", pass.Name, "*.hir"))
		if err != nil {
			t.Fatal(err)
		}
		total += len(files)
		for _, file := range files {
			t.Run(pass.Name+"/"+filepath.Base(file), func(t *testing.T) {
				runGolden(t, pass.Name, file)
			})
		}
	}
	if total < 25 {
		t.Errorf("only %d golden cases", total)
	}
}

func runGolden(t *testing.T, pass, file string) {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parser.Parse(filepath.Base(file), src)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var explain bytes.Buffer
	err = LowerUntil(p, pass, &Context{Explain: &explain})
	stem := strings.TrimSuffix(file, ".hir")
	if err != nil {
		if _, ok := err.(ir.ErrorList); !ok {
			t.Errorf("the error is a %T, want ir.ErrorList", err)
		}
		goldenOneOf(t, stem+".err", err.Error()+"\n", stem+".golden")
	} else {
		goldenOneOf(t, stem+".golden", p.String(), stem+".err")
		if err := ir.Verify(p); err != nil {
			t.Errorf("the lowered program does not verify: %v", err)
		}
		// What a pass prints must parse back to the same program text.
		text := p.String()
		back, err := parser.Parse(filepath.Base(file), []byte(text))
		if err != nil {
			t.Errorf("the lowered program does not parse back: %v", err)
		} else if diff := cmp.Diff(text, back.String()); diff != "" {
			t.Errorf("the lowered program does not round-trip (-printed +reparsed):\n%s", diff)
		}
	}
	if _, statErr := os.Stat(stem + ".explain"); explain.Len() > 0 || statErr == nil || *update {
		if explain.Len() == 0 && *update {
			os.Remove(stem + ".explain")
			return
		}
		checkGolden(t, stem+".explain", explain.String())
	}
}

// goldenOneOf checks want against path and that the other outcome's golden
// does not exist (the case changed from accepted to rejected or back).
func goldenOneOf(t *testing.T, path, got, other string) {
	t.Helper()
	if *update {
		os.Remove(other)
	} else if _, err := os.Stat(other); err == nil {
		t.Errorf("%s exists, but the outcome is %s:\n%s", other, filepath.Ext(path), got)
		return
	}
	checkGolden(t, path, got)
}
