package parser

import (
	"bytes"
	"errors"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// maxQuoteRun is the longest run of name characters a clipped message may
// hold: a run of up to ir.MaxQuote+8 bytes is kept whole (ir.ClipMessage),
// a longer one cut to ir.MaxQuote bytes and the "…" after them.
const maxQuoteRun = ir.MaxQuote + 8

var (
	// participle's own wording: `unexpected token "x" (expected <ident> |
	// "(" ...)`, "sub-expression ... must match", "branch ... did not
	// progress".
	participleText = regexp.MustCompile(`unexpected token "|\(expected [<"]|sub-expression|did not progress|too many iterations|participle`)
	// The grammar's Go types (lineAST, nameTok, ...).
	grammarName = regexp.MustCompile(`[A-Za-z]*(AST|Tok)\b`)
	nameRun     = regexp.MustCompile(`[A-Za-z0-9_.%+\-\x80-\xff]+`)
)

// checkMessages fails when an error message of list (from parsing src) has
// no line, is longer than ir.MaxMessage, quotes a run of more than
// ir.MaxQuote name characters, or shows participle's grammar text. FuzzParse
// runs it on every input.
func checkMessages(t testing.TB, src []byte, list ir.ErrorList) {
	t.Helper()
	for _, e := range list {
		if !e.Pos.IsValid() {
			t.Fatalf("error without a line: %v (input %q)", e, clipForLog(src))
		}
		if len(e.Msg) > ir.MaxMessage {
			t.Fatalf("message of %d bytes (the bound is %d): %.300s... (input %q)", len(e.Msg), ir.MaxMessage, e.Msg, clipForLog(src))
		}
		for _, run := range nameRun.FindAllString(e.Msg, -1) {
			if len(run) > maxQuoteRun {
				t.Fatalf("message quotes %d bytes at once (the bound is %d): %.300s (input %q)", len(run), maxQuoteRun, e.Msg, clipForLog(src))
			}
		}
		if m := participleText.FindString(e.Msg); m != "" {
			t.Fatalf("message shows the parser library's text %q: %s (input %q)", m, e.Msg, clipForLog(src))
		}
		for _, m := range grammarName.FindAllString(e.Msg, -1) {
			if !bytes.Contains(src, []byte(m)) {
				t.Fatalf("message names the grammar's type %q: %s (input %q)", m, e.Msg, clipForLog(src))
			}
		}
	}
}

func clipForLog(src []byte) []byte {
	if len(src) > 200 {
		return src[:200]
	}
	return src
}

// TestHostileInputs feeds the parser inputs meant to make huge or
// unreadable messages: every error must name file:line:col, stay short and
// word the problem for a user.
func TestHostileInputs(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	junk := make([]byte, 4000)
	rand.New(rand.NewSource(1)).Read(junk)
	tests := []struct {
		name string
		src  string
		// want is the first error, whole (file:line:col: message).
		want string
	}{
		{"long op name", "mesh 1\ninput %x : f32[4]\n%y = " + long("a", 10000) + " %x\noutput %y\n",
			`h.hir:3:6: unknown op "` + long("a", 40) + `…"`},
		{"long dtype", "mesh 1\ninput %x : " + long("q", 5000) + "[4]\noutput %x\n",
			`h.hir:2:12: unknown dtype "` + long("q", 40) + `…"`},
		{"long attribute", "mesh 1\ninput %x : f32[4]\n%y = relu %x " + long("k", 5000) + "=1\noutput %y\n",
			"h.hir:3:14: relu takes no attributes, got " + long("k", 40) + "…"},
		{"long undefined name", "mesh 1\ninput %x : f32[4]\noutput %" + long("v", 5000) + "\n",
			"h.hir:3:8: undefined %" + long("v", 39) + "…"},
		{"long word in syntax error", "mesh 1\ninput %x : f32[4]\n%y = relu %x, " + long("w", 3000) + "\n",
			"h.hir:3:15: syntax error: unexpected word " + long("w", 40) + "…"},
		{"huge dimension", "mesh 1\ninput %x : f32[" + long("9", 5000) + "]\noutput %x\n",
			"h.hir:2:16: "},
		{"huge literal", "mesh 1\ninput %x : f32[4]\n%y = mul %x, " + long("1", 5000) + "\noutput %y\n",
			"h.hir:3:14: "},
		{"malformed number", "mesh 1\ninput %x : f32[4]\n%y = mul %x, 1" + long("x", 5000) + "\n",
			`h.hir:3:14: malformed number "1` + long("x", 39) + `…"`},
		{"garbage line", "mesh 1\n" + long("x = = , ] [ ", 1000) + "\n",
			`h.hir:2:3: syntax error: unexpected "="`},
		{"unbalanced braces", "mesh 1\ninput %x : f32[4]\n%y = fusion %x {\n{\n{\n%z = relu %x\n}}}\n}\n",
			"h.hir:3:6: the body of this fusion is not closed: a } is missing before the end of the file"},
		{"only closing braces", "}\n}\n}}\n",
			"h.hir:1:1: unexpected }: no region is open"},
		{"binary junk", string(junk), "h.hir:1:1: "},
		// First-contact hints: a # comment, a list attribute given a bare
		// integer, a result named without its %.
		{"hash comment", "mesh 4\n# my comment\ninput %x : f32[8/DIDx]\noutput %x\n",
			"h.hir:2:1: unexpected character '#' (comments start with //)"},
		{"integer for a list", "mesh 1\ninput %x : f32[4, 2]\n%s = sum %x axes=0\noutput %s\n",
			"h.hir:3:13: sum: attribute axes takes a list of integers, got 0 (write axes=[0])"},
		{"name without %", "mesh 4\ninput %x : f32[8/DIDx]\ng = all_gather x\noutput %x\n",
			"h.hir:3:3: syntax error: unexpected \"=\" (value names start with %, as in `%g = ...`)"},
		{"long name without %", "mesh 1\ninput %x : f32[4]\n" + long("g", 5000) + " = relu %x\n",
			"h.hir:3:5002: syntax error: unexpected \"=\" (value names start with %, as in `%" + long("g", 39) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("h.hir", []byte(tt.src))
			var list ir.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got %v, want an ir.ErrorList", err)
			}
			checkMessages(t, []byte(tt.src), list)
			if got := list[0].Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("first error\n%.300s\nwant it to start with\n%s", got, tt.want)
			}
			if strings.Contains(err.Error(), internalErrorText) {
				t.Errorf("the parser panicked: %.300s", err)
			}
		})
	}
}

// TestOtherParticipleErrors: a participle error other than an unexpected
// token is worded without the grammar text it carries.
func TestOtherParticipleErrors(t *testing.T) {
	s := scanner{filename: "g.hir", src: "%y = relu %x\n", line: 1}
	var l line
	l.begin(&s, nil)
	b := newBuilder("g.hir")
	b.syntaxError(participle.Errorf(lexer.Position{Line: 1, Column: 6}, `branch genericAST.Operands was accepted but did not progress the lexer at 1:6 ("relu")`), &l, nil)
	want := "g.hir:1:6: syntax error: this line is not a statement hir understands (it starts with name %y)"
	if err := b.errs.Err(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestClipMessage checks the one place messages are bounded.
func TestClipMessage(t *testing.T) {
	name := "%" + strings.Repeat("n", 5000)
	e := ir.Errorf(ir.NewPos("a.hir", 2, 3), "add: %s is f32[4] but %s is i32[4]", name, name)
	want := "a.hir:2:3: add: %" + strings.Repeat("n", 39) + "… is f32[4] but %" + strings.Repeat("n", 39) + "… is i32[4]"
	if e.Error() != want {
		t.Errorf("got %s\nwant %s", e, want)
	}
	// Runs up to MaxQuote+8 bytes stay whole (a position in a message).
	short := "a.b.c_" + strings.Repeat("x", ir.MaxQuote)
	if got := ir.ClipMessage("see " + short); got != "see "+short {
		t.Errorf("a short run was cut: %s", got)
	}
	// A cut never splits a rune.
	if got := ir.ClipMessage(strings.Repeat("é", 100)); got != strings.Repeat("é", ir.MaxQuote/2)+"…" {
		t.Errorf("cut inside a rune: %q", got)
	}
	// The whole message is bounded.
	wide := "f32[" + strings.Repeat("1, ", 3000) + "1]"
	if got := ir.ClipMessage("x is " + wide); len(got) > ir.MaxMessage || !strings.HasSuffix(got, "…") {
		t.Errorf("long message kept %d bytes: %.100s", len(got), got)
	}
}
