package parser

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Token types of the hir lexer. participle reserves -1 for EOF.
const (
	tokEOF     = lexer.EOF
	tokNewline = lexer.TokenType(-2 - iota)
	tokVar     // %x
	tokInt     // 3, -1, +1
	tokFloat   // 2.5, 1e-05, -inf
	tokIdent   // relu, f32, ring, true
	tokPunct   // = , : [ ] { } /
	tokBad     // a character the format has no use for; Value holds the message
)

// tokenSymbols is a function, not a variable, because the package-level
// parser is built (and asks for the symbols) during package initialization.
func tokenSymbols() map[string]lexer.TokenType {
	return map[string]lexer.TokenType{
		"EOF":     tokEOF,
		"Newline": tokNewline,
		"Var":     tokVar,
		"Int":     tokInt,
		"Float":   tokFloat,
		"Ident":   tokIdent,
		"Punct":   tokPunct,
		"Bad":     tokBad,
	}
}

// hirLexer is a hand-written scanner: faster than a regexp lexer, and it
// keeps going after a bad character (emitting a tokBad) so that one typo does
// not hide the errors on later lines.
type hirLexer struct{}

func (hirLexer) Symbols() map[string]lexer.TokenType { return tokenSymbols() }

func (hirLexer) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return &sliceLexer{tokens: scan(filename, string(src))}, nil
}

// sliceLexer replays tokens already scanned.
type sliceLexer struct {
	tokens []lexer.Token
	next   int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	if l.next >= len(l.tokens) {
		pos := lexer.Position{}
		if n := len(l.tokens); n > 0 {
			pos = l.tokens[n-1].Pos
		}
		return lexer.EOFToken(pos), nil
	}
	t := l.tokens[l.next]
	l.next++
	return t, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isNameChar(c byte) bool { return isIdentChar(c) || c == '.' }

// lexeme is a token as the scanner makes it: where it is in the source and
// its type, 12 bytes and no pointer, so that a line of millions of tokens
// costs the garbage collector nothing and as little memory as can be. Its
// text is src[off:off+n] (Parse reads sources of less than 4 GiB); its line
// and column are its line's (line.pos); a tokBad's message is worded from
// its text when an error needs it (badMessage).
type lexeme struct {
	off, n uint32
	typ    int8
}

func (t lexeme) kind() lexer.TokenType { return lexer.TokenType(t.typ) }

// offset is where t starts in the source.
func (t lexeme) offset() int { return int(t.off) }

func (t lexeme) end() int { return int(t.off) + int(t.n) }

// is reports whether t is the punctuation c.
func (t lexeme) is(src string, c byte) bool { return t.typ == int8(tokPunct) && src[t.offset()] == c }

// scanner scans src a token at a time.
type scanner struct {
	filename, src   string
	i               int
	line, lineStart int
	// onLine: a token was scanned on the current line (a comment after it
	// is trailing).
	onLine bool
	// comments, when not nil, gets every comment (scanComments).
	comments *[]Comment
}

// next scans the token at s.i: the line's next, or its end, a tokNewline
// (s then starts the next line) or, at the end of src, tokEOF, which next
// gives again if called again. Comments, spaces, tabs and carriage returns
// are skipped.
func (s *scanner) next() lexeme {
	src, i := s.src, s.i
	for i < len(src) {
		c := src[i]
		start := i
		typ := tokBad
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '\n':
			s.i, s.line, s.lineStart, s.onLine = i+1, s.line+1, i+1, false
			return lexeme{off: uint32(i), typ: int8(tokNewline)}
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := len(src)
			if nl := strings.IndexByte(src[i:], '\n'); nl >= 0 {
				end = i + nl
			}
			if s.comments != nil {
				s.i = i
				s.comment(start, end)
			}
			i = end
			continue
		case c == '%':
			i++
			for i < len(src) && isNameChar(src[i]) {
				i++
			}
			if i > start+1 {
				typ = tokVar
			}
		case isDigit(c) || ((c == '-' || c == '+') && i+1 < len(src) && isDigit(src[i+1])):
			typ, i = scanNumber(src, i)
		case (c == '-' || c == '+') && hasWordAt(src, i+1, "inf"):
			typ, i = tokFloat, i+4
		case isIdentStart(c):
			i++
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			typ = tokIdent
		case c == '=' || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' || c == '/':
			typ, i = tokPunct, i+1
		case c < utf8.RuneSelf:
			i++ // a bad character
		default:
			_, size := utf8.DecodeRuneInString(src[i:])
			i += size // a bad character, or an invalid byte
		}
		s.i, s.onLine = i, true
		return lexeme{off: uint32(start), n: uint32(i - start), typ: int8(typ)}
	}
	s.i = i
	return lexeme{off: uint32(i), typ: int8(tokEOF)}
}

// badMessage words the tokBad t of src: each kind of bad token starts
// with a byte of its own, which next and scanNumber decided it on.
func badMessage(src string, t lexeme) string {
	c := src[t.offset()]
	switch {
	case c == '%':
		return "a name needs letters, digits, _ or . after %"
	case isDigit(c) || ((c == '-' || c == '+') && t.offset()+1 < len(src) && isDigit(src[t.offset()+1])):
		return fmt.Sprintf("malformed number %q", src[t.offset():t.end()])
	}
	r, size := utf8.DecodeRuneInString(src[t.offset():])
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf("invalid UTF-8 byte 0x%02x", c)
	case c == '-' || c == '+':
		return fmt.Sprintf("unexpected %q: a sign must be followed by a number or inf", c)
	case c == '#':
		return "unexpected character '#' (comments start with //)"
	}
	return fmt.Sprintf("unexpected character %q", r)
}

// scan splits src into participle's tokens, ending with an EOF token, a
// tokBad's Value its message: for participle's Lex and for tests.
// Newlines are kept because they end statements.
func scan(filename, src string) []lexer.Token {
	s := scanner{filename: filename, src: src, line: 1}
	var tokens []lexer.Token
	for {
		line, lineStart := s.line, s.lineStart
		t := s.next()
		tok := lexer.Token{
			Type:  t.kind(),
			Value: src[t.offset():t.end()],
			Pos:   lexer.Position{Filename: filename, Offset: t.offset(), Line: line, Column: t.offset() - lineStart + 1},
		}
		switch t.kind() {
		case tokBad:
			tok.Value = badMessage(src, t)
		case tokNewline:
			tok.Value = "\n"
		}
		tokens = append(tokens, tok)
		if t.kind() == tokEOF {
			return tokens
		}
	}
}

// hasWordAt reports whether src holds the identifier word at i (and not a
// longer identifier that starts with it).
func hasWordAt(src string, i int, word string) bool {
	end := i + len(word)
	return end <= len(src) && src[i:end] == word && (end == len(src) || !isIdentChar(src[end]))
}

// scanNumber scans [+-]digits[.digits][(e|E)[+-]digits] at i: its type and
// end. A number run into letters (8x, 2.0f) is one bad token rather than
// split.
func scanNumber(src string, i int) (lexer.TokenType, int) {
	if src[i] == '-' || src[i] == '+' {
		i++
	}
	digits := func() {
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	digits()
	typ := tokInt
	bad := false
	if i < len(src) && src[i] == '.' {
		typ = tokFloat
		i++
		if i < len(src) && isDigit(src[i]) {
			digits()
		} else {
			bad = true
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			typ = tokFloat
			i = j
			digits()
		}
	}
	for i < len(src) && isNameChar(src[i]) {
		bad = true
		i++
	}
	if bad {
		return tokBad, i
	}
	return typ, i
}
