package parser

import (
	"errors"
	"iter"
	"slices"
	"strings"
	"unsafe"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// Reading a line at the cost of its bytes, however long it is.
//
// A line's tokens are scanned as the fast path asks for them (line.at),
// into a buffer reused from line to line, so that a line the fast path
// rejects at its first tokens (a line of ten million `[`) is not scanned
// further, and those of a long line it reads are let go of as it goes
// (line.release). What only a rejected line needs, its first bad
// character, the names it mentions and its last token, is found by
// scanning it again without keeping its tokens (line.all), but for the
// middle of its long lists, which the fast path read whole: participle is
// not given them, and rejectedLine needs only those that may hold a name,
// so they are jumped over, not scanned (line.tokens). The participle
// grammar, which words a syntax error, costs microseconds a token; it is
// given no more of a long line than it needs: the line up to a little past
// where the fast path stopped, less the middle of each long list the fast
// path read whole (line.elideList), whose elements participle reads one at
// a time alike, so that it finds the same error in the same place.

// line is the line being read: its tokens, scanned as they are asked for,
// and its syntax tree.
type line struct {
	file, src string
	start     int      // the offset of the line's first byte
	num       int      // its number
	reader    *scanner // the reader's, moved to the next line by finish
	sc        scanner  // at the line's first token not scanned yet
	// toks are the tokens base.. scanned so far (the fast path lets go of
	// a long line's tokens as it reads them: release); once done, the
	// last is an EOF where the line ends (at its newline).
	toks  []lexeme
	base  int
	first lexeme // token 0, kept when released
	done  bool
	bad   bool     // the line has a tokBad among the tokens scanned
	elide []span   // spans of tokens participle need not see (elideSpan)
	ast   *lineAST // the tree, nil when the line did not parse
}

// sameString reports whether a and b are the same string in memory (a
// line is begun for every line of the source: no bytes compared).
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// span is the tokens from..to-1 of a line. next is where token to
// starts, -1 where it was let go of (release) when the span was noted: a
// line scanned again jumps there (line.tokens). vars says whether the
// span may hold a name.
type span struct {
	from, to, next int
	vars           bool
}

// begin starts reading the line at s, which is at a line's start, with
// buf (emptied) for its tokens.
func (l *line) begin(s *scanner, buf []lexeme) {
	if l.reader != s || !sameString(l.src, s.src) || l.file != s.filename {
		*l = line{file: s.filename, src: s.src, reader: s, sc: *s}
	}
	// Field by field: a line is begun for every line of the source.
	l.start, l.num = s.i, s.line
	l.sc.i, l.sc.line, l.sc.lineStart, l.sc.onLine = s.i, s.line, s.lineStart, false
	l.toks, l.base, l.first, l.done, l.bad = buf[:0], 0, lexeme{}, false, false
	l.elide = l.elide[:0]
	l.ast = nil
}

// at is the line's token j, its EOF for j past the end. Once tokens are
// released, j must not be less than where they were (but for 0).
func (l *line) at(j int) *lexeme {
	if k := j - l.base; uint(k) < uint(len(l.toks)) {
		return &l.toks[k]
	}
	return l.scanTo(j)
}

func (l *line) scanTo(j int) *lexeme {
	if j < l.base {
		if j != 0 {
			panic("parser: a released token was asked for")
		}
		return &l.first
	}
	// A few tokens ahead: most lines are read whole at their first token,
	// and a line rejected there costs no more.
	for ahead := j + scanAhead; !l.done && l.base+len(l.toks) <= ahead; {
		t := l.sc.next()
		switch t.kind() {
		case tokNewline:
			t.typ = int8(tokEOF)
			l.done = true
		case tokEOF:
			l.done = true
		case tokBad:
			l.bad = true
		}
		l.toks = append(l.toks, t)
	}
	return &l.toks[min(j-l.base, len(l.toks)-1)]
}

// scanAhead is how many tokens past the one asked for a line scans.
const scanAhead = 16

// A line lets go of the tokens read (release) every releaseEvery elements
// of a list, once it holds releaseMin of them. Tests lower them.
var (
	releaseEvery = 1024
	releaseMin   = 1 << 14
)

// release lets the line forget its tokens before j, which the fast path
// has read: what a rejected line needs of them, it scans again.
func (l *line) release(j int) {
	if j-l.base < releaseMin || j-l.base > len(l.toks) {
		return
	}
	if l.base == 0 {
		l.first = l.toks[0] // token 0 stays (at)
	}
	n := copy(l.toks, l.toks[j-l.base:])
	l.toks = l.toks[:n]
	l.base = j
}

// empty reports whether the line holds no token.
func (l *line) empty() bool { return l.at(0).kind() == tokEOF }

// finish moves the reader's scanner to the start of the next line; it
// returns false at the end of the source.
func (l *line) finish() bool {
	end := len(l.src)
	if l.done {
		end = l.toks[len(l.toks)-1].offset() // the EOF: the newline, or the end
	} else if nl := strings.IndexByte(l.src[l.sc.i:], '\n'); nl >= 0 {
		end = l.sc.i + nl
	}
	r := l.reader
	if end >= len(l.src) {
		r.i = len(l.src)
		return false
	}
	r.i, r.line, r.lineStart, r.onLine = end+1, l.num+1, end+1, false
	return true
}

func (l *line) text(t *lexeme) string { return l.src[t.offset():t.end()] }

// pos is where t is. It leaves the file's name out: the builder takes
// the line and column (builder.pos), and a position without a pointer
// costs the garbage collector less in a tree of millions of nodes.
func (l *line) pos(t *lexeme) lexer.Position {
	return lexer.Position{Offset: t.offset(), Line: l.num, Column: t.offset() - l.start + 1}
}

// intTok is t as the grammar's node.
func (l *line) intTok(t *lexeme) intTok { return intTok{Pos: l.pos(t), Text: l.text(t)} }

// lexerToken is t as participle's token.
func (l *line) lexerToken(t *lexeme) lexer.Token {
	tok := lexer.Token{Type: t.kind(), Value: l.text(t), Pos: l.pos(t)}
	if t.kind() == tokBad {
		tok.Value = badMessage(l.src, *t)
	}
	return tok
}

// all is every token of the line, its EOF last: toks once they hold the
// line, else the line scanned again (a long line's tokens are not kept).
func (l *line) all() iter.Seq[lexeme] {
	return func(yield func(lexeme) bool) {
		if l.done && l.base == 0 {
			for _, t := range l.toks {
				if !yield(t) {
					return
				}
			}
			return
		}
		s := scanner{filename: l.file, src: l.src, i: l.start, line: l.num, lineStart: l.start}
		for {
			t := s.next()
			if t.kind() == tokNewline {
				t.typ = int8(tokEOF)
			}
			if !yield(t) || t.kind() == tokEOF {
				return
			}
		}
	}
}

// firstBad is the line's first bad token, if it has one.
func (l *line) firstBad() (lexeme, bool) {
	if !l.done && l.base == 0 && len(l.toks) < 64 {
		l.at(256) // a short line: scanned whole once, it is not again
	}
	if l.done && !l.bad {
		return lexeme{}, false
	}
	for t := range l.all() {
		if t.kind() == tokBad {
			return t, true
		}
	}
	return lexeme{}, false
}

// Long lists whose middle participle is not shown (elideList): lists of
// at least elideMin elements, but for elideKeep at each end. Tests lower
// them so that short lines are shortened too.
var (
	elideMin  = 64
	elideKeep = 4
)

// elideList notes that participle need not see the middle of a list of n
// elements the fast path read whole: start(k) is where element k starts,
// sep says whether a separator (a comma) comes before each element but
// the first, and vars whether an element may hold a name.
func (l *line) elideList(n int, sep, vars bool, start func(k int) int) {
	if n < elideMin || n-2*elideKeep < 1 {
		return
	}
	from, to := start(elideKeep), start(n-elideKeep)
	if sep {
		from, to = from-1, to-1
	}
	l.elideSpan(span{from: from, to: to, next: -1, vars: vars})
}

// elideSpan notes that participle need not see the tokens of sp, in place
// of the spans noted within them (a list of types, each with a long list
// of dims). The spans stay sorted.
func (l *line) elideSpan(sp span) {
	if k := sp.to - l.base; k >= 0 && k < len(l.toks) {
		sp.next = l.toks[k].offset()
	}
	spans := l.elide[:0]
	at := -1
	for _, s := range l.elide {
		if s.from >= sp.from && s.to <= sp.to {
			continue
		}
		if at < 0 && s.from >= sp.to {
			at = len(spans)
		}
		spans = append(spans, s)
	}
	if at < 0 {
		at = len(spans)
	}
	l.elide = slices.Insert(spans, at, sp)
}

// tokens is every token of the line with its index, its EOF last, but
// for those of the spans elided that skip says need not be looked at: the
// line's tokens held, or the line scanned again, from past each such span
// (where it was noted: span.next). A rejected long line is so scanned
// again only where it must be.
func (l *line) tokens(skip func(sp span) bool) iter.Seq2[int, lexeme] {
	return func(yield func(int, lexeme) bool) {
		held := l.done && l.base == 0
		spans := l.elide
		s := scanner{filename: l.file, src: l.src, i: l.start, line: l.num, lineStart: l.start}
		for i := 0; ; i++ {
			for len(spans) > 0 && spans[0].from <= i {
				if sp := spans[0]; sp.from == i && (held || sp.next >= 0) && skip(sp) {
					i, s.i, s.onLine = sp.to, sp.next, true
				}
				spans = spans[1:]
			}
			var t lexeme
			if held {
				t = l.toks[i]
			} else if t = s.next(); t.kind() == tokNewline {
				t.typ = int8(tokEOF)
			}
			if !yield(i, t) || t.kind() == tokEOF {
				return
			}
		}
	}
}

// grammarTokens is what participle is given of the line, scanned again:
// its first limit tokens but for the spans elided, then an EOF. whole
// reports whether they are all of the line's; near is where token limit-8
// is (an error before it lies well inside what participle was given).
func (l *line) grammarTokens(limit int, elide bool) (toks []lexer.Token, whole bool, near int) {
	spans := l.elide
	near = int(^uint(0) >> 1)
	// A span participle is not given is not scanned, unless token limit-8
	// lies in it (near).
	skip := func(sp span) bool { return elide && sp.to <= limit && (limit-8 < sp.from || limit-8 >= sp.to) }
	for i, t := range l.tokens(skip) {
		if i == limit-8 {
			near = t.offset()
		}
		switch {
		case t.kind() == tokEOF:
			return append(toks, l.lexerToken(&t)), true, near
		case i == limit:
			return append(toks, lexer.EOFToken(l.pos(&t))), false, near
		}
		for len(spans) > 0 && spans[0].to <= i {
			spans = spans[1:]
		}
		if !elide || len(spans) == 0 || i < spans[0].from || spans[0].to > limit {
			toks = append(toks, l.lexerToken(&t))
		}
	}
	panic("unreachable: a line ends with EOF")
}

// parseGrammar parses the line with the participle grammar. The reference
// reader gives it the whole line; Parse gives it the line shortened
// (elideList), and a longer part of it while participle's verdict lies
// near the end of what it was given.
func (b *builder) parseGrammar(l *line) (*lineAST, []lexer.Token, error) {
	const all = int(^uint(0)>>1) - 1
	if b.reference {
		toks, _, _ := l.grammarTokens(all, false)
		ast, err := runGrammar(toks)
		return ast, toks, err
	}
	for limit := l.base + len(l.toks) + 16; ; limit *= 2 {
		toks, whole, near := l.grammarTokens(limit, true)
		ast, err := runGrammar(toks)
		switch {
		case err == nil && len(l.elide) > 0:
			// The line is accepted (the fast path would have): its tree is
			// that of the whole line.
			toks, _, _ := l.grammarTokens(all, false)
			ast, err := runGrammar(toks)
			return ast, toks, err
		case whole:
			return ast, toks, err
		case err != nil && errorOffset(err) < near:
			return nil, toks, err
		}
	}
}

func runGrammar(toks []lexer.Token) (*lineAST, error) {
	peek, err := lexer.Upgrade(&sliceLexer{tokens: toks})
	if err != nil {
		return nil, err
	}
	return parseLineAST(toks[0], peek)
}

// errorOffset is where participle's err is in the source, or the largest
// offset for an error that does not say.
func errorOffset(err error) int {
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		return ute.Unexpected.Pos.Offset
	}
	var perr participle.Error
	if errors.As(err, &perr) && perr.Position().Line > 0 {
		return perr.Position().Offset
	}
	return int(^uint(0) >> 1)
}
