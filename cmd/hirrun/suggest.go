package main

import (
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// didYouMean is "; did you mean %NAME?", NAME the value of vs that name
// most likely meant (parser.Suggest, as the parser's messages), or "".
func didYouMean(name string, vs []*ir.Value) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	if c := parser.Suggest(name, names); c != "" {
		return "; did you mean %" + c + "?"
	}
	return ""
}

// meantRandom reports whether value, an --input spec's value that names
// no file, looks like a mistyped random (rand, Random, randon:seed=2,
// ...), and if so what was meant: random with value's options kept.
func meantRandom(value string) (string, bool) {
	head, opts, hasOpts := strings.Cut(value, ":")
	w := strings.ToLower(head)
	if w == "" || head == "random" {
		return "", false
	}
	if !strings.HasPrefix("random", w) && parser.Suggest(w, []string{"random"}) == "" {
		return "", false
	}
	if hasOpts {
		return "random:" + opts, true
	}
	return "random", true
}
