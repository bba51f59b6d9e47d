package parser

import (
	"fmt"
	"io"
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

// scan splits src into tokens, ending with an EOF token. Comments, spaces,
// tabs and carriage returns are dropped; newlines are kept because they end
// statements.
func scan(filename, src string) []lexer.Token {
	s := scanner{filename: filename, src: src, line: 1, tokens: make([]lexer.Token, 0, len(src)/3+1)}
	for s.scanLine() {
	}
	return s.tokens
}

// scanner scans src one line at a time, appending to tokens (Parse reuses
// one buffer for every line).
type scanner struct {
	filename, src   string
	i               int
	line, lineStart int
	tokens          []lexer.Token
	// comments, when not nil, gets every comment (scanComments); the
	// tokens of a line are then the line's alone.
	comments *[]Comment
}

func (s *scanner) emit(typ lexer.TokenType, start int, value string) {
	s.tokens = append(s.tokens, lexer.Token{
		Type:  typ,
		Value: value,
		Pos:   lexer.Position{Filename: s.filename, Offset: start, Line: s.line, Column: start - s.lineStart + 1},
	})
}

// scanLine appends the tokens of the next line, up to and including its
// newline token, or the EOF token at the end of src; it returns false once
// it has appended the EOF token.
func (s *scanner) scanLine() bool {
	src, i := s.src, s.i
	defer func() { s.i = i }()
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '\n':
			s.emit(tokNewline, i, "\n")
			i++
			s.line, s.lineStart = s.line+1, i
			return true
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			start := i
			for i < len(src) && src[i] != '\n' {
				i++
			}
			if s.comments != nil {
				s.comment(start, i)
			}
		case c == '%':
			j := i + 1
			for j < len(src) && isNameChar(src[j]) {
				j++
			}
			if j == i+1 {
				s.emit(tokBad, i, "a name needs letters, digits, _ or . after %")
			} else {
				s.emit(tokVar, i, src[i:j])
			}
			i = j
		case isDigit(c) || ((c == '-' || c == '+') && i+1 < len(src) && isDigit(src[i+1])):
			i = scanNumber(src, i, s.emit)
		case (c == '-' || c == '+') && hasWordAt(src, i+1, "inf"):
			s.emit(tokFloat, i, src[i:i+4])
			i += 4
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && isIdentChar(src[j]) {
				j++
			}
			s.emit(tokIdent, i, src[i:j])
			i = j
		case c == '=' || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' || c == '/':
			s.emit(tokPunct, i, src[i:i+1])
			i++
		default:
			r, size := utf8.DecodeRuneInString(src[i:])
			var msg string
			switch {
			case r == utf8.RuneError && size <= 1:
				msg = fmt.Sprintf("invalid UTF-8 byte 0x%02x", c)
			case c == '-' || c == '+':
				msg = fmt.Sprintf("unexpected %q: a sign must be followed by a number or inf", c)
			default:
				msg = fmt.Sprintf("unexpected character %q", r)
			}
			s.emit(tokBad, i, msg)
			i += size
		}
	}
	s.emit(tokEOF, i, "")
	return false
}

// hasWordAt reports whether src holds the identifier word at i (and not a
// longer identifier that starts with it).
func hasWordAt(src string, i int, word string) bool {
	end := i + len(word)
	return end <= len(src) && src[i:end] == word && (end == len(src) || !isIdentChar(src[end]))
}

// scanNumber scans [+-]digits[.digits][(e|E)[+-]digits] at i. A number run
// into letters (8x, 2.0f) is reported as one bad token rather than split.
func scanNumber(src string, i int, emit func(lexer.TokenType, int, string)) int {
	start := i
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
		emit(tokBad, start, fmt.Sprintf("malformed number %q", src[start:i]))
	} else {
		emit(typ, start, src[start:i])
	}
	return i
}
