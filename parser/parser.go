// Package parser reads hir's text format (docs/LANGUAGE.md) into an
// ir.Program.
//
// The work is done in three steps. The source is scanned into tokens and
// split into lines (a statement is one line; a region's body is the lines
// between a header ending in `{` and a line holding `}`). Each line is parsed
// on its own with a participle grammar, so a syntax error costs one line and
// the rest of the file is still checked. Each line is turned into IR as
// soon as it is parsed: regions are nested, names are resolved to the values that define them, and
// the program is checked with ir.Verify. A large source is scanned, parsed
// and built on every core but for its names, which are resolved in order
// on one (chunks.go). Every error is reported as
// `file:line:col: message`, as many at once as can be found without
// repeating one mistake as many errors.
//
// Comments are no part of the program: ParseSource with ParseComments gives
// them apart, with where each region's } is, for package format (`hirrun
// fmt`) to print them back (comments.go); Parse never looks for them.
package parser

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// Parse reads the program in src. filename is used in positions and
// messages. The error, when not nil, is an ir.ErrorList; a program returned
// without error has passed ir.Verify.
func Parse(filename string, src []byte) (prog *ir.Program, err error) {
	// The parser is meant never to panic; should a bug make it, the user
	// gets an error rather than a crash. The fuzz test looks for this text.
	defer func() {
		if r := recover(); r != nil {
			prog = nil
			err = ir.ErrorList{ir.Errorf(ir.FilePos(filename), "%s: %v", internalErrorText, r)}
		}
	}()
	return parse(filename, src, true)
}

const internalErrorText = "internal error in the parser (please report it)"

// maxSource is the largest source Parse reads.
const maxSource = 1<<32 - 1

// ParseFile reads and parses the file at path.
func ParseFile(path string) (*ir.Program, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, ir.ErrorList{ir.Errorf(ir.FilePos(path), "cannot read the program: %v", err)}
	}
	return Parse(path, src)
}

// parse does the work of Parse; verify=false skips ir.Verify, so tests can
// round-trip text that is well formed but not a valid program (a float
// attribute, which no op takes yet).
func parse(filename string, src []byte, verify bool) (*ir.Program, error) {
	return parseWith(filename, src, verify, false)
}

// parseWith is parse; reference=true parses every line with the participle
// grammar alone (parseReference), without the fast path (fast.go).
func parseWith(filename string, src []byte, verify, reference bool) (*ir.Program, error) {
	b := newBuilder(filename)
	b.reference = reference
	return b.parse(src, verify)
}

// parse reads src with the builder as set up by parseWith (or a test).
func (b *builder) parse(src []byte, verify bool) (*ir.Program, error) {
	filename := b.file
	if uint64(len(src)) > maxSource {
		// A token's length is kept in 32 bits (lexeme).
		return nil, ir.ErrorList{ir.Errorf(ir.FilePos(filename), "the program is %d bytes: hir reads programs of at most 4 GiB", len(src))}
	}
	defer lessGC(len(src))()
	// The source is read in place, not copied: what the program keeps of
	// its text (names, attribute keys and words) is copied out (keep), so
	// nothing refers to src once Parse returns.
	b.scanParseAndBuild(filename, unsafe.String(unsafe.SliceData(src), len(src)))
	b.finish()
	if verify {
		if b.meshBad || b.prog.Mesh.Size() == 0 {
			// Already reported with a position; Verify would repeat it without.
			b.prog.Mesh = ir.LinearMesh(1)
		}
		if err := b.verify(); err != nil {
			var list ir.ErrorList
			if errors.As(err, &list) {
				b.errs = append(b.errs, list...)
			} else {
				b.errs.Add(ir.FilePos(filename), "%v", err)
			}
		}
	}
	if err := b.errs.Err(); err != nil {
		return nil, err
	}
	return b.prog, nil
}

// verify runs ir.Verify on the program built, less its checks of names
// (ir.VerifyResolved): every name the program keeps, errors or not, is
// defined once and visible where it is used (the builder reports each that
// is not and drops the op), so Verify's map of every name, most of its time
// on a large program, would find nothing. FuzzDifferential holds every
// program Parse builds, accepted or not, to the full ir.Verify.
func (b *builder) verify() error {
	return ir.VerifyResolved(b.prog)
}

// parseLine parses the line; on failure it records the error and leaves
// l.ast nil.
func (b *builder) parseLine(l *line) {
	if !b.reference {
		// The fast path; a line it does not accept goes to the grammar,
		// which words the error.
		if ast, ok := parseLineFast(l, &b.alloc); ok {
			l.ast = ast
			return
		}
	}
	if t, ok := l.firstBad(); ok {
		b.errorAt(b.pos(l.pos(&t)), func() string { return badMessage(l.src, t) })
		return
	}
	if !b.reference && !b.errs.Keeps(b.pos(l.pos(l.at(0)))) {
		// The line is rejected (the fast path accepts what the grammar
		// does), with one error, at or after its start, which the list of
		// errors, full, would only count.
		b.errs.Add(b.pos(l.pos(l.at(0))), "")
		return
	}
	ast, toks, err := b.parseGrammar(l)
	if err == nil {
		l.ast = ast
		return
	}
	b.syntaxError(err, l, toks)
}

// syntaxError words participle's err on the line l, which it was given as
// toks: the line, or the line shortened (line.elideList: the middle of
// lists, whole elements, which hold no bracket that is not closed, nor the
// line's first word).
func (b *builder) syntaxError(err error, l *line, toks []lexer.Token) {
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		b.errorAt(b.pos(ute.Unexpected.Pos), func() string { return unexpectedMessage(ute, l, toks) })
		return
	}
	// Any other participle error words the grammar (its Go types and
	// fields), which means nothing to a user: only its position is kept.
	first := l.lexerToken(l.at(0))
	pos := first.Pos
	var perr participle.Error
	if errors.As(err, &perr) && perr.Position().Line > 0 {
		pos = perr.Position()
	}
	b.errs.Add(b.pos(pos), "syntax error: this line is not a statement hir understands (it starts with %s)", describeToken(first))
}

// unexpectedMessage words a participle "unexpected token" for a user: what
// was found, and what the statement needed there.
func unexpectedMessage(ute *participle.UnexpectedTokenError, l *line, toks []lexer.Token) string {
	found := describeToken(ute.Unexpected)
	switch first := l.at(0); {
	case l.text(first) == "mesh":
		return "syntax error: unexpected " + found + ": write `mesh N` or `mesh [d0, d1, ...]`"
	case l.text(first) == "input":
		return "syntax error: unexpected " + found + ": write `input %name : dtype[dims]`"
	case l.text(first) == "output":
		return "syntax error: unexpected " + found + ": write `output %a, %b, ...`"
	case l.text(first) == "}":
		return "syntax error: unexpected " + found + ": `}` must be alone on its line"
	}
	for _, t := range toks {
		if t.Value == "for" {
			return "syntax error: unexpected " + found + ": write `for %i = FROM to TO [step S] [streams N] {`" + loopKeyHint(l)
		}
		if t.Type == tokIdent {
			break
		}
	}
	if len(toks) > 1 && toks[0].Type == tokIdent && toks[1].Type == tokPunct && toks[1].Value == "=" &&
		ute.Unexpected.Type == tokPunct && ute.Unexpected.Pos.Offset == toks[1].Pos.Offset {
		// `g = relu %x`: a result named without its %.
		return "syntax error: unexpected " + found + " (value names start with %, as in `%" + toks[0].Value + " = ...`)"
	}
	return "syntax error: unexpected " + found + expectedHint(ute.Unexpected, toks)
}

// expectedHint says what the statement needed where it went wrong, judged
// from the token before. (participle's own expectation is written in terms
// of the grammar's Go types, which mean nothing to a user.)
func expectedHint(bad lexer.Token, toks []lexer.Token) string {
	var prev *lexer.Token
	openBrackets := 0
	for i := range toks {
		if toks[i].Pos.Offset == bad.Pos.Offset && toks[i].Type == bad.Type {
			if i > 0 {
				prev = &toks[i-1]
			}
			break
		}
		switch toks[i].Value {
		case "[":
			openBrackets++
		case "]":
			openBrackets--
		}
	}
	if prev == nil {
		switch bad.Type {
		case tokPunct:
			return " (a statement starts with a name, an op or a keyword)"
		case tokVar:
			return " (results are followed by =, as in `%a = relu %x`)"
		}
		return ""
	}
	switch {
	case openBrackets > 0 && bad.Type == tokEOF:
		return " (a ] is missing)"
	case prev.Value == "{":
		return " (a body starts on the line after {)"
	case prev.Value == ",":
		return " after the comma"
	case prev.Value == "=" && prev.Type == tokPunct:
		return " after ="
	case prev.Value == ":":
		return " (expected a type such as f32[8, 16])"
	case prev.Value == "[":
		return " (expected a number or ])"
	case prev.Value == "/":
		return " (expected DIDx)"
	case bad.Type == tokVar && (prev.Type == tokVar || prev.Type == tokInt || prev.Type == tokFloat):
		return " (operands are separated by commas)"
	case bad.Type == tokVar:
		return " (operands come right after the op name, before attributes)"
	case bad.Value == "{":
		return " (a body opens with { at the end of the op's line)"
	}
	return ""
}

func describeToken(t lexer.Token) string {
	switch t.Type {
	case tokEOF:
		return "end of line"
	case tokVar:
		return "name " + t.Value
	case tokInt, tokFloat:
		return "number " + t.Value
	case tokIdent:
		return "word " + t.Value
	}
	return fmt.Sprintf("%q", t.Value)
}

// loopKeyHint points out `step=S` or `streams=N` in a loop header, written
// as if they were attributes: they are keywords followed by a number.
func loopKeyHint(l *line) string {
	// the two tokens before t
	var key, eq lexeme
	n := 0
	for t := range l.all() {
		if n >= 2 && key.kind() == tokIdent && eq.is(l.src, '=') {
			if k := l.text(&key); k == "step" || k == "streams" {
				num := "N"
				if t.kind() == tokInt {
					num = l.text(&t)
				}
				return " (write `" + k + " " + num + "`, not `" + k + "=" + num + "`)"
			}
		}
		key, eq = eq, t
		n++
	}
	return ""
}
