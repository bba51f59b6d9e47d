package editors

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// A small TextMate tokeniser for the grammar's subset of the format:
// match rules with captures, begin/end regions, includes and groups. At
// each position it takes the pattern whose match starts first (the
// region's end before its patterns, then the patterns in order), as
// editors do.

// compiledRule is a rule with its regexps compiled and includes resolved.
type compiledRule struct {
	src        *rule
	match      *matcher
	begin, end *matcher
	patterns   []*compiledRule // a region's
}

// matcher finds a regexp's leftmost match at or after a position of a
// line. Go's regexp cannot start a search in the middle of a string, so
// past the line's start it runs later: the previous character, then the
// fewest characters, then the pattern. That keeps the context ^ and \b
// look at, and the leftmost match is the one with the shortest skip.
type matcher struct {
	src   string
	whole *regexp.Regexp // from the line's start
	later *regexp.Regexp // on line[pos-1:]: its group 1 is the match
}

func compileMatcher(src string) (*matcher, error) {
	for _, bad := range []string{`(?P<`, `(?<`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?>`, `\z`, `\Z`, `\G`, `\h`} {
		if strings.Contains(src, bad) {
			return nil, fmt.Errorf("%q uses %s, which Oniguruma and RE2 do not read alike (or RE2 lacks)", src, bad)
		}
	}
	whole, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("Go's regexp cannot compile %q: %v", src, err)
	}
	later := regexp.MustCompile(`\A(?s:.)(?s:.*?)(` + src + `)`)
	return &matcher{src: src, whole: whole, later: later}, nil
}

// find is the leftmost match at or after pos: submatch indices into line,
// as regexp gives them.
func (m *matcher) find(line string, pos int) []int {
	if pos == 0 {
		return m.whole.FindStringSubmatchIndex(line)
	}
	loc := m.later.FindStringSubmatchIndex(line[pos-1:])
	if loc == nil {
		return nil
	}
	out := loc[2:] // drop the skip: group 1 is the match, 2... its groups
	for i := range out {
		if out[i] >= 0 {
			out[i] += pos - 1
		}
	}
	return out
}

// compileGrammar compiles every rule the grammar reaches.
func compileGrammar(g *grammar) (top []*compiledRule, err error) {
	done := map[*rule]*compiledRule{}
	var compileList func(rs []*rule, path string) ([]*compiledRule, error)
	var compileOne func(r *rule, path string) (*compiledRule, error)
	compileOne = func(r *rule, path string) (*compiledRule, error) {
		if c, ok := done[r]; ok {
			return c, nil
		}
		c := &compiledRule{src: r}
		done[r] = c
		var err error
		switch {
		case r.Match != "":
			c.match, err = compileMatcher(r.Match)
		case r.Begin != "":
			if c.begin, err = compileMatcher(r.Begin); err == nil {
				c.end, err = compileMatcher(r.End)
			}
			if err == nil {
				c.patterns, err = compileList(r.Patterns, path)
			}
		default:
			err = fmt.Errorf("a rule with neither match nor begin")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return c, nil
	}
	// compileList flattens includes and groups into the list of rules
	// tried in order.
	compileList = func(rs []*rule, path string) ([]*compiledRule, error) {
		var out []*compiledRule
		for i, r := range rs {
			p := fmt.Sprintf("%s[%d]", path, i)
			if r.Include != "" {
				name, ok := strings.CutPrefix(r.Include, "#")
				target := g.Repository[name]
				if !ok || target == nil {
					return nil, fmt.Errorf("%s: include %q names no repository entry", p, r.Include)
				}
				r, p = target, "#"+name
			}
			if r.Match == "" && r.Begin == "" {
				group, err := compileList(r.Patterns, p)
				if err != nil {
					return nil, err
				}
				out = append(out, group...)
				continue
			}
			c, err := compileOne(r, p)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return compileList(g.Patterns, "patterns")
}

// token is a run of a line with the scope a match or capture gave it.
type token struct {
	start, end int
	scope      string
}

// tokenizer carries the open regions from line to line.
type tokenizer struct {
	top   []*compiledRule
	stack []*compiledRule
}

// line tokenises one line (without its newline).
func (tz *tokenizer) line(text string) ([]token, error) {
	var toks []token
	emit := func(loc []int, name string, caps map[string]capture) {
		for k, c := range caps {
			i, _ := strconv.Atoi(k)
			if 2*i+1 < len(loc) && loc[2*i] >= 0 && loc[2*i] < loc[2*i+1] {
				toks = append(toks, token{loc[2*i], loc[2*i+1], c.Name})
			}
		}
		if name != "" && loc[0] < loc[1] {
			toks = append(toks, token{loc[0], loc[1], name})
		}
	}
	for pos := 0; ; {
		patterns := tz.top
		var region *compiledRule
		if n := len(tz.stack); n > 0 {
			region = tz.stack[n-1]
			patterns = region.patterns
		}
		var best []int
		var bestRule *compiledRule
		if region != nil {
			best = region.end.find(text, pos)
		}
		for _, r := range patterns {
			m := r.match
			if m == nil {
				m = r.begin
			}
			if loc := m.find(text, pos); loc != nil && (best == nil || loc[0] < best[0]) {
				best, bestRule = loc, r
			}
		}
		switch {
		case best == nil:
			return toks, nil
		case bestRule == nil: // the region ends
			emit(best, "", region.src.EndCaptures)
			tz.stack = tz.stack[:len(tz.stack)-1]
		case best[0] == best[1]:
			return nil, fmt.Errorf("column %d: %q matched nothing, which would stop the tokeniser", best[0]+1, bestRule.src.Match+bestRule.src.Begin)
		case bestRule.match != nil:
			emit(best, bestRule.src.Name, bestRule.src.Captures)
		default:
			emit(best, "", bestRule.src.BeginCaptures)
			tz.stack = append(tz.stack, bestRule)
		}
		pos = best[1]
	}
}

func loadGrammar(t *testing.T) []*compiledRule {
	t.Helper()
	src, err := os.ReadFile(grammarPath)
	require.NoError(t, err)
	var g grammar
	require.NoError(t, json.Unmarshal(src, &g), grammarPath)
	top, err := compileGrammar(&g)
	require.NoError(t, err, grammarPath)
	return top
}

// scopeAt is the innermost scope of byte i: the shortest token holding it
// (a capture inside a match), or "".
func scopeAt(toks []token, i int) string {
	best := token{end: -1}
	for _, tk := range toks {
		if tk.start <= i && i < tk.end && (best.end < 0 || tk.end-tk.start < best.end-best.start) {
			best = tk
		}
	}
	return best.scope
}

// The matcher searches as an editor does: ^ holds at the line's start
// only, \b looks at the character before the search's start, and the
// leftmost match wins.
func TestMatcherKeepsTheLinesContext(t *testing.T) {
	for _, c := range []struct {
		re, line string
		pos      int
		want     []int
	}{
		{`\bx`, "ax x", 1, []int{3, 4}},
		{`\bx`, "a x", 1, []int{2, 3}},
		{`^\s*(y)`, "y y", 1, nil},
		{`(?:^\s*|(=)\s*)(y)`, "y =y", 1, []int{2, 4, 2, 3, 3, 4}},
		{`(?:^\s*|(=)\s*)(y)`, " y", 0, []int{0, 2, -1, -1, 1, 2}},
		{`[0-9]+|b`, "ab12", 1, []int{1, 2}},
		{`$`, "ab", 1, []int{2, 2}},
	} {
		m, err := compileMatcher(c.re)
		require.NoError(t, err)
		assert.Equal(t, c.want, m.find(c.line, c.pos), "%s in %q from %d", c.re, c.line, c.pos)
	}
	_, err := compileMatcher(`a(?=b)`)
	assert.ErrorContains(t, err, "do not read alike", "a lookahead")
}

// Every op ir has gets an op scope where its name goes: first on its line,
// or after its results' =.
func TestGrammarNamesEveryOp(t *testing.T) {
	top := loadGrammar(t)
	for _, op := range ir.Opcodes() {
		name := op.String()
		want, lines := opPrefix, []string{name + " %x", "%r = " + name + " %x", "  %a, %b=" + name}
		if op == ir.OpFor {
			want, lines = loopScope, []string{name + " %i = 0 to 4 {", "  " + name}
		}
		for _, line := range lines {
			toks, err := (&tokenizer{top: top}).line(line)
			require.NoError(t, err, line)
			at := strings.Index(line, name)
			assert.True(t, strings.HasPrefix(scopeAt(toks, at), want), "%q: %s has scope %q, want %s...", line, name, scopeAt(toks, at), want)
		}
	}
}

// hirFiles lists every .hir file of the repository.
func hirFiles(t *testing.T) []string {
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".hir") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// The grammar over every .hir file of the repository: each non-space
// character gets a scope from a match or a capture (a comment's text its
// comment scope); in a file that parses, no scope is invalid and every
// op's name, at the position the parser gives it, has the op scope. A file
// that does not parse (the parser's and checker's error cases) only needs
// every character scoped: its errors may be, and mostly are, invalid.
func TestGrammarOverShippedFiles(t *testing.T) {
	top := loadGrammar(t)
	files := hirFiles(t)
	require.Greater(t, len(files), 100, "the repository's .hir files")
	var valid, ops, lines int
	for _, path := range files {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		prog, perr := parser.Parse(path, src)
		tz := &tokenizer{top: top}
		lineToks := map[int][]token{}
		for n, text := range strings.Split(string(src), "\n") {
			lines++
			toks, err := tz.line(text)
			if !assert.NoError(t, err, "%s:%d", path, n+1) {
				break
			}
			lineToks[n+1] = toks
			for i := 0; i < len(text); i++ {
				if strings.IndexByte(" \t\r", text[i]) >= 0 {
					continue
				}
				scope := scopeAt(toks, i)
				if scope == "" || (perr == nil && strings.HasPrefix(scope, "invalid.")) {
					t.Errorf("%s:%d:%d: %q has scope %q", path, n+1, i+1, text[i:min(len(text), i+20)], scope)
					break
				}
			}
		}
		if perr != nil {
			continue
		}
		valid++
		prog.Body.Walk(func(op *ir.Op) {
			ops++
			want := opPrefix
			if op.Code == ir.OpFor {
				want = loopScope
			}
			text, col := strings.Split(string(src), "\n")[op.Pos.Line-1], int(op.Pos.Col)-1
			got := scopeAt(lineToks[int(op.Pos.Line)], col)
			assert.True(t, strings.HasPrefix(got, want) && strings.HasPrefix(text[col:], op.Code.String()),
				"%s:%d:%d: %s has scope %q, want %s...", path, op.Pos.Line, op.Pos.Col, op.Code, got, want)
		})
	}
	t.Logf("%d .hir files (%d parse), %d lines, %d ops", len(files), valid, lines, ops)
	assert.Greater(t, valid, 100, "files that parse")
}
