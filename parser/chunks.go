package parser

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// Reading a large program on several cores.
//
// A statement is one line and no token spans a newline, so the source is
// cut into chunks of whole lines that are scanned and parsed apart. Workers,
// one per core, turn each line of a chunk into an op as far as the line
// alone says (opcode, literal operands, attributes, types, named results;
// a for header's bounds and index). The builder takes the chunks in order,
// on the caller's goroutine, and does what depends on the lines before: it
// resolves the operands' names, claims the results' names (and a for's
// index) and places the op in its region (commit). A short line no worker
// built (mesh, input or output, a `}`, anything with an error) is read from
// the tokens the worker scanned (readScanned); a long one, and one whose
// names do not resolve cleanly, is scanned and built again by readLine, as
// on one goroutine. So the errors, their positions and their order are
// those of the sequential reader by construction.

const (
	parallelMin = 512 << 10 // smaller sources are read on one goroutine
	chunkBytes  = 32 << 10  // about 700 lines of a typical program
	longLine    = 64 << 10  // workers leave longer lines to the builder
)

// preLine is a line of a chunk: where it is and, when a worker built it,
// its op.
type preLine struct {
	start int    // the line's offset in the source
	line  int    // its number
	pos   ir.Pos // its first token
	// op is the line's op, its named operands nil (their names are the
	// chunk's refs from refs on), or nil: the builder reads the line.
	op   *ir.Op
	refs int32
	open bool // the line opens op's region
	// A short line left to the builder (op nil) keeps the tokens the
	// worker scanned: the chunk's toks[tok0:tok0+ntok] (ntok 0: none
	// kept), bad as the worker's line.bad; the builder reads them rather
	// than scanning the line again.
	bad        bool
	tok0, ntok int32
}

// chunk is a run of whole lines, start to end of the source, and what a
// worker made of them.
type chunk struct {
	start, end, line int
	lines            []preLine
	refs             []string // the named operands' names, without %
	toks             []lexeme // short lines' tokens (preLine.tok0)
	panicked         any      // what a worker's panic carried, raised again by the builder
}

// workers is how many goroutines read a source of size bytes.
func (b *builder) workers(size int) int {
	switch {
	case b.reference:
		return 1 // the reference reader is the sequential one
	case b.chunkBytes > 0:
		return max(2, runtime.GOMAXPROCS(0)) // tests: any size in parallel
	case b.chunkBytes < 0:
		return 1 // tests: any size on one goroutine
	case size < parallelMin:
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// cut splits src into chunks of about size bytes of whole lines, with the
// number of each one's first line.
func cut(src string, size int) []chunk {
	var chunks []chunk
	line := 1
	for start := 0; start < len(src); {
		end := len(src)
		if start+size < len(src) {
			if nl := strings.IndexByte(src[start+size:], '\n'); nl >= 0 {
				end = start + size + nl + 1
			}
		}
		chunks = append(chunks, chunk{start: start, end: end, line: line})
		line += strings.Count(src[start:end], "\n")
		start = end
	}
	return chunks
}

// readParallel reads the source of s (at its start) with workers
// goroutines building lines ahead of the builder.
func (b *builder) readParallel(s *scanner, workers int) {
	size := b.chunkBytes
	if size == 0 {
		size = chunkBytes
	}
	chunks := cut(s.src, size)
	// ready[i] gets chunk i once built; ahead bounds the chunks built and
	// not yet taken (each holds its lines), free hands their buffers back.
	ready := make([]chan *chunk, len(chunks))
	for i := range ready {
		ready[i] = make(chan *chunk, 1)
	}
	window := 4 * workers
	ahead := make(chan struct{}, window)
	free := make(chan *chunk, window)
	stop := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &builder{file: b.file, filePos: b.filePos}
			for {
				select {
				case ahead <- struct{}{}:
				case <-stop:
					return
				}
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return
				}
				c := &chunks[i]
				select {
				case old := <-free:
					c.lines, c.refs, c.toks = old.lines[:0], old.refs[:0], old.toks[:0]
				default:
				}
				w.buildChunk(c, s.src)
				ready[i] <- c
			}
		}()
	}
	// Workers stop when the builder does, a panic included.
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range chunks {
		c := <-ready[i]
		<-ahead
		if c.panicked != nil {
			panic(c.panicked)
		}
		b.commitChunk(c, s)
		select {
		case free <- c:
		default:
		}
	}
}

// buildChunk is a worker's part: it builds what it can of c's lines.
func (w *builder) buildChunk(c *chunk, src string) {
	defer func() {
		if r := recover(); r != nil {
			c.panicked = r
		}
	}()
	s := scanner{filename: w.file, src: src, i: c.start, line: c.line, lineStart: c.start}
	l := &w.cur
	for s.i < c.end {
		p := preLine{start: s.i, line: s.line}
		l.begin(&s, l.toks)
		if !l.empty() {
			w.prebuild(&p, c, l)
			if p.op == nil && l.done && l.base == 0 {
				p.tok0, p.ntok, p.bad = int32(len(c.toks)), int32(len(l.toks)), l.bad
				c.toks = append(c.toks, l.toks...)
			}
			c.lines = append(c.lines, p)
		}
		l.finish()
	}
}

// prebuild builds the op of a line that is an op's, with no error, but for
// its names; other lines are left to the builder.
func (w *builder) prebuild(p *preLine, c *chunk, l *line) {
	if t := l.at(0); t.kind() != tokVar && (t.kind() != tokIdent || isKeyword(l.text(t))) {
		return // not an op's line
	}
	if end := strings.IndexByte(l.src[l.start:], '\n'); end > longLine || (end < 0 && len(l.src)-l.start > longLine) {
		// A long line is one op: building it here saves the builder
		// nothing, and it reads again one it cannot build.
		return
	}
	w.alloc.reset()
	ast, ok := parseLineFast(l, &w.alloc)
	if !ok || ast.Op == nil {
		return
	}
	o := ast.Op
	var op *ir.Op
	p.refs = int32(len(c.refs))
	if f := o.For; f != nil {
		// A for header: its index, as written, is its one ref (commit
		// claims it).
		if op, ok = w.forHeader(f); !ok || len(w.errs) > 0 {
			w.errs = w.errs[:0]
			return
		}
		c.refs = append(c.refs, f.Index.Text)
	} else {
		if op, ok = w.genericOp(o, true); !ok || len(w.errs) > 0 {
			w.errs = w.errs[:0]
			return
		}
		g := o.Generic
		c.refs = slices.Grow(c.refs, len(g.Operands)+len(g.fastOps))
		for _, x := range g.Operands {
			if x.Name != nil {
				c.refs = append(c.refs, (*x.Name)[1:])
			}
		}
		for i := range g.fastOps {
			if t := &g.fastOps[i]; t.kind() == tokVar {
				c.refs = append(c.refs, g.fastLine.text(t)[1:])
			}
		}
	}
	if n := o.resultCount(); n > 0 {
		types := w.types // genericOp's
		if o.For != nil {
			types = nil
		}
		op.Results = w.ir.valueSlice(n)
		for i := range n {
			r := o.result(i)
			op.Results = append(op.Results, w.result(op, &r, types, i))
		}
	}
	p.op, p.open, p.pos = op, o.For != nil || o.Generic.Open, w.pos(o.Pos)
}

// isKeyword reports whether a line starting with the word w is a mesh,
// input or output statement.
func isKeyword(w string) bool { return w == "mesh" || w == "input" || w == "output" }

// commitChunk is the builder's part: c's lines in order, each committed
// when a worker built it, else read as on one goroutine (with s).
func (b *builder) commitChunk(c *chunk, s *scanner) {
	for i := range c.lines {
		if j := i + touchAhead; j < len(c.lines) {
			b.touchNames(c, &c.lines[j])
		}
		p := &c.lines[i]
		if p.op != nil && b.commit(p, c.refs[p.refs:]) {
			continue
		}
		s.i, s.line, s.lineStart = p.start, p.line, p.start
		if p.ntok > 0 {
			b.readScanned(s, c.toks[p.tok0:p.tok0+p.ntok], p.bad)
			continue
		}
		b.readLine(s)
	}
}

// touchNames has the slots of the names p's op defines and uses brought
// into the caches (nameTable.touch), a few lines before they are looked
// up: in a large program each is a cache miss.
func (b *builder) touchNames(c *chunk, p *preLine) {
	if p.op == nil {
		return
	}
	for _, r := range p.op.Results {
		b.names.touch(r.Name)
	}
	refs := c.refs[p.refs:]
	if p.op.Code == ir.OpFor {
		b.names.touch(refs[0][1:]) // the index
		return
	}
	for _, x := range p.op.Operands {
		if x == nil && len(refs) > 0 {
			b.names.touch(refs[0])
			refs = refs[1:]
		}
	}
}

// commit adds the op a worker built for p to the program, if the line
// would have built it without error: every operand's name resolves and
// every result's is new. Otherwise it returns false having changed
// nothing that reading the line changes otherwise (statementAt and opAt do
// nothing the second time; the name entries it makes, readLine makes in the
// same order). A for header's index is claimed as forOp claims it, its
// error (a name defined before) and all.
func (b *builder) commit(p *preLine, refs []string) bool {
	b.statementAt(p.pos)
	b.opAt(p.pos)
	op := p.op
	scope := b.top().scope
	for i, x := range op.Operands {
		if x == nil {
			v, _ := scope.lookup(refs[0])
			if v == nil {
				return false
			}
			op.Operands[i] = v
			refs = refs[1:]
		}
	}
	var entryBuf [4]*nameEntry
	entries := entryBuf[:0]
	for _, r := range op.Results {
		// Each name is defined as it is claimed, so that one named twice
		// is found defined the second time; the names claimed are given
		// back if one cannot be.
		e := b.names.entry(r.Name)
		if e.defined() {
			for _, f := range entries {
				f.line, f.col = 0, 0
			}
			return false
		}
		e.line, e.col = max(r.Pos.Line, 1), r.Pos.Col
		entries = append(entries, e)
	}
	fr := b.place(op, entries, nil, true, p.open)
	if op.Code == ir.OpFor {
		index := op.Body.Args[0]
		b.claimIndex(fr, &nameTok{Pos: lexer.Position{Line: int(index.Pos.Line), Column: int(index.Pos.Col)}, Text: refs[0]})
	}
	return true
}
