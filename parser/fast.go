package parser

import (
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/hirlab/hir/ir"
)

// The fast path: a hand-written recursive-descent parser for one line's
// tokens that builds the same syntax tree (lineAST) as the participle
// grammar in grammar.go, which stays the grammar of record.
//
// It only ever accepts: a line it cannot parse is handed to the participle
// parser of the line's kind, which rejects it and whose error (token and
// position) is worded by syntaxError as before. So error messages and
// positions are the grammar's by construction; what must agree is the set of
// lines accepted and the tree built for them, which FuzzDifferential
// (fast_test.go) checks line by line and program by program.
//
// The parser follows participle's behaviour with UseLookahead(1), not only
// the EBNF: participle commits to a group once it has matched one token of
// it and does not backtrack out of a group that matched. Where that matters:
//
//   - `for` followed by a name starts a for header; if the header then fails,
//     the line is rejected (participle gave up after two tokens). `for`
//     followed by anything else is a generic op named for (the builder
//     reports it as a malformed for).
//   - inf and nan after an op name are operands, never attribute keys.
//
// Everywhere else the alternatives start with distinct tokens, and a group
// that fails part-way leaves a token that nothing after it can match, so
// failing the whole line is what participle does too.

// fastAlloc hands out the tree's nodes from slabs, so that a line costs a
// few allocations per thousand lines rather than a dozen per line.
type fastAlloc struct {
	lines    []lineAST
	ops      []opAST
	generics []genericAST
	names    []nameTok
	idents   []identTok
	ints     []intTok
	operands []operandAST
	attrs    []attrAST
	values   []attrValueAST
	types    []typeAST
	shapes   []shapeAST
	dims     []dimAST
	lists    []intListAST
	strs     []string
	namePtrs []*nameTok
	opPtrs   []*operandAST
	attrPtrs []*attrAST
	typePtrs []*typeAST
	dimPtrs  []*dimAST
	intPtrs  []*intTok
}

const slab = 256

// take returns the next element of the slab *s, zero: slabs are made
// fresh (zeroed by make) and never reused (the IR's).
func take[T any](s *[]T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, slab)
	}
	n := len(*s)
	*s = (*s)[:n+1]
	return &(*s)[n]
}

// put stores v as the next element of the slab *s, which may be reused
// (the tree's: reset does not clear it), and returns it.
func put[T any](s *[]T, v T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, slab)
	}
	*s = append(*s, v)
	return &(*s)[len(*s)-1]
}

// takeSlice returns a slice of n pointers carved from a slab (its capacity
// is exactly n, so appending to it never writes into the slab). A reused
// slab's slice holds old pointers: the fast path sets every one.
func takeSlice[T any](s *[]*T, n int) []*T {
	if n > slab/4 {
		return make([]*T, n)
	}
	if cap(*s)-len(*s) < n {
		*s = make([]*T, 0, slab)
	}
	start := len(*s)
	*s = (*s)[:start+n]
	return (*s)[start : start+n : start+n]
}

type fastParser struct {
	toks []lexer.Token // ends with EOF
	i    int
	a    *fastAlloc
}

func (p *fastParser) tok() *lexer.Token { return &p.toks[p.i] }

// at is the token at j, or the line's EOF past its end.
func (p *fastParser) at(j int) *lexer.Token {
	if j >= len(p.toks) {
		return &p.toks[len(p.toks)-1]
	}
	return &p.toks[j]
}

// punct reports whether the current token is the punctuation s.
func (p *fastParser) punct(s byte) bool {
	t := &p.toks[p.i]
	return t.Type == tokPunct && t.Value[0] == s
}

func (p *fastParser) word(w string) bool {
	t := &p.toks[p.i]
	return t.Type == tokIdent && t.Value == w
}

func (p *fastParser) next() { p.i++ }

// parseLineFast parses one line (its tokens end with EOF); ok is false when
// the line is not accepted.
func parseLineFast(toks []lexer.Token, a *fastAlloc) (ast *lineAST, ok bool) {
	p := fastParser{toks: toks, a: a}
	ast = put(&a.lines, lineAST{})
	first := &toks[0]
	switch {
	case first.Type == tokIdent && first.Value == "mesh":
		ast.Mesh, ok = p.mesh()
	case first.Type == tokIdent && first.Value == "input":
		ast.Input, ok = p.input()
	case first.Type == tokIdent && first.Value == "output":
		ast.Output, ok = p.output()
	case first.Type == tokPunct && first.Value == "}":
		ast.Close = &closeAST{Pos: first.Pos, Brace: true}
		p.next()
		ok = true
	default:
		ast.Op, ok = p.op()
	}
	if !ok || p.tok().Type != tokEOF {
		return nil, false
	}
	return ast, true
}

func (p *fastParser) mesh() (*meshAST, bool) {
	m := &meshAST{Pos: p.tok().Pos}
	p.next()
	switch {
	case p.tok().Type == tokInt:
		m.Count = p.intTok()
		return m, true
	case p.punct('['):
		var ok bool
		m.List, ok = p.intList()
		return m, ok
	}
	return nil, false
}

func (p *fastParser) intList() (*intListAST, bool) {
	l := put(&p.a.lists, intListAST{Pos: p.tok().Pos, Open: true})
	p.next()
	if p.tok().Type == tokInt {
		n := 1
		for j := p.i + 1; p.toks[j].Type == tokPunct && p.toks[j].Value == "," && p.toks[j+1].Type == tokInt; j += 2 {
			n++
		}
		l.Items = takeSlice(&p.a.intPtrs, n)
		l.Items[0] = p.intTok()
		for k := 1; k < n; k++ {
			p.next() // ,
			l.Items[k] = p.intTok()
		}
	}
	if !p.punct(']') {
		return nil, false
	}
	p.next()
	return l, true
}

func (p *fastParser) intTok() *intTok {
	t := p.tok()
	n := put(&p.a.ints, intTok{Pos: t.Pos, Text: t.Value})
	p.next()
	return n
}

func (p *fastParser) identTok() *identTok {
	t := p.tok()
	n := put(&p.a.idents, identTok{Pos: t.Pos, Text: t.Value})
	p.next()
	return n
}

func (p *fastParser) nameTok() *nameTok {
	t := p.tok()
	n := put(&p.a.names, nameTok{Pos: t.Pos, Text: t.Value})
	p.next()
	return n
}

// names reads %a, %b, ... (the current token is a name).
func (p *fastParser) names() ([]*nameTok, bool) {
	n := 1
	j := p.i + 1
	for ; p.toks[j].Type == tokPunct && p.toks[j].Value == ","; j += 2 {
		if p.toks[j+1].Type != tokVar {
			return nil, false
		}
		n++
	}
	out := takeSlice(&p.a.namePtrs, n)
	out[0] = p.nameTok()
	for k := 1; k < n; k++ {
		p.next() // ,
		out[k] = p.nameTok()
	}
	return out, true
}

func (p *fastParser) input() (*inputAST, bool) {
	in := &inputAST{Pos: p.tok().Pos}
	p.next()
	if p.tok().Type != tokVar {
		return nil, false
	}
	in.Name = p.nameTok()
	if !p.punct(':') {
		return nil, false
	}
	p.next()
	var ok bool
	in.Type, ok = p.typ()
	return in, ok
}

func (p *fastParser) output() (*outputAST, bool) {
	out := &outputAST{Pos: p.tok().Pos}
	p.next()
	if p.tok().Type != tokVar {
		return nil, false
	}
	var ok bool
	out.Values, ok = p.names()
	return out, ok
}

func (p *fastParser) op() (*opAST, bool) {
	o := put(&p.a.ops, opAST{Pos: p.tok().Pos})
	if p.tok().Type == tokVar {
		var ok bool
		if o.Results, ok = p.names(); !ok || !p.punct('=') {
			return nil, false
		}
		p.next()
	}
	if p.tok().Type != tokIdent {
		return nil, false
	}
	if p.word("for") && p.toks[p.i+1].Type == tokVar {
		var ok bool
		o.For, ok = p.forHeader()
		return o, ok
	}
	var ok bool
	o.Generic, ok = p.generic()
	return o, ok
}

func (p *fastParser) forHeader() (*forAST, bool) {
	f := &forAST{Pos: p.tok().Pos}
	p.next()
	f.Index = p.nameTok()
	if !p.punct('=') {
		return nil, false
	}
	p.next()
	if p.tok().Type != tokInt {
		return nil, false
	}
	f.From = p.intTok()
	if !p.word("to") {
		return nil, false
	}
	p.next()
	if p.tok().Type != tokInt {
		return nil, false
	}
	f.To = p.intTok()
	if p.word("step") {
		p.next()
		if p.tok().Type != tokInt {
			return nil, false
		}
		f.Step = p.intTok()
	}
	if p.word("streams") {
		p.next()
		if p.tok().Type != tokInt {
			return nil, false
		}
		f.Streams = p.intTok()
	}
	if !p.punct('{') {
		return nil, false
	}
	p.next()
	f.Open = true
	return f, true
}

func isOperandStart(t *lexer.Token) bool {
	switch t.Type {
	case tokVar, tokInt, tokFloat:
		return true
	case tokIdent:
		return t.Value == "inf" || t.Value == "nan"
	}
	return false
}

func (p *fastParser) generic() (*genericAST, bool) {
	g := put(&p.a.generics, genericAST{Name: p.identTok()})
	if isOperandStart(p.tok()) {
		n := 1
		j := p.i + 1
		for ; p.toks[j].Type == tokPunct && p.toks[j].Value == ","; j += 2 {
			if !isOperandStart(&p.toks[j+1]) {
				return nil, false
			}
			n++
		}
		g.Operands = takeSlice(&p.a.opPtrs, n)
		for k := 0; k < n; k++ {
			if k > 0 {
				p.next() // ,
			}
			t := p.tok()
			s := put(&p.a.strs, t.Value)
			x := put(&p.a.operands, operandAST{Pos: t.Pos, Num: s})
			if t.Type == tokVar {
				x.Name, x.Num = s, nil
			}
			g.Operands[k] = x
			p.next()
		}
	}
	if p.tok().Type == tokIdent {
		n := 0
		for j := p.i; p.toks[j].Type == tokIdent; {
			n++
			if !(p.toks[j+1].Type == tokPunct && p.toks[j+1].Value == "=") {
				return nil, false
			}
			j += 2
			switch t := &p.toks[j]; {
			case t.Type == tokInt, t.Type == tokFloat, t.Type == tokIdent:
				j++
			case t.Type == tokPunct && t.Value == "[":
				for j++; p.toks[j].Type != tokEOF && !(p.toks[j].Type == tokPunct && p.toks[j].Value == "]"); j++ {
				}
				j++
			default:
				return nil, false
			}
			if j >= len(p.toks) {
				return nil, false
			}
		}
		g.Attrs = takeSlice(&p.a.attrPtrs, n)
		for k := 0; k < n; k++ {
			a := put(&p.a.attrs, attrAST{Pos: p.tok().Pos, Key: p.tok().Value})
			p.i += 2 // key =
			t := p.tok()
			v := put(&p.a.values, attrValueAST{Pos: t.Pos})
			switch t.Type {
			case tokInt, tokFloat:
				v.Num = put(&p.a.strs, t.Value)
				p.next()
			case tokIdent:
				v.Word = put(&p.a.strs, t.Value)
				p.next()
			default:
				var ok bool
				if v.List, ok = p.intList(); !ok {
					return nil, false
				}
			}
			a.Value = v
			g.Attrs[k] = a
		}
	}
	if p.punct(':') {
		n := 1
		depth := 0
		for j := p.i + 1; p.toks[j].Type != tokEOF; j++ {
			if t := &p.toks[j]; t.Type == tokPunct {
				switch t.Value {
				case "[":
					depth++
				case "]":
					depth--
				case ",":
					if depth == 0 {
						n++
					}
				}
			}
		}
		g.Types = takeSlice(&p.a.typePtrs, n)
		for k := 0; k < n; k++ {
			p.next() // : or ,
			var ok bool
			if g.Types[k], ok = p.typ(); !ok {
				return nil, false
			}
			if k < n-1 && !p.punct(',') {
				return nil, false
			}
		}
	}
	if p.punct('{') {
		g.Open = true
		p.next()
	}
	return g, true
}

func (p *fastParser) typ() (*typeAST, bool) {
	if p.tok().Type != tokIdent {
		return nil, false
	}
	t := put(&p.a.types, typeAST{Pos: p.tok().Pos})
	t.Name = p.identTok()
	if !p.punct('[') {
		return t, true
	}
	s := put(&p.a.shapes, shapeAST{Open: true})
	p.next()
	if p.tok().Type == tokInt {
		n := 1
		for j := p.i + 1; ; {
			if t := p.at(j); t.Type == tokPunct && t.Value == "/" {
				j += 2
			}
			if t := p.at(j); !(t.Type == tokPunct && t.Value == ",") {
				break
			}
			n++
			j += 2
		}
		s.Dims = takeSlice(&p.a.dimPtrs, n)
		for k := 0; k < n; k++ {
			if k > 0 {
				p.next() // ,
			}
			if p.tok().Type != tokInt {
				return nil, false
			}
			d := put(&p.a.dims, dimAST{Pos: p.tok().Pos})
			d.Extent = p.intTok()
			if p.punct('/') {
				p.next()
				if p.tok().Type != tokIdent {
					return nil, false
				}
				d.Parallel = p.identTok()
			}
			s.Dims[k] = d
		}
	}
	if !p.punct(']') {
		return nil, false
	}
	p.next()
	if p.tok().Type == tokIdent {
		s.Mem = p.identTok()
	}
	t.Shape = s
	return t, true
}

// reset empties the slabs for the next line: the builder turns each line
// into IR before the next is parsed, and the IR keeps no pointer into the
// tree, so one line's nodes are reused by the next. They are not cleared:
// put writes every node whole (clearing them cost a tenth of Parse, most
// of it the garbage collector's barriers on their pointers).
func (a *fastAlloc) reset() {
	a.lines = a.lines[:0]
	a.ops = a.ops[:0]
	a.generics = a.generics[:0]
	a.names = a.names[:0]
	a.idents = a.idents[:0]
	a.ints = a.ints[:0]
	a.operands = a.operands[:0]
	a.attrs = a.attrs[:0]
	a.values = a.values[:0]
	a.types = a.types[:0]
	a.shapes = a.shapes[:0]
	a.dims = a.dims[:0]
	a.lists = a.lists[:0]
	a.strs = a.strs[:0]
	a.namePtrs = a.namePtrs[:0]
	a.opPtrs = a.opPtrs[:0]
	a.attrPtrs = a.attrPtrs[:0]
	a.typePtrs = a.typePtrs[:0]
	a.dimPtrs = a.dimPtrs[:0]
	a.intPtrs = a.intPtrs[:0]
}

// scanParseAndBuild scans src a line at a time into one reused buffer,
// parses each line as it comes and turns it into IR at once (what
// splitLines, parseLine and line do to the whole token stream, without
// holding every token or every line's tree at once: the fast path's nodes
// are reused from line to line).
func (b *builder) scanParseAndBuild(filename, src string) {
	s := scanner{filename: filename, src: src, line: 1, tokens: make([]lexer.Token, 0, 64)}
	// A statement takes a line and at least 4 bytes ("%a=b"); most
	// definitions are written "%a = ...", and "= " is rare elsewhere (an
	// estimate: the table of names grows if it is short).
	lines := min(strings.Count(src, "\n")+1, len(src)/4+1)
	b.presize(lines, min(strings.Count(src, "= ")+strings.Count(src, "input"), lines))
	if workers := b.workers(len(src)); workers > 1 {
		b.readParallel(&s, workers)
	} else {
		for b.readLine(&s) {
		}
	}
	b.src = src
	b.settleUndefined()
}

// readLine scans, parses and builds the line at s; it returns false once
// the source is read.
func (b *builder) readLine(s *scanner) bool {
	s.tokens = s.tokens[:0]
	more := s.scanLine()
	toks := s.tokens
	n := len(toks)
	if n == 1 {
		return more // an empty line
	}
	toks[n-1] = lexer.EOFToken(toks[n-1].Pos)
	b.alloc.reset()
	l := line{tokens: toks}
	b.parseLine(&l)
	b.line(&l)
	return more
}

// parsedLines scans and parses src again, quietly, for what only an error
// message needs (laterDefinition): every line, with its tree, nil where the
// line did not parse.
func (b *builder) parsedLines() []line {
	s := scanner{filename: b.file, src: b.src, line: 1}
	var lines []line
	var alloc fastAlloc
	for more := true; more; {
		s.tokens = nil
		more = s.scanLine()
		toks := s.tokens
		n := len(toks)
		if n == 1 {
			continue
		}
		toks[n-1] = lexer.EOFToken(toks[n-1].Pos)
		l := line{tokens: toks}
		quiet := builder{file: b.file, reference: b.reference}
		quiet.alloc = alloc
		quiet.parseLine(&l)
		alloc = quiet.alloc
		lines = append(lines, l)
	}
	return lines
}

// presize sizes the builder for a program of about that many lines and
// names.
func (b *builder) presize(lines, names int) {
	if b.names.n == 0 {
		b.names.resize(names)
	}
	if body := b.prog.Body; body != nil && len(body.Ops) == 0 {
		body.Ops = make([]*ir.Op, 0, lines)
	}
}
