// This file holds the builder, which turns parsed lines into IR: its
// state, the slabs the IR is allocated from, and the statements (mesh,
// input, output, ops and the headers that open a region's body). Scopes,
// open regions and names are in build_scope.go; operands, literals,
// attributes and types in build_types.go.

package parser

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// Limits that keep hostile input from exhausting memory or stack.
const (
	maxMeshSize = 1 << 16
	maxNesting  = 256
)

var allOpcodes = ir.Opcodes()

type builder struct {
	file    string
	filePos ir.Pos // the file, for b.pos
	errs    ir.ErrorList
	prog    *ir.Program
	stack   []*frame

	names       nameTable         // every name defined so far (names are unique program-wide), and the top level's values
	src         string            // the source, for scanComments; the caller's bytes (Parse)
	undefined   []undefinedUse    // uses of names not defined so far (settleUndefined)
	strayInputs map[string]ir.Pos // inputs declared in a region, which define nothing (laterDefinition)
	poisoned    map[string]bool   // names whose definition was rejected, that the table of names does not hold (poison)

	reference  bool                       // parse with the participle grammar only (parseWith)
	chunkBytes int                        // tests: > 0 reads in parallel in chunks of this size, < 0 on one goroutine, whatever the source's size
	cur        line                       // the line being read (its tokens' buffer reused from line to line)
	alloc      fastAlloc                  // the fast path's slabs
	ir         irAlloc                    // the IR's slabs
	text       []byte                     // the chunk keep copies into
	lastKey    string                     // the last attribute key keep copied (builder.attr)
	types      []ir.Type                  // an op's result types, reused from op to op
	dimBuf     []ir.Dim                   // a type's dims, reused from type to type
	frames     []frame                    // the regions' frames' slab
	typeCache  map[typeKey]*ir.TensorType // tensorType's
	ends       map[*ir.Op]ir.Pos          // with ParseComments: where each region's } is

	meshPos    ir.Pos
	meshBad    bool
	firstStmt  ir.Pos // first statement, where a missing mesh is reported
	firstOp    ir.Pos
	outputPos  ir.Pos
	lateOpSeen bool
}

// irAlloc hands out the program's ops, results and their small slices
// from slabs (never reused: they are the program), so that an op costs a
// few allocations per thousand ops rather than several.
type irAlloc struct {
	ops      []ir.Op
	values   []ir.Value
	ptrs     []*ir.Value
	attrs    []ir.Attr
	tensors  []ir.TensorType
	dims     []ir.Dim
	literals []ir.Literal
	ints     []int64
	blocks   []ir.Block
	scalars  []ir.ScalarType
}

// keep copies s, text of the source, for the program to keep: Parse reads
// the caller's bytes in place. Small strings share chunks, as the source
// did, rather than costing an allocation each.
func (b *builder) keep(s string) string {
	const chunk = 16 << 10
	switch {
	case s == "":
		return ""
	case len(s) > chunk/16:
		return strings.Clone(s)
	case cap(b.text)-len(b.text) < len(s):
		b.text = make([]byte, 0, chunk)
	}
	start := len(b.text)
	b.text = append(b.text, s...)
	return unsafe.String(&b.text[start], len(s))
}

// dimSlice returns an empty slice of capacity n (non-nil, as make's).
func (a *irAlloc) dimSlice(n int) []ir.Dim { return carve(&a.dims, n) }

// valueSlice returns an empty slice of capacity n (non-nil, as make's).
func (a *irAlloc) valueSlice(n int) []*ir.Value {
	if n == 0 || n > slab/4 {
		return make([]*ir.Value, 0, n)
	}
	return takeSlice(&a.ptrs, n)[:0]
}

// intSlice returns an empty slice of capacity n (nil for n = 0, as
// appending to nil gives).
func (a *irAlloc) intSlice(n int) []int64 {
	if n == 0 {
		return nil
	}
	return carve(&a.ints, n)
}

// attrSlice returns an empty slice of capacity n (non-nil, as make's).
func (a *irAlloc) attrSlice(n int) []ir.Attr { return carve(&a.attrs, n) }

// carve returns an empty slice of capacity n cut from the slab *buf (a new
// slab when it runs out; its own array when n is large or zero).
func carve[T any](buf *[]T, n int) []T {
	if n == 0 || n > slab/4 {
		return make([]T, 0, n)
	}
	if cap(*buf)-len(*buf) < n {
		*buf = make([]T, 0, slab)
	}
	start := len(*buf)
	*buf = (*buf)[:start+n]
	return (*buf)[start : start : start+n]
}

func newBuilder(file string) *builder {
	prog := &ir.Program{File: file, Body: &ir.Block{}}
	b := &builder{
		file:     file,
		filePos:  ir.FilePos(file),
		prog:     prog,
		names:    newNameTable(0),
		poisoned: map[string]bool{},
	}
	b.stack = []*frame{{block: prog.Body, scope: newTopScope(&b.names)}}
	return b
}

// errorAt adds an error at pos, worded by msg only if the list of errors
// keeps it (ir.ErrorList.Keeps): for a message that costs to word (a
// suggestion, a type of many dims).
func (b *builder) errorAt(pos ir.Pos, msg func() string) {
	if b.errs.Keeps(pos) {
		b.errs.Add(pos, "%s", msg())
	} else {
		b.errs.Add(pos, "") // counted only
	}
}

func (b *builder) pos(p lexer.Position) ir.Pos {
	return b.filePos.At(p.Line, p.Column)
}

// line turns one parsed line into IR.
func (b *builder) line(l *line) {
	ast := l.ast
	if ast == nil {
		b.rejectedLine(l)
		return
	}
	if ast.Close == nil {
		b.statementAt(b.pos(l.pos(l.at(0))))
	}
	switch {
	case ast.Mesh != nil:
		b.mesh(ast.Mesh)
	case ast.Input != nil:
		b.input(ast.Input)
	case ast.Output != nil:
		b.output(ast.Output)
	case ast.Close != nil:
		b.close(ast.Close)
	case ast.Op != nil:
		b.op(ast.Op)
	}
}

// rejectedLine keeps a syntax error from causing more: names the line
// mentions are not reported as undefined later, and a region it opens is
// still matched with its `}`.
func (b *builder) rejectedLine(l *line) {
	var last lexeme
	prev := "" // the last name looked at
	if l.done && l.base == 0 && len(l.elide) == 0 {
		// held whole (most rejected lines): no iterator
		for i := range l.toks {
			b.rejectedToken(l, &l.toks[i], &prev, &last)
		}
	} else {
		// the middle of a long list that holds no name is not looked at
		// (nor its last token, which is not the line's)
		for _, t := range l.tokens(func(sp span) bool { return !sp.vars }) {
			b.rejectedToken(l, &t, &prev, &last)
		}
	}
	if last.is(l.src, '{') {
		// A broken region keeps no ops (place): it needs no block.
		fr := take(&b.frames)
		fr.broken = true
		b.push(fr, b.pos(l.pos(l.at(0))))
	} else {
		b.top().tainted = true
	}
}

// rejectedToken is rejectedLine's look at the token t of l: a name is
// poisoned where it is not defined (prev: the last name looked at), and
// last is t unless t ends the line.
func (b *builder) rejectedToken(l *line, t *lexeme, prev *string, last *lexeme) {
	switch t.kind() {
	case tokVar:
		if name := l.text(t)[1:]; name != *prev && !b.isPoisoned(name) {
			if _, ok := b.defined(name); !ok {
				b.poison(name)
			}
			*prev = name
		}
	case tokEOF:
		return
	}
	*last = *t
}

func (b *builder) mesh(m *meshAST) {
	pos := b.pos(m.Pos)
	switch {
	case !b.atTopLevel():
		b.errs.Add(pos, "mesh is only allowed at the top level")
		return
	case b.meshPos.IsValid():
		b.errs.Add(pos, "mesh is given twice (first at %s)", b.meshPos)
		return
	case b.firstStmt != pos:
		b.errs.Add(pos, "mesh must be the first statement (the program starts at %s)", b.firstStmt)
	}
	b.meshPos = pos
	if m.Count != nil {
		n, ok := b.int(m.Count)
		switch {
		case !ok:
			b.meshBad = true
		case n < 1:
			b.errs.Add(b.pos(m.Count.Pos), "mesh needs at least one rank, got %d", n)
			b.meshBad = true
		case n > maxMeshSize:
			b.errs.Add(b.pos(m.Count.Pos), "mesh of %d ranks is too large (at most %d)", n, maxMeshSize)
			b.meshBad = true
		default:
			b.prog.Mesh = ir.LinearMesh(int(n))
			b.prog.Mesh.Pos = pos
		}
		return
	}
	items := m.List.len()
	if items == 0 {
		b.errs.Add(b.pos(m.List.Pos), "mesh needs at least one device")
		b.meshBad = true
		return
	}
	if items > maxMeshSize {
		b.errs.Add(b.pos(m.List.Pos), "mesh of %d ranks is too large (at most %d)", items, maxMeshSize)
		b.meshBad = true
		return
	}
	seen := map[int64]ir.Pos{}
	devices := make([]int, 0, items)
	for k := range items {
		it := m.List.item(k)
		d, ok := b.int(&it)
		if !ok {
			b.meshBad = true
			continue
		}
		p := b.pos(it.Pos)
		switch {
		case d < 0:
			b.errs.Add(p, "mesh device %d is negative", d)
			b.meshBad = true
		case d > math.MaxInt32:
			b.errs.Add(p, "mesh device %d is too large", d)
			b.meshBad = true
		default:
			if first, dup := seen[d]; dup {
				b.errs.Add(p, "mesh device %d is listed twice (first at %s)", d, first)
				b.meshBad = true
			}
			seen[d] = p
			devices = append(devices, int(d))
		}
	}
	if !b.meshBad {
		b.prog.Mesh = ir.Mesh{Devices: devices, Pos: pos}
	}
}

func (b *builder) input(in *inputAST) {
	pos := b.pos(in.Name.Pos)
	name := in.Name.Text[1:]
	switch {
	case !b.atTopLevel():
		b.errs.Add(b.pos(in.Pos), "input is only allowed at the top level")
		b.poison(name)
		if _, seen := b.strayInputs[name]; !seen {
			if b.strayInputs == nil {
				b.strayInputs = map[string]ir.Pos{}
			}
			b.strayInputs[name] = pos
		}
		return
	case b.firstOp.IsValid():
		b.errs.Add(b.pos(in.Pos), "input %s comes after the first op (at %s): declare every input before the ops", in.Name.Text, b.firstOp)
	}
	typ, ok := b.typ(in.Type)
	if !b.claim(in.Name) {
		return
	}
	if !ok {
		b.poison(name)
		return
	}
	if _, isTensor := typ.(*ir.TensorType); !isTensor {
		b.errs.Add(b.pos(in.Type.Pos), "input %s needs a tensor type such as f32[8, 16], got %s", in.Name.Text, typ)
		b.poison(name)
		return
	}
	v := &ir.Value{Name: b.keep(name), Type: typ, Pos: pos}
	b.prog.Inputs = append(b.prog.Inputs, v)
	b.top().scope.set(v)
}

func (b *builder) output(out *outputAST) {
	pos := b.pos(out.Pos)
	switch {
	case !b.atTopLevel():
		b.errs.Add(pos, "output is only allowed at the top level")
		return
	case b.outputPos.IsValid():
		b.errs.Add(pos, "output is given twice (first at %s)", b.outputPos)
		return
	}
	b.outputPos = pos
	for k := range out.count() {
		n := out.value(k)
		if v := b.resolve(&n); v != nil {
			b.prog.Outputs = append(b.prog.Outputs, v)
		}
	}
}

// statementAt notes a statement (not a `}`) at pos. Like opAt, it does
// nothing the second time for one line (commit falls back to reading it).
func (b *builder) statementAt(pos ir.Pos) {
	if !b.firstStmt.IsValid() {
		b.firstStmt = pos
	}
}

// opAt notes an op at pos: the first op, and an op after the output.
func (b *builder) opAt(pos ir.Pos) {
	if b.atTopLevel() {
		if !b.firstOp.IsValid() {
			b.firstOp = pos
		}
		if b.outputPos.IsValid() && !b.lateOpSeen {
			b.lateOpSeen = true
			b.errs.Add(pos, "output must be the last statement (it is at %s)", b.outputPos)
		}
	}
}

func (b *builder) op(o *opAST) {
	b.opAt(b.pos(o.Pos))
	if o.For != nil {
		b.forOp(o)
		return
	}
	op, ok := b.genericOp(o, false)
	b.finishOp(op, o, b.types, ok, o.Generic.Open)
}

// genericOp builds the op of a line that is not a for header, but for its
// results. local: the operands' names are left unresolved (nil), for
// commit; what the op needs besides them depends on its line alone.
func (b *builder) genericOp(o *opAST, local bool) (*ir.Op, bool) {
	g := o.Generic
	namePos := b.pos(g.Name.Pos)
	ok := true
	if g.Name.Text == "for" {
		b.errs.Add(namePos, "malformed for: write `for %%i = FROM to TO [step S] [streams N] {`")
		ok = false
	}

	operands := b.ir.valueSlice(len(g.Operands) + len(g.fastOps))
	for _, x := range g.Operands {
		var v *ir.Value
		if !local || x.Name == nil {
			if v = b.operand(x); v == nil {
				ok = false
			}
		}
		operands = append(operands, v)
	}
	for i := range g.fastOps {
		t := &g.fastOps[i]
		var v *ir.Value
		if !local || t.kind() != tokVar {
			if v = b.tokenOperand(g.fastLine, t); v == nil {
				ok = false
			}
		}
		operands = append(operands, v)
	}

	code, known := ir.LookupOpcode(g.Name.Text, len(operands))
	if !known && g.Name.Text != "for" {
		b.errorAt(namePos, func() string {
			return fmt.Sprintf("unknown op %q%s", g.Name.Text, didYouMean(g.Name.Text, opNameList, ""))
		})
		ok = false
	}

	attrs := b.ir.attrSlice(g.attrCount())
	attrs = attrs[:g.attrCount()]
	lists := 0
	var a attrParts
	sorted := true // so far
	for k := range attrs {
		g.attr(k, &lists, &a)
		aok := b.attr(&attrs[k], &a, code)
		ok = ok && aok
		sorted = sorted && (k == 0 || attrs[k-1].Key <= attrs[k].Key)
	}
	// Sorted, as the printer writes them; duplicates stay for Verify to name.
	if !sorted {
		sortAttrs(attrs)
	}

	types := b.types[:0] // finishOp copies them into the results
	for _, t := range g.Types {
		typ, tok := b.typ(t)
		ok = ok && tok
		types = push(types, typ)
	}
	b.types = types
	if n := o.resultCount(); len(g.Types) > 0 && len(g.Types) != n {
		b.errs.Add(b.pos(g.Types[0].Pos), "%s: %d type%s after the colon for %d result%s",
			g.Name.Text, len(g.Types), plural(len(g.Types)), n, plural(n))
		ok = false
	}

	// Field by field into the slab's zeroed memory (forHeader).
	op := take(&b.ir.ops)
	op.Code, op.Operands, op.Pos = code, operands, namePos
	if len(attrs) > 0 {
		op.Attrs = attrs
	}
	return op, ok
}

// forOp builds a for header and opens its body.
func (b *builder) forOp(o *opAST) {
	op, ok := b.forHeader(o.For)
	fr := b.finishOp(op, o, nil, ok, true)
	b.claimIndex(fr, o.For.Index)
}

// forHeader builds the op of a for header, its bounds and its index, but
// for the index's name, which it does not claim (claimIndex): what the
// line alone says, so that a worker can build it (prebuild).
func (b *builder) forHeader(f *forAST) (*ir.Op, bool) {
	n := 2 // from, to; then step and streams where given
	if f.Step != nil {
		n++
	}
	if f.Streams != nil {
		n++
	}
	// Field by field into the slabs' zeroed memory: a whole struct stored
	// is copied with the collector's barriers on its every pointer.
	op := take(&b.ir.ops)
	op.Code, op.Pos, op.Attrs = ir.OpFor, b.pos(f.Pos), b.ir.attrSlice(n)
	ok := true
	setInt := func(key string, t *intTok) int64 {
		n, iok := b.int(t)
		ok = ok && iok
		// In place (the slab's attributes are zero, or this function's),
		// not a 96-byte Attr copied with the collector's barriers.
		op.Attrs = op.Attrs[:len(op.Attrs)+1]
		a := &op.Attrs[len(op.Attrs)-1]
		a.Key, a.Value.Kind, a.Value.Int, a.Pos = key, ir.KindInt, n, b.pos(t.Pos)
		return n
	}
	setInt("from", f.From)
	setInt("to", f.To)
	if f.Step != nil {
		if step := setInt("step", f.Step); step == 1 {
			op.Attrs = op.Attrs[:2] // step 1 is the default and is not stored
		}
	}
	if f.Streams != nil {
		setInt("streams", f.Streams) // stored even as 1: one stream of its own
	}
	sortAttrs(op.Attrs)
	index := take(&b.ir.values)
	i64 := take(&b.ir.scalars)
	i64.DType = ir.I64
	index.Name, index.Type, index.Pos = b.keep(f.Index.Text[1:]), i64, b.pos(f.Index.Pos)
	op.Body = take(&b.ir.blocks)
	op.Body.Args = append(b.ir.valueSlice(1), index)
	return op, ok
}

// claimIndex claims the name of the index of the for whose body fr is,
// written n; the body of a for whose index cannot be is checked, then
// dropped.
func (b *builder) claimIndex(fr *frame, n *nameTok) {
	if e, claimed := b.claimEntry(n); claimed {
		fr.scope.setEntry(fr.op.Body.Args[0], e)
		return
	}
	fr.broken = true
	fr.scope.lenient = true
}

// finishOp makes op's results and either adds op to the current block or,
// for a header ending in `{`, opens its region and returns the frame.
func (b *builder) finishOp(op *ir.Op, o *opAST, types []ir.Type, ok, open bool) *frame {
	n := o.resultCount()
	if n > 0 && op.Results == nil {
		op.Results = b.ir.valueSlice(n)
	}
	// the claimed names' entries, for the top level's scope.set below
	var entryBuf [4]*nameEntry
	entries := entryBuf[:0]
	if n > len(entryBuf) {
		b.names.reserve(n)
	}
	for i := range n {
		if j := i + touchAhead; j < n {
			b.names.touch(o.resultText(j)[1:])
		}
		r := o.result(i)
		e, claimed := b.claimEntry(&r)
		if !claimed {
			ok = false
			continue
		}
		entries = append(entries, e)
		op.Results = append(op.Results, b.result(op, &r, types, i))
	}
	if len(op.Results) != n || n == 0 {
		op.Results = nil
	}
	return b.place(op, entries, o, ok, open)
}

// touchAhead is how far ahead of the name looked up its slot is fetched
// (nameTable.touch): so many results of a line ahead (finishOp), so many
// lines of a chunk ahead (commitChunk).
const touchAhead = 8

// result makes op's result i, named by r.
func (b *builder) result(op *ir.Op, r *nameTok, types []ir.Type, i int) *ir.Value {
	v := take(&b.ir.values)
	v.Name, v.Def, v.Pos = b.keep(r.Text[1:]), op, b.pos(r.Pos)
	if i < len(types) {
		v.Type = types[i]
	}
	return v
}

// place adds op, whose results' names are claimed (entries), to the
// current block or, for a header ending in `{`, opens its region and
// returns the frame. o is the line, whose results are the names as written
// (for a rejected op; nil where op is not).
func (b *builder) place(op *ir.Op, entries []*nameEntry, o *opAST, ok, open bool) *frame {
	if !open {
		if !ok {
			b.top().tainted = true
			b.poisonResults(o)
			return nil
		}
		top := b.top()
		if !top.broken {
			// A broken region's body is dropped whole (pop): its ops are
			// not kept, only its names.
			top.block.Ops = append(top.block.Ops, op)
		}
		for i, r := range op.Results {
			if i < len(entries) {
				top.scope.setEntry(r, entries[i]) // without looking the name up again
			} else {
				top.scope.set(r)
			}
		}
		return nil
	}
	if op.Body == nil {
		op.Body = take(&b.ir.blocks)
	}
	fr := take(&b.frames)
	fr.op, fr.block, fr.broken = op, op.Body, !ok
	if !ok {
		b.poisonResults(o)
	}
	b.push(fr, op.Pos)
	if op.Code == ir.OpFusion {
		fr.scope.close()
		for _, x := range op.Operands {
			if x != nil && x.Lit == nil {
				fr.scope.capture(x)
			}
		}
	}
	return fr
}

// finish closes what the end of the file left open and checks the mesh.
func (b *builder) finish() {
	for !b.atTopLevel() {
		fr := b.top()
		if fr.op != nil && !fr.broken {
			b.errs.Add(fr.op.Pos, "the body of this %s is not closed: a } is missing before the end of the file", fr.op.Code)
		}
		b.pop()
	}
	if !b.meshPos.IsValid() {
		pos := b.firstStmt
		if !pos.IsValid() {
			pos = b.filePos.At(1, 1)
		}
		b.errs.Add(pos, "the program declares no mesh (write `mesh N` first)")
		b.meshBad = true
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
