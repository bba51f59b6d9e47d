package parser

import (
	"slices"
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
// (fast_test.go) checks line by line and program by program. (A long line
// is given to participle shortened: line.go.)
//
// It reads a line's tokens as it goes (line.at), each list in one pass,
// so that a long line's tokens can be let go of as they are read. Of an op,
// it keeps the operands as tokens (genericAST.fastOps) rather than nodes:
// a line of millions of operands then costs what the IR does.
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
	meshes   []meshAST
	inputs   []inputAST
	outputs  []outputAST
	closes   []closeAST
	fors     []forAST
	ops      []opAST
	generics []genericAST
	names    []nameTok
	idents   []identTok
	ints     []intTok
	types    []typeAST
	shapes   []shapeAST
	lists    []intListAST
	typePtrs []*typeAST
	// scratch: a list's elements, gathered before they are carved (carveList)
	nameToks    []lexeme      // a line's results (opAST.fastResults)
	opToks      []lexeme      // a line's operands (genericAST.fastOps)
	itemToks    []lexeme      // its lists' items (intListAST.fastItems)
	dimToks     []fastDim     // its types' dims (shapeAST.fastDims)
	attrToks    []fastAttr    // its attributes (genericAST.fastAttrs)
	listScratch []*intListAST // their lists (genericAST.fastLists)
	typeScratch []*typeAST
}

// listStarts is where the elements of a list start (token indices), for
// elideList, which asks only for element elideKeep and the elideKeep-th
// from the end: the first and the last keepStarts are kept, not one per
// element (a list may have millions).
type listStarts struct {
	n           int
	first, last [keepStarts]int32 // last: element k at k%keepStarts
}

// keepStarts bounds elideKeep (a test lowers it): elideList asks for
// element n-elideKeep of a list whose starts may have one more element
// noted than it has (a last one that failed).
const keepStarts = 8

// add notes that the next element starts at token i.
func (s *listStarts) add(i int) {
	if s.n < keepStarts {
		s.first[s.n] = int32(i)
	}
	s.last[s.n%keepStarts] = int32(i)
	s.n++
}

// at is where element k starts: one of the first or the last keepStarts
// noted.
func (s *listStarts) at(k int) int {
	if k < keepStarts {
		return int(s.first[k])
	}
	return int(s.last[k%keepStarts])
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

// push is append(s, v) for a list of a line, which may be millions long:
// it doubles a full slice where append grows a long one by a quarter,
// copying it four times over (and into fresh memory each time).
func push[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, len(s)+1)
	}
	return append(s, v)
}

// grow is push for a list of the line whose elements take at least
// minBytes bytes each but the last (minBytes-1: what separates them
// included): once the list is long (reserveAt elements) and full, it is
// given room for v and as many as the rest of the line could hold (at
// least doubled), so that a list of millions is not copied again and again
// as it grows.
func grow[T any](p *fastParser, s []T, v T, minBytes int) []T {
	if len(s) == cap(s) && len(s) >= reserveAt {
		rest := len(p.l.src) - p.tok().offset()
		if nl := strings.IndexByte(p.l.src[p.tok().offset():], '\n'); nl >= 0 {
			rest = nl
		}
		s = slices.Grow(s, max((rest+1)/minBytes+1, len(s)))
	}
	return push(s, v)
}

// growList is grow for a list whose elements are separated by commas:
// once long and full, it is given room for one more element than the
// commas left on the line (at least doubled).
func growList[T any](p *fastParser, s []T, v T) []T {
	if len(s) == cap(s) && len(s) >= reserveAt {
		rest := p.l.src[p.tok().offset():]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		s = slices.Grow(s, max(strings.Count(rest, ",")+1, len(s)))
	}
	return push(s, v)
}

// reserveAt is how long a list grows by doubling before grow reserves
// room for the rest of the line.
const reserveAt = 4096

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
	l *line
	i int
	a *fastAlloc
}

func (p *fastParser) tok() *lexeme { return p.l.at(p.i) }

// at is the token at j, or the line's EOF past its end.
func (p *fastParser) at(j int) *lexeme { return p.l.at(j) }

func (p *fastParser) text(t *lexeme) string { return p.l.text(t) }

func (p *fastParser) pos(t *lexeme) lexer.Position { return p.l.pos(t) }

// punct reports whether the current token is the punctuation s.
func (p *fastParser) punct(s byte) bool { return p.tok().is(p.l.src, s) }

// isPunct reports whether the token at j is the punctuation s.
func (p *fastParser) isPunct(j int, s byte) bool { return p.at(j).is(p.l.src, s) }

func (p *fastParser) word(w string) bool {
	t := p.tok()
	return t.kind() == tokIdent && p.text(t) == w
}

func (p *fastParser) next() { p.i++ }

// parseLineFast parses the line l (scanning its tokens as it goes); ok is
// false when the line is not accepted. The tree is built in a's slabs.
func parseLineFast(l *line, a *fastAlloc) (ast *lineAST, ok bool) {
	first := l.at(0)
	if k := first.kind(); k != tokIdent && k != tokVar && !first.is(l.src, '}') {
		return nil, false // no statement starts so (a line of junk: no node made)
	}
	p := fastParser{l: l, a: a}
	ast = put(&a.lines, lineAST{})
	switch {
	case first.kind() == tokIdent && p.text(first) == "mesh":
		ast.Mesh, ok = p.mesh()
	case first.kind() == tokIdent && p.text(first) == "input":
		ast.Input, ok = p.input()
	case first.kind() == tokIdent && p.text(first) == "output":
		ast.Output, ok = p.output()
	case first.is(l.src, '}'):
		ast.Close = put(&a.closes, closeAST{Pos: p.pos(first), Brace: true})
		p.next()
		ok = true
	default:
		ast.Op, ok = p.op()
	}
	if !ok || p.tok().kind() != tokEOF || l.bad {
		return nil, false
	}
	return ast, true
}

func (p *fastParser) mesh() (*meshAST, bool) {
	m := put(&p.a.meshes, meshAST{Pos: p.pos(p.tok())})
	p.next()
	switch {
	case p.tok().kind() == tokInt:
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
	l := put(&p.a.lists, intListAST{Pos: p.pos(p.tok()), Open: true})
	p.next()
	if p.tok().kind() == tokInt {
		// The items' tokens, after those of the line's lists before.
		first, start := p.i, len(p.a.itemToks)
		items := push(p.a.itemToks, *p.tok())
		p.next()
		for p.punct(',') && p.at(p.i+1).kind() == tokInt {
			p.next()
			items = push(items, *p.tok())
			p.next()
			p.release(len(items) - start)
		}
		p.a.itemToks = items
		p.elideList(len(items)-start, first, false)
		l.fastItems, l.fastLine = items[start:len(items):len(items)], p.l
	}
	if !p.punct(']') {
		return nil, false
	}
	p.next()
	return l, true
}

// elideList notes a list of n one-token elements separated by commas,
// starting at first, for participle to skip (line.elide); vars says
// whether they may be names.
func (p *fastParser) elideList(n, first int, vars bool) {
	p.l.elideList(n, true, vars, func(k int) int { return first + 2*k })
}

func (p *fastParser) intTok() *intTok {
	t := p.tok()
	n := put(&p.a.ints, intTok{Pos: p.pos(t), Text: p.text(t)})
	p.next()
	return n
}

func (p *fastParser) identTok() *identTok {
	t := p.tok()
	n := put(&p.a.idents, identTok{Pos: p.pos(t), Text: p.text(t)})
	p.next()
	return n
}

func (p *fastParser) nameTok() *nameTok {
	t := p.tok()
	n := put(&p.a.names, nameTok{Pos: p.pos(t), Text: p.text(t)})
	p.next()
	return n
}

// nameList reads %a, %b, ... (the current token is a name) as tokens, into
// buf (emptied); ok is false where a comma is not followed by a name.
func (p *fastParser) nameList(buf []lexeme) (names []lexeme, ok bool) {
	first := p.i
	names = push(buf[:0], *p.tok())
	p.next()
	ok = true
	for p.punct(',') {
		if p.at(p.i+1).kind() != tokVar {
			ok = false
			break
		}
		p.next()
		names = push(names, *p.tok())
		p.next()
		p.release(len(names))
	}
	p.elideList(len(names), first, true)
	return names, ok
}

func (p *fastParser) input() (*inputAST, bool) {
	in := put(&p.a.inputs, inputAST{Pos: p.pos(p.tok())})
	p.next()
	if p.tok().kind() != tokVar {
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
	out := put(&p.a.outputs, outputAST{Pos: p.pos(p.tok())})
	p.next()
	if p.tok().kind() != tokVar {
		return nil, false
	}
	// The names' tokens (as generic's operands), not nodes.
	names, ok := p.nameList(p.a.opToks)
	p.a.opToks = names
	out.fastValues, out.fastLine = names, p.l
	return out, ok
}

func (p *fastParser) op() (*opAST, bool) {
	o := put(&p.a.ops, opAST{Pos: p.pos(p.tok())})
	if p.tok().kind() == tokVar {
		// The names' tokens (as an output's), not nodes.
		names, ok := p.nameList(p.a.nameToks)
		p.a.nameToks = names
		if !ok || !p.punct('=') {
			return nil, false
		}
		o.fastResults, o.fastLine = names, p.l
		p.next()
	}
	if p.tok().kind() != tokIdent {
		return nil, false
	}
	if p.word("for") && p.at(p.i+1).kind() == tokVar {
		var ok bool
		o.For, ok = p.forHeader()
		return o, ok
	}
	var ok bool
	o.Generic, ok = p.generic()
	return o, ok
}

func (p *fastParser) forHeader() (*forAST, bool) {
	f := put(&p.a.fors, forAST{Pos: p.pos(p.tok())})
	p.next()
	f.Index = p.nameTok()
	if !p.punct('=') {
		return nil, false
	}
	p.next()
	if p.tok().kind() != tokInt {
		return nil, false
	}
	f.From = p.intTok()
	if !p.word("to") {
		return nil, false
	}
	p.next()
	if p.tok().kind() != tokInt {
		return nil, false
	}
	f.To = p.intTok()
	if p.word("step") {
		p.next()
		if p.tok().kind() != tokInt {
			return nil, false
		}
		f.Step = p.intTok()
	}
	if p.word("streams") {
		p.next()
		if p.tok().kind() != tokInt {
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

func (p *fastParser) isOperandStart(t *lexeme) bool {
	switch t.kind() {
	case tokVar, tokInt, tokFloat:
		return true
	case tokIdent:
		w := p.text(t)
		return w == "inf" || w == "nan"
	}
	return false
}

// isSimple reports whether t is an attribute's value of one token.
func isSimple(t *lexeme) bool {
	k := t.kind()
	return k == tokInt || k == tokFloat || k == tokIdent
}

func (p *fastParser) generic() (*genericAST, bool) {
	g := put(&p.a.generics, genericAST{Name: p.identTok()})
	if p.isOperandStart(p.tok()) {
		first := p.i
		ops := p.a.opToks[:0]
		ok := true
		for {
			ops = push(ops, *p.tok())
			p.next()
			if !p.punct(',') {
				break
			}
			if !p.isOperandStart(p.at(p.i + 1)) {
				ok = false
				break
			}
			p.next()
			p.release(len(ops))
		}
		p.a.opToks = ops
		p.elideList(len(ops), first, true)
		if !ok {
			return nil, false
		}
		g.fastOps, g.fastLine = ops, p.l
	}
	if p.tok().kind() == tokIdent {
		attrs := p.a.attrToks[:0]
		lists := p.a.listScratch[:0]
		var starts listStarts
		ok := true
		for ok && p.tok().kind() == tokIdent {
			if !p.isPunct(p.i+1, '=') {
				ok = false
				break
			}
			starts.add(p.i)
			a := fastAttr{key: *p.tok()}
			p.i += 2 // key =
			t := p.tok()
			a.value = *t
			switch {
			case t.kind() == tokInt || t.kind() == tokFloat || t.kind() == tokIdent:
				p.next()
			case t.is(p.l.src, '['):
				var list *intListAST
				list, ok = p.intList()
				lists = push(lists, list)
			default:
				ok = false
			}
			if !ok {
				break
			}
			attrs = grow(p, attrs, a, len("k=1 "))
			p.release(len(attrs))
		}
		p.a.attrToks, p.a.listScratch = attrs, lists
		p.l.elideList(len(attrs), false, false, starts.at)
		if !ok {
			return nil, false
		}
		g.fastAttrs, g.fastLists, g.fastLine = attrs, lists, p.l
	}
	if p.punct(':') {
		types := p.a.typeScratch[:0]
		var starts listStarts
		ok := true
		for {
			p.next() // : or ,
			starts.add(p.i)
			var t *typeAST
			if t, ok = p.typ(); !ok {
				break
			}
			types = growList(p, types, t)
			if !p.punct(',') {
				break
			}
			p.release(len(types))
		}
		p.a.typeScratch = types
		p.l.elideList(len(types), true, false, starts.at)
		if !ok {
			return nil, false
		}
		g.Types = carveList(&p.a.typePtrs, types)
	}
	if p.punct('{') {
		g.Open = true
		p.next()
	}
	return g, true
}

func (p *fastParser) typ() (*typeAST, bool) {
	if p.tok().kind() != tokIdent {
		return nil, false
	}
	t := put(&p.a.types, typeAST{Pos: p.pos(p.tok())})
	t.Name = p.identTok()
	if !p.punct('[') {
		return t, true
	}
	s := put(&p.a.shapes, shapeAST{Open: true})
	p.next()
	if p.tok().kind() == tokInt {
		// The dims' tokens, after those of the line's types before.
		start := len(p.a.dimToks)
		dims := p.a.dimToks
		var starts listStarts
		ok := true
		for {
			starts.add(p.i)
			if p.tok().kind() != tokInt {
				ok = false
				break
			}
			d := fastDim{extent: *p.tok()}
			p.next()
			if p.punct('/') {
				p.next()
				if p.tok().kind() != tokIdent {
					ok = false
					break
				}
				d.parallel = *p.tok()
				p.next()
			}
			dims = growList(p, dims, d)
			if !p.punct(',') {
				break
			}
			p.next()
			p.release(len(dims) - start)
		}
		p.a.dimToks = dims
		p.l.elideList(len(dims)-start, true, false, starts.at)
		if !ok {
			return nil, false
		}
		s.fastDims, s.fastLine = dims[start:len(dims):len(dims)], p.l
	}
	if !p.punct(']') {
		return nil, false
	}
	p.next()
	if p.tok().kind() == tokIdent {
		s.Mem = p.identTok()
	}
	t.Shape = s
	return t, true
}

// release lets the line forget the tokens read, every so many elements
// of a list (line.release).
func (p *fastParser) release(elements int) {
	if elements%releaseEvery == 0 {
		p.l.release(p.i)
	}
}

// carveList copies a list's elements, gathered in a scratch slice, into a
// slice of their own from the slab *s.
func carveList[T any](s *[]*T, elems []*T) []*T {
	out := takeSlice(s, len(elems))
	copy(out, elems)
	return out
}

// reset empties the slabs for the next line: the builder turns each line
// into IR before the next is parsed, and the IR keeps no pointer into the
// tree, so one line's nodes are reused by the next. They are not cleared:
// put writes every node whole (clearing them cost a tenth of Parse, most
// of it the garbage collector's barriers on their pointers).
func (a *fastAlloc) reset() {
	a.lines = a.lines[:0]
	a.meshes = a.meshes[:0]
	a.inputs = a.inputs[:0]
	a.outputs = a.outputs[:0]
	a.closes = a.closes[:0]
	a.fors = a.fors[:0]
	a.ops = a.ops[:0]
	a.generics = a.generics[:0]
	a.names = a.names[:0]
	a.idents = a.idents[:0]
	a.ints = a.ints[:0]
	a.types = a.types[:0]
	a.shapes = a.shapes[:0]
	a.lists = a.lists[:0]
	a.typePtrs = a.typePtrs[:0]
	a.itemToks = a.itemToks[:0]
	a.dimToks = a.dimToks[:0]
}

// scanParseAndBuild reads src a line at a time: each line is scanned as
// it is parsed, into one reused buffer, and turned into IR at once (the fast
// path's nodes are reused from line to line).
func (b *builder) scanParseAndBuild(filename, src string) {
	s := scanner{filename: filename, src: src, line: 1}
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

// readLine reads, parses and builds the line at s; it returns false once
// the source is read.
func (b *builder) readLine(s *scanner) bool {
	l := &b.cur
	l.begin(s, l.toks)
	if !l.empty() {
		b.alloc.reset()
		b.parseLine(l)
		b.line(l)
	}
	return l.finish()
}

// readScanned is readLine for the line at s whose tokens, all of them (the
// last its EOF), a worker scanned: toks, bad as its line.bad. They are read
// where they are, not copied (capped: nothing is appended to them).
func (b *builder) readScanned(s *scanner, toks []lexeme, bad bool) {
	if b.rejectedAtOnce(s, toks, bad) {
		return
	}
	l := &b.cur
	own := l.toks // the buffer lines are scanned into
	l.begin(s, toks[:len(toks):len(toks)])
	l.toks = l.toks[:len(toks)]
	l.done, l.bad = true, bad
	b.alloc.reset()
	b.parseLine(l)
	b.line(l)
	l.finish()
	l.toks = own[:0]
}

// rejectedAtOnce reads, as parseLine and line would and in fewer steps, a
// line a worker scanned (readScanned's toks and bad) that is rejected at
// its first token (no statement starts with a token other than a word, a
// name or a `}`) and holds no name, where its error is a bad character's
// or is one the list of errors would only count: a file of millions of
// such lines (`,` or `}` or a NUL byte on each) is rejected at the rate a
// valid one is read. It reports false, having done nothing, for any other
// line; a lone `}`, which closes a region or is rejected, it reads too.
func (b *builder) rejectedAtOnce(s *scanner, toks []lexeme, bad bool) bool {
	first := &toks[0]
	pos := func(t *lexeme) ir.Pos { return b.filePos.At(s.line, t.offset()-s.lineStart+1) }
	if first.is(s.src, '}') {
		if bad || len(toks) != 2 {
			return false
		}
		// what parseLineFast and line make of it
		b.close(&closeAST{Pos: lexer.Position{Offset: first.offset(), Line: s.line, Column: first.offset() - s.lineStart + 1}, Brace: true})
		return true
	}
	if k := first.kind(); k == tokIdent || k == tokVar {
		return false
	}
	var badTok *lexeme
	for i := range toks {
		switch t := &toks[i]; t.kind() {
		case tokVar:
			return false // a name, which a rejected line poisons
		case tokBad:
			if badTok == nil {
				badTok = t
			}
		}
	}
	// parseLine's error: the first bad character's, or a syntax error the
	// grammar would word, but which is only counted.
	switch {
	case bad && badTok != nil:
		t := *badTok
		b.errorAt(pos(&t), func() string { return badMessage(s.src, t) })
	case b.errs.Keeps(pos(first)):
		return false
	default:
		b.errs.Add(pos(first), "")
	}
	// rejectedLine's: a region it opens is matched with its }.
	if last := len(toks) - 2; last >= 0 && toks[last].is(s.src, '{') {
		fr := take(&b.frames)
		fr.broken = true
		b.push(fr, pos(first))
	} else {
		b.top().tainted = true
	}
	return true
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
