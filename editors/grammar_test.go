package editors

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

var update = flag.Bool("update", false, "write textmate/hir.tmLanguage.json again from ir's tables")

const grammarPath = "textmate/hir.tmLanguage.json"

// grammar is the part of TextMate's grammar format hir's grammar uses.
type grammar struct {
	Name       string           `json:"name"`
	ScopeName  string           `json:"scopeName"`
	FileTypes  []string         `json:"fileTypes"`
	Comment    string           `json:"comment"`
	Patterns   []*rule          `json:"patterns"`
	Repository map[string]*rule `json:"repository"`
}

// rule is a match rule, a begin/end region, an include, or a group of
// patterns (a repository entry with patterns alone).
type rule struct {
	Comment       string             `json:"comment,omitempty"`
	Name          string             `json:"name,omitempty"`
	Match         string             `json:"match,omitempty"`
	Begin         string             `json:"begin,omitempty"`
	End           string             `json:"end,omitempty"`
	Captures      map[string]capture `json:"captures,omitempty"`
	BeginCaptures map[string]capture `json:"beginCaptures,omitempty"`
	EndCaptures   map[string]capture `json:"endCaptures,omitempty"`
	Patterns      []*rule            `json:"patterns,omitempty"`
	Include       string             `json:"include,omitempty"`
}

type capture struct {
	Name string `json:"name"`
}

// The scopes of the words the text format knows without a table: the
// statement keywords (parser), literals (lexer), types the passes write.
var (
	declarations = []string{"mesh", "input", "output"}
	booleans     = []string{"true", "false"}
	typeWords    = []string{(&ir.StreamType{}).String(), (&ir.HandleType{}).String()}
)

// opClasses names each ir.Class in the op scopes:
// support.function.op.<class>.hir.
type opClass struct {
	class ir.Class
	scope string
}

var opClasses = []opClass{
	{ir.ClassMemory, "memory"}, {ir.ClassView, "view"}, {ir.ClassPointwise, "pointwise"},
	{ir.ClassReduction, "reduction"}, {ir.ClassMatmul, "matmul"}, {ir.ClassCollective, "collective"},
	{ir.ClassP2P, "p2p"}, {ir.ClassOneSided, "one-sided"}, {ir.ClassSync, "sync"}, {ir.ClassControl, "control"},
}

// wordValueScopes is the scope of a word attribute's value, by key; other
// keys' words are constant.language.<key>.hir.
var wordValueScopes = map[string]string{
	"algo":  "constant.language.algo.hir",
	"op":    "constant.language.reduce-op.hir",
	"dtype": "storage.type.dtype.hir",
	"mem":   "storage.modifier.memory.hir",
}

const (
	word       = `[A-Za-z_][A-Za-z0-9_]*`
	assignment = "keyword.operator.assignment.hir"
	attrKey    = "variable.parameter.attribute.hir"
	opPrefix   = "support.function.op."
	loopScope  = "keyword.control.loop.hir"
)

// alternation is a regexp group body matching any of ws, longest first so
// that no word is tried before a longer one that starts with it.
func alternation(ws []string) string {
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for i, w := range ws {
		ws[i] = regexp.QuoteMeta(w)
	}
	return strings.Join(ws, "|")
}

func captures(names ...string) map[string]capture {
	m := map[string]capture{}
	for i, n := range names {
		if n != "" {
			m[fmt.Sprint(i+1)] = capture{n}
		}
	}
	return m
}

func include(names ...string) []*rule {
	rs := make([]*rule, len(names))
	for i, n := range names {
		rs[i] = &rule{Include: "#" + n}
	}
	return rs
}

// buildGrammar writes hir's grammar from ir's tables.
func buildGrammar() (*grammar, error) {
	ops, err := opRule()
	if err != nil {
		return nil, err
	}
	attrs, err := attributeRules()
	if err != nil {
		return nil, err
	}
	var loopWords []string
	for _, a := range ir.OpFor.Info().Attrs {
		if a.Key != "from" { // from is the number after =
			loopWords = append(loopWords, a.Key)
		}
	}
	repo := map[string]*rule{
		"comment": {Name: "comment.line.double-slash.hir", Match: `(//).*$`,
			Captures: captures("punctuation.definition.comment.hir")},
		"declaration": {Comment: "mesh, input and output start a statement",
			Match: `^\s*(` + alternation(declarations) + `)\b`, Captures: captures("keyword.other.declaration.hir")},
		"loop": {Comment: "for %i = FROM to TO [step S] [streams N] {", Name: "meta.loop.header.hir",
			Begin: `^\s*(` + regexp.QuoteMeta(ir.OpFor.String()) + `)\b`, End: `$`, BeginCaptures: captures(loopScope),
			Patterns: append([]*rule{{Match: `\b(` + alternation(loopWords) + `)\b`, Name: loopScope}},
				include("comment", "value", "number", "assignment", "braces", "invalid")...)},
		"op": ops,
		"unknown-op": {Comment: "a word where an op's name goes that names no op",
			Match: `(?:^\s*|(=)\s*)(` + word + `)`, Captures: captures(assignment, "invalid.illegal.unknown-op.hir")},
		"type-annotation": {Comment: "the types after the colon, to the end of the line", Name: "meta.type.annotation.hir",
			Begin: `(:)`, End: `$`, BeginCaptures: captures("punctuation.separator.type.hir"),
			Patterns: include("comment", "dtype", "type-word", "memory", "device-dimension", "shard", "number", "comma", "brackets", "braces", "invalid")},
		"dtype":            {Name: "storage.type.dtype.hir", Match: `\b(?:` + alternation(ir.DTypeWords) + `)\b`},
		"type-word":        {Name: "storage.type.hir", Match: `\b(?:` + alternation(typeWords) + `)\b`},
		"memory":           {Name: "storage.modifier.memory.hir", Match: `\b(?:` + alternation(ir.MemWords) + `)\b`},
		"device-dimension": {Name: "constant.language.device-dimension.hir", Match: `\b` + regexp.QuoteMeta(ir.DIDx.String()) + `\b`},
		"shard":            {Name: "keyword.operator.shard.hir", Match: `/`},
		"attribute":        {Comment: "key=value: the words each key takes, from ir's op table", Patterns: attrs},
		"value": {Name: "variable.other.value.hir", Match: `(%)[A-Za-z0-9_.]+`,
			Captures: captures("punctuation.definition.variable.hir")},
		"number": {Patterns: []*rule{
			{Name: "constant.numeric.float.hir", Match: `[-+]?\b(?:[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)\b`},
			{Name: "constant.numeric.float.hir", Match: `[-+]?\b(?:inf|nan)\b`},
			{Comment: "a number run into letters (8x, 2.0f)", Name: "invalid.illegal.malformed-number.hir",
				Match: `[-+]?\b[0-9][0-9.]*[A-Za-z_][A-Za-z0-9_.]*`},
			{Name: "constant.numeric.integer.hir", Match: `[-+]?\b[0-9]+\b`},
		}},
		"comma":      {Name: "punctuation.separator.comma.hir", Match: `,`},
		"assignment": {Name: assignment, Match: `=`},
		"brackets": {Patterns: []*rule{
			{Name: "punctuation.section.brackets.begin.hir", Match: `\[`},
			{Name: "punctuation.section.brackets.end.hir", Match: `\]`},
		}},
		"braces": {Patterns: []*rule{
			{Name: "punctuation.section.block.begin.hir", Match: `\{`},
			{Name: "punctuation.section.block.end.hir", Match: `\}`},
		}},
		"invalid": {Comment: "anything else: hir has no use for it here", Name: "invalid.illegal.hir", Match: word + `|\S`},
	}
	return &grammar{
		Name:      "hir",
		ScopeName: "source.hir",
		FileTypes: []string{"hir"},
		Comment:   "Generated from ir's tables by editors/grammar_test.go (go test ./editors -update): do not edit. Every regexp is in the subset of Oniguruma that Go's regexp (RE2) reads alike.",
		Patterns: include("comment", "declaration", "loop", "op", "unknown-op", "type-annotation", "attribute",
			"value", "number", "comma", "assignment", "brackets", "braces", "invalid"),
		Repository: repo,
	}, nil
}

// opRule matches an op's name where it goes: first on its line, or after
// the = of its results. Each class of ops has a scope of its own.
func opRule() (*rule, error) {
	byClass := map[ir.Class][]string{}
	seen := map[string]bool{} // max is two opcodes, one name
	for _, op := range ir.Opcodes() {
		if op == ir.OpFor || seen[op.String()] {
			continue // for is a keyword: the loop header
		}
		seen[op.String()] = true
		if !slices.ContainsFunc(opClasses, func(c opClass) bool { return c.class == op.Class() }) {
			return nil, fmt.Errorf("op %s is of class %d, which opClasses does not name", op, op.Class())
		}
		byClass[op.Class()] = append(byClass[op.Class()], op.String())
	}
	var groups []string
	names := []string{assignment}
	for _, c := range opClasses {
		if ws := byClass[c.class]; len(ws) > 0 {
			groups = append(groups, "("+alternation(ws)+")")
			names = append(names, opPrefix+c.scope+".hir")
		}
	}
	return &rule{Comment: "op names by class, from ir's op table",
		Match: `(?:^\s*|(=)\s*)(?:` + strings.Join(groups, "|") + `)\b`, Captures: captures(names...)}, nil
}

// attributeRules are the attributes ir's ops take: a word attribute with
// one of its words, a bool one with true or false, any known key before
// its number or list, and an unknown key.
func attributeRules() ([]*rule, error) {
	specs := map[string]ir.AttrSpec{}
	for _, op := range ir.Opcodes() {
		for _, a := range op.Info().Attrs {
			if old, ok := specs[a.Key]; ok && (old.Kind != a.Kind || !slices.Equal(old.Words, a.Words)) {
				return nil, fmt.Errorf("attribute %s takes different values on different ops; give each its own rule", a.Key)
			}
			specs[a.Key] = a
		}
	}
	keys := make([]string, 0, len(specs))
	for k := range specs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var rules []*rule
	var bools []string
	for _, k := range keys {
		switch a := specs[k]; {
		case a.Kind == ir.KindWord:
			values, scope := word, "constant.language."+k+".hir"
			if a.Words != nil {
				values = alternation(a.Words)
			}
			if s, ok := wordValueScopes[k]; ok {
				scope = s
			}
			rules = append(rules, &rule{Match: `\b(` + regexp.QuoteMeta(k) + `)\s*(=)\s*(` + values + `)\b`,
				Captures: captures(attrKey, assignment, scope)})
		case a.Kind == ir.KindBool:
			bools = append(bools, k)
		}
	}
	if bools != nil {
		rules = append(rules, &rule{Match: `\b(` + alternation(bools) + `)\s*(=)\s*(` + alternation(booleans) + `)\b`,
			Captures: captures(attrKey, assignment, "constant.language.boolean.hir")})
	}
	return append(rules,
		&rule{Comment: "a known key before its number, list or a word it does not take",
			Match: `\b(` + alternation(keys) + `)\s*(=)`, Captures: captures(attrKey, assignment)},
		&rule{Match: `\b(` + word + `)\s*(=)`, Captures: captures("invalid.illegal.unknown-attribute.hir", assignment)},
	), nil
}

// marshal is the grammar file's text: indented JSON, without HTML escapes.
func (g *grammar) marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The committed grammar is what ir's tables give today: an op, attribute
// or word added to ir fails here until -update writes it in.
func TestGrammarIsGeneratedFromIR(t *testing.T) {
	g, err := buildGrammar()
	require.NoError(t, err)
	want, err := g.marshal()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(grammarPath, want, 0o644))
	}
	got, err := os.ReadFile(grammarPath)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s is not what ir's tables give: run go test ./editors -update", grammarPath)
}
