package parser

import (
	"math"
	"math/bits"
	"strconv"
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

// scope is what names a region sees.
type scope struct {
	parent *scope
	// A region's own values: in vals (from valBuf) while they are few,
	// since most bodies define a handful and a map each would cost more
	// than the body; in names once there are more than smallScope.
	vals   []*ir.Value
	valBuf [4]*ir.Value
	names  map[string]*ir.Value
	table  *nameTable // the top level's: the program's table of names
	// closed: a fusion body, which sees only its operands (entered into
	// names) and its own values.
	closed bool
	// lenient: inside a region whose header was rejected; names it cannot
	// resolve are not reported again.
	lenient bool
}

const smallScope = 16

// lookup finds name; crossedFusion reports whether the search stopped at a
// fusion boundary (the name may be visible outside it).
func (s *scope) lookup(name string) (v *ir.Value, crossedFusion bool) {
	for ; s != nil; s = s.parent {
		if v := s.get(name); v != nil {
			return v, false
		}
		if s.closed {
			return nil, true
		}
	}
	return nil, false
}

// get is the value name means in this scope itself (not its parents).
func (s *scope) get(name string) *ir.Value {
	switch {
	case s.table != nil:
		if e := s.table.lookup(name); e != nil {
			return e.v
		}
		return nil
	case s.names != nil:
		return s.names[name]
	}
	for _, v := range s.vals {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// set makes v's name mean v in this scope.
func (s *scope) set(v *ir.Value) {
	switch {
	case s.table != nil:
		s.table.entry(v.Name).v = v
		return
	case s.names != nil:
		s.names[v.Name] = v
		return
	}
	for i, u := range s.vals {
		if u.Name == v.Name {
			s.vals[i] = v
			return
		}
	}
	if len(s.vals) < smallScope {
		if s.vals == nil {
			s.vals = s.valBuf[:0]
		}
		s.vals = append(s.vals, v)
		return
	}
	s.names = make(map[string]*ir.Value, 2*smallScope)
	for _, u := range s.vals {
		s.names[u.Name] = u
	}
	s.names[v.Name] = v
	s.vals = nil
}

// each calls f with every name this scope defines (not its parents').
func (s *scope) each(f func(string)) {
	if s.table != nil {
		s.table.each(func(e *nameEntry) {
			if e.v != nil {
				f(e.name)
			}
		})
		return
	}
	for _, v := range s.vals {
		f(v.Name)
	}
	for n := range s.names {
		f(n)
	}
}

func (s *scope) isLenient() bool {
	for ; s != nil; s = s.parent {
		if s.lenient {
			return true
		}
	}
	return false
}

// frame is a region being read: the top level, or the body of a for or
// fusion whose `}` has not been seen yet.
type frame struct {
	op      *ir.Op
	block   *ir.Block
	scope   *scope
	broken  bool // the header was rejected: the body is checked, then dropped
	tainted bool // an op of the body was rejected
}

type builder struct {
	file    string
	filePos ir.Pos // the file, for b.pos
	errs    ir.ErrorList
	prog    *ir.Program
	stack   []*frame

	names     nameTable         // every name defined so far (names are unique program-wide), and the top level's values
	src       string            // the source, for laterDefinition; the caller's bytes (Parse)
	undefined []undefinedUse    // uses of names not defined so far (settleUndefined)
	laterDef  map[string]ir.Pos // every name the text defines, for "used before defined"; made on first need
	poisoned  map[string]bool   // names whose definition was rejected: uses are not reported

	reference  bool                       // parse with the participle grammar only (parseWith)
	chunkBytes int                        // tests: > 0 reads in parallel in chunks of this size, < 0 on one goroutine, whatever the source's size
	tokens     []lexer.Token              // a worker's line, reused from line to line
	alloc      fastAlloc                  // the fast path's slabs
	ir         irAlloc                    // the IR's slabs
	text       []byte                     // the chunk keep copies into
	types      []ir.Type                  // an op's result types, reused from op to op
	dimBuf     []ir.Dim                   // a type's dims, reused from type to type
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
	b.stack = []*frame{{block: prog.Body, scope: &scope{table: &b.names}}}
	return b
}

// defined reports where name was defined, if it was.
func (b *builder) defined(name string) (ir.Pos, bool) {
	if e := b.names.lookup(name); e != nil && e.defined() {
		return b.filePos.At(int(e.line), int(e.col)), true
	}
	return ir.Pos{}, false
}

// define records that name is defined at p.
func (b *builder) define(name string, p lexer.Position) {
	e := b.names.entry(name)
	e.define(p)
}

// laterDefinition is where the text first defines name, if it does. The
// table is made from every line, parsed again, on the first call (only an
// error needs it).
func (b *builder) laterDefinition(name string) (ir.Pos, bool) {
	if b.laterDef == nil {
		b.laterDef = map[string]ir.Pos{}
		b.collectDefinitions(b.parsedLines())
	}
	p, ok := b.laterDef[name]
	return p, ok
}

// undefinedUse is a use of a name that no line before it defines: reported
// as undefined when read, and reworded by settleUndefined, once every line
// has been read, if a later line defines it.
type undefinedUse struct {
	err  *ir.Error
	name string // without the %
	text string // as written
}

// settleUndefined words each use of a name that was not defined where it
// was used: "used before its definition" if the text defines it later.
func (b *builder) settleUndefined() {
	for _, u := range b.undefined {
		if later, ok := b.laterDefinition(u.name); ok {
			*u.err = *ir.Errorf(u.err.Pos, "%s is used before its definition at %s", u.text, later)
		}
	}
	b.undefined = nil
}

func (b *builder) pos(p lexer.Position) ir.Pos {
	return b.filePos.At(p.Line, p.Column)
}

func (b *builder) top() *frame { return b.stack[len(b.stack)-1] }

func (b *builder) atTopLevel() bool { return len(b.stack) == 1 }

// collectDefinitions records where every name is defined, so that a use
// before the definition can say so.
func (b *builder) collectDefinitions(lines []line) {
	add := func(n *nameTok) {
		if n == nil {
			return
		}
		if _, ok := b.laterDef[n.Text[1:]]; !ok {
			b.laterDef[n.Text[1:]] = b.pos(n.Pos)
		}
	}
	for _, l := range lines {
		switch {
		case l.ast == nil:
		case l.ast.Input != nil:
			add(l.ast.Input.Name)
		case l.ast.Op != nil:
			for _, r := range l.ast.Op.Results {
				add(r)
			}
			if l.ast.Op.For != nil {
				add(l.ast.Op.For.Index)
			}
		}
	}
}

// line turns one parsed line into IR.
func (b *builder) line(l *line) {
	ast := l.ast
	if ast == nil {
		b.rejectedLine(l)
		return
	}
	if ast.Close == nil {
		b.statementAt(b.pos(l.tokens[0].Pos))
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
	for _, t := range l.tokens {
		if t.Type == tokVar {
			if _, ok := b.defined(t.Value[1:]); !ok {
				b.poisoned[t.Value[1:]] = true
			}
		}
	}
	if n := len(l.tokens); n >= 2 && l.tokens[n-2].Value == "{" {
		b.push(&frame{block: &ir.Block{}, broken: true}, b.pos(l.tokens[0].Pos))
	} else {
		b.top().tainted = true
	}
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
	items := m.List.Items
	if len(items) == 0 {
		b.errs.Add(b.pos(m.List.Pos), "mesh needs at least one device")
		b.meshBad = true
		return
	}
	if len(items) > maxMeshSize {
		b.errs.Add(b.pos(m.List.Pos), "mesh of %d ranks is too large (at most %d)", len(items), maxMeshSize)
		b.meshBad = true
		return
	}
	seen := map[int64]ir.Pos{}
	devices := make([]int, 0, len(items))
	for _, it := range items {
		d, ok := b.int(it)
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
	for _, n := range out.Values {
		if v := b.resolve(n); v != nil {
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
	b.finishOp(op, o.Results, b.types, ok, o.Generic.Open)
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

	operands := b.ir.valueSlice(len(g.Operands))
	for _, x := range g.Operands {
		var v *ir.Value
		if !local || x.Name == nil {
			if v = b.operand(x); v == nil {
				ok = false
			}
		}
		operands = append(operands, v)
	}

	code, known := ir.LookupOpcode(g.Name.Text, len(operands))
	if !known && g.Name.Text != "for" {
		b.errs.Add(namePos, "unknown op %q%s", g.Name.Text, didYouMean(g.Name.Text, opNames(), ""))
		ok = false
	}

	attrs := b.ir.attrSlice(len(g.Attrs))
	for _, a := range g.Attrs {
		attr, aok := b.attr(a, code)
		ok = ok && aok
		attrs = append(attrs, attr)
	}
	// Sorted, as the printer writes them; duplicates stay for Verify to name.
	sortAttrs(attrs)

	types := b.types[:0] // finishOp copies them into the results
	for _, t := range g.Types {
		typ, tok := b.typ(t)
		ok = ok && tok
		types = append(types, typ)
	}
	b.types = types
	if len(g.Types) > 0 && len(g.Types) != len(o.Results) {
		b.errs.Add(b.pos(g.Types[0].Pos), "%s: %d type%s after the colon for %d result%s",
			g.Name.Text, len(g.Types), plural(len(g.Types)), len(o.Results), plural(len(o.Results)))
		ok = false
	}

	op := take(&b.ir.ops)
	*op = ir.Op{Code: code, Operands: operands, Attrs: attrs, Pos: namePos}
	if len(attrs) == 0 {
		op.Attrs = nil
	}
	return op, ok
}

func (b *builder) forOp(o *opAST) {
	f := o.For
	op := &ir.Op{Code: ir.OpFor, Pos: b.pos(f.Pos)}
	ok := true
	setInt := func(key string, t *intTok) int64 {
		n, iok := b.int(t)
		ok = ok && iok
		op.Attrs = append(op.Attrs, ir.Attr{Key: key, Value: ir.AttrValue{Kind: ir.KindInt, Int: n}, Pos: b.pos(t.Pos)})
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
	index := &ir.Value{Name: b.keep(f.Index.Text[1:]), Type: &ir.ScalarType{DType: ir.I64}, Pos: b.pos(f.Index.Pos)}
	op.Body = &ir.Block{Args: []*ir.Value{index}}
	fr := b.finishOp(op, o.Results, nil, ok, true)
	if b.claim(f.Index) {
		fr.scope.set(index)
	} else {
		fr.broken = true
		fr.scope.lenient = true
	}
}

// finishOp makes op's results and either adds op to the current block or,
// for a header ending in `{`, opens its region and returns the frame.
func (b *builder) finishOp(op *ir.Op, results []*nameTok, types []ir.Type, ok, open bool) *frame {
	if len(results) > 0 && op.Results == nil {
		op.Results = b.ir.valueSlice(len(results))
	}
	// the claimed names' entries, for the top level's scope.set below
	var entryBuf [4]*nameEntry
	entries := entryBuf[:0]
	for i, r := range results {
		e, claimed := b.claimEntry(r)
		if !claimed {
			ok = false
			continue
		}
		entries = append(entries, e)
		op.Results = append(op.Results, b.result(op, r, types, i))
	}
	if len(op.Results) != len(results) || len(results) == 0 {
		op.Results = nil
	}
	return b.place(op, entries, results, ok, open)
}

// result makes op's result i, named by r.
func (b *builder) result(op *ir.Op, r *nameTok, types []ir.Type, i int) *ir.Value {
	v := take(&b.ir.values)
	*v = ir.Value{Name: b.keep(r.Text[1:]), Def: op, Pos: b.pos(r.Pos)}
	if i < len(types) {
		v.Type = types[i]
	}
	return v
}

// place adds op, whose results' names are claimed (entries), to the
// current block or, for a header ending in `{`, opens its region and
// returns the frame. results are the names as written (for a rejected op).
func (b *builder) place(op *ir.Op, entries []*nameEntry, results []*nameTok, ok, open bool) *frame {
	if !open {
		if !ok {
			b.top().tainted = true
			b.poisonResults(results)
			return nil
		}
		top := b.top()
		top.block.Ops = append(top.block.Ops, op)
		for i, r := range op.Results {
			if top.scope.table != nil && i < len(entries) {
				entries[i].v = r // scope.set, without looking the name up again
			} else {
				top.scope.set(r)
			}
		}
		return nil
	}
	op.Body = orEmpty(op.Body)
	fr := &frame{op: op, block: op.Body, broken: !ok}
	if !ok {
		b.poisonResults(results)
	}
	b.push(fr, op.Pos)
	if op.Code == ir.OpFusion {
		fr.scope.closed = true
		for _, x := range op.Operands {
			if x != nil && x.Lit == nil {
				fr.scope.set(x)
			}
		}
	}
	return fr
}

func orEmpty(blk *ir.Block) *ir.Block {
	if blk == nil {
		return &ir.Block{}
	}
	return blk
}

func (b *builder) push(fr *frame, pos ir.Pos) {
	parent := b.top()
	fr.broken = fr.broken || parent.broken
	fr.scope = &scope{parent: parent.scope, lenient: fr.broken}
	if len(b.stack) > maxNesting && !parent.broken {
		b.errs.Add(pos, "regions nest more than %d deep", maxNesting)
		fr.broken = true
		fr.scope.lenient = true
	}
	b.stack = append(b.stack, fr)
}

func (b *builder) close(c *closeAST) {
	if b.atTopLevel() {
		b.errs.Add(b.pos(c.Pos), "unexpected }: no region is open")
		return
	}
	if fr := b.top(); b.ends != nil && fr.op != nil {
		b.ends[fr.op] = b.pos(c.Pos)
	}
	b.pop()
}

// pop ends the innermost region: its op joins the enclosing block, unless
// something in it was rejected in a way that leaves the op meaningless.
func (b *builder) pop() {
	fr := b.top()
	b.stack = b.stack[:len(b.stack)-1]
	parent := b.top()
	drop := fr.broken || (fr.tainted && fr.op != nil && fr.op.Code == ir.OpFusion)
	if drop {
		parent.tainted = true
		if fr.op != nil {
			for _, r := range fr.op.Results {
				b.poison(r.Name)
			}
		}
		return
	}
	if fr.tainted {
		parent.tainted = true
	}
	parent.block.Ops = append(parent.block.Ops, fr.op)
	for _, r := range fr.op.Results {
		parent.scope.set(r)
	}
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

// claim records a definition of n; it reports a second definition and
// returns false.
func (b *builder) claim(n *nameTok) bool {
	_, ok := b.claimEntry(n)
	return ok
}

// claimEntry is claim, also returning the name's entry.
func (b *builder) claimEntry(n *nameTok) (*nameEntry, bool) {
	name := n.Text[1:]
	e := b.names.entry(name)
	if e.defined() {
		b.errs.Add(b.pos(n.Pos), "%s is defined twice (first at %s)", n.Text, b.filePos.At(int(e.line), int(e.col)))
		return e, false
	}
	e.define(n.Pos)
	return e, true
}

func (b *builder) poison(name string) { b.poisoned[name] = true }

// poisonResults marks the results of a rejected op, except names that were
// defined before (those still mean the earlier value).
func (b *builder) poisonResults(results []*nameTok) {
	for _, r := range results {
		name := r.Text[1:]
		if first, ok := b.defined(name); ok && first != b.pos(r.Pos) {
			continue
		}
		b.define(name, r.Pos)
		b.poison(name)
	}
}

// resolve finds the value a name refers to here, or reports why it cannot
// and returns nil.
func (b *builder) resolve(n *nameTok) *ir.Value {
	name := n.Text[1:]
	s := b.top().scope
	v, crossedFusion := s.lookup(name)
	if v != nil {
		return v
	}
	if b.poisoned[name] || s.isLenient() {
		return nil
	}
	pos := b.pos(n.Pos)
	if first, ok := b.defined(name); ok {
		if crossedFusion && b.visibleOutsideFusion(name) {
			b.errs.Add(pos, "a fusion body sees only the fusion's operands and its own values: pass %s as an operand of the fusion", n.Text)
		} else {
			b.errs.Add(pos, "%s (defined at %s) is not visible here: a value defined in a region's body is local to it", n.Text, first)
		}
		return nil
	}
	// Whether a later line defines it is settled once every line is read
	// (settleUndefined).
	b.errs.Add(pos, "undefined %s%s", n.Text, didYouMean(name, b.visibleNames(), "%"))
	b.undefined = append(b.undefined, undefinedUse{err: b.errs[len(b.errs)-1], name: name, text: n.Text})
	return nil
}

// visibleOutsideFusion reports whether name resolves in the scopes around
// the innermost fusion body.
func (b *builder) visibleOutsideFusion(name string) bool {
	s := b.top().scope
	for s != nil && !s.closed {
		s = s.parent
	}
	if s == nil {
		return false
	}
	v, _ := s.parent.lookup(name)
	return v != nil
}

func (b *builder) visibleNames() []string {
	var names []string
	for s := b.top().scope; s != nil; s = s.parent {
		s.each(func(n string) { names = append(names, n) })
		if s.closed {
			break
		}
	}
	return names
}

func (b *builder) operand(x *operandAST) *ir.Value {
	if x.Name != nil {
		return b.resolve(&nameTok{Pos: x.Pos, Text: *x.Name})
	}
	lit, ok := b.number(*x.Num, x.Pos)
	if !ok {
		return nil
	}
	l := take(&b.ir.literals)
	*l = lit
	v := take(&b.ir.values)
	*v = ir.Value{Lit: l, Pos: b.pos(x.Pos)}
	return v
}

// number reads a literal: an int64, or a float (with a point or an
// exponent, or inf, -inf, +inf, nan).
func (b *builder) number(text string, p lexer.Position) (ir.Literal, bool) {
	switch text {
	case "inf", "+inf":
		return ir.Literal{IsFloat: true, Float: math.Inf(1)}, true
	case "-inf":
		return ir.Literal{IsFloat: true, Float: math.Inf(-1)}, true
	case "nan":
		return ir.Literal{IsFloat: true, Float: math.NaN()}, true
	}
	if strings.ContainsAny(text, ".eE") {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			b.errs.Add(b.pos(p), "number %s is out of the range of f64", text)
			return ir.Literal{}, false
		}
		return ir.Literal{IsFloat: true, Float: f}, true
	}
	n, ok := b.int(&intTok{Pos: p, Text: text})
	return ir.Literal{Int: n}, ok
}

func (b *builder) int(t *intTok) (int64, bool) {
	n, err := strconv.ParseInt(t.Text, 10, 64)
	if err != nil {
		b.errs.Add(b.pos(t.Pos), "integer %s does not fit in 64 bits", t.Text)
		return 0, false
	}
	return n, true
}

// attr reads key=value. The kind follows the text; a signed integer is a
// relative rank where the op's schema takes a peer.
func (b *builder) attr(a *attrAST, code ir.Opcode) (ir.Attr, bool) {
	var spec ir.AttrSpec
	known := false
	if code != ir.OpInvalid {
		spec, known = code.Info().Attr(a.Key)
	}
	// The schema's strings, where they are the text's, cost no copy.
	key := spec.Key
	if !known {
		key = b.keep(a.Key)
	}
	attr := ir.Attr{Key: key, Pos: b.pos(a.Pos)}
	v := a.Value
	switch {
	case v.List != nil:
		attr.Value.Kind = ir.KindInts
		attr.Value.Ints = b.ir.intSlice(len(v.List.Items))
		for _, it := range v.List.Items {
			n, ok := b.int(it)
			if !ok {
				return attr, false
			}
			attr.Value.Ints = append(attr.Value.Ints, n)
		}
	case v.Word != nil:
		switch w := *v.Word; w {
		case "true", "false":
			attr.Value = ir.AttrValue{Kind: ir.KindBool, Bool: w == "true"}
		case "inf", "nan":
			lit, _ := b.number(w, v.Pos)
			attr.Value = ir.AttrValue{Kind: ir.KindFloat, Float: lit.Float}
		default:
			attr.Value = ir.AttrValue{Kind: ir.KindWord, Word: b.word(w, spec.Words)}
		}
	default:
		lit, ok := b.number(*v.Num, v.Pos)
		if !ok {
			return attr, false
		}
		takesPeer := (known && spec.Kind == ir.KindPeer) || (code == ir.OpInvalid && a.Key == "peer")
		switch {
		case lit.IsFloat:
			attr.Value = ir.AttrValue{Kind: ir.KindFloat, Float: lit.Float}
		case takesPeer && (strings.HasPrefix(*v.Num, "+") || strings.HasPrefix(*v.Num, "-")):
			attr.Value = ir.AttrValue{Kind: ir.KindPeer, Int: lit.Int, Relative: true}
		default:
			attr.Value = ir.AttrValue{Kind: ir.KindInt, Int: lit.Int}
		}
	}
	return attr, true
}

// word is w, as one of the schema's words when it is one (no copy).
func (b *builder) word(w string, words []string) string {
	for _, s := range words {
		if s == w {
			return s
		}
	}
	return b.keep(w)
}

func sortAttrs(attrs []ir.Attr) {
	// Insertion sort: stable, and attribute lists are short.
	for i := 1; i < len(attrs); i++ {
		for j := i; j > 0 && attrs[j].Key < attrs[j-1].Key; j-- {
			attrs[j], attrs[j-1] = attrs[j-1], attrs[j]
		}
	}
}

var typeWords = append(append([]string(nil), ir.DTypeWords...), "stream", "handle")

// typ reads a type: dtype[dims] mem for tensors; a bare dtype, stream or
// handle for the other types the passes annotate.
func (b *builder) typ(t *typeAST) (ir.Type, bool) {
	name := t.Name.Text
	dt, isDType := ir.ParseDType(name)
	if t.Shape == nil {
		switch {
		case isDType:
			return &ir.ScalarType{DType: dt}, true
		case name == "stream":
			return &ir.StreamType{}, true
		case name == "handle":
			return &ir.HandleType{}, true
		}
		b.errs.Add(b.pos(t.Name.Pos), "unknown type %q%s", name, didYouMean(name, typeWords, ""))
		return nil, false
	}
	ok := true
	if !isDType {
		// Report the dtype and go on to check the dims and memory type.
		ok = false
		if name == "stream" || name == "handle" {
			b.errs.Add(b.pos(t.Name.Pos), "%s takes no shape", name)
		} else if s := suggest(name, ir.DTypeWords); s != "" {
			b.errs.Add(b.pos(t.Name.Pos), "unknown dtype %q (did you mean %s?)", name, s)
		} else {
			b.errs.Add(b.pos(t.Name.Pos), "unknown dtype %q (the dtypes are %s)", name, strings.Join(ir.DTypeWords, ", "))
		}
	}
	dims := b.dimBuf[:0]
	elems := uint64(1)
	for _, d := range t.Shape.Dims {
		n, iok := b.int(d.Extent)
		if !iok {
			ok = false
			continue
		}
		if n < 1 {
			b.errs.Add(b.pos(d.Extent.Pos), "an extent must be at least 1, got %d", n)
			ok = false
			continue
		}
		dim := ir.Dim{Extent: n}
		if d.Parallel != nil {
			if d.Parallel.Text != "DIDx" {
				b.errs.Add(b.pos(d.Parallel.Pos), "unknown device dimension %q in %d/%s (the only one is DIDx)", d.Parallel.Text, n, d.Parallel.Text)
				ok = false
			}
			dim.Parallel = ir.DIDx
		}
		// The byte size must fit in an int64, as the passes require of
		// every type (ir.TensorType.SizeError); 8 bytes for an unknown dtype.
		size := uint64(8)
		if isDType {
			size = uint64(dt.Size())
		}
		hi, lo := bits.Mul64(elems, uint64(n))
		if hi != 0 || lo > math.MaxInt64/size {
			b.errs.Add(b.pos(t.Pos), "tensor type %s is too large", typeText(t))
			return nil, false
		}
		elems = lo
		dims = append(dims, dim)
	}
	b.dimBuf = dims
	var mem ir.MemoryType
	if m := t.Shape.Mem; m != nil {
		var mok bool
		if mem, mok = ir.ParseMemoryType(m.Text); !mok {
			b.errs.Add(b.pos(m.Pos), "unknown memory type %q%s", m.Text, memHint(m.Text))
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	return b.tensorType(dt, dims, mem), true
}

// typeKey is a tensor type of rank at most 4 as a map key.
type typeKey struct {
	dt   ir.DType
	mem  ir.MemoryType
	rank int
	dims [4]ir.Dim
}

// tensorType is dt[dims] mem, one value for every equal annotation: a
// program spells a few types many times, and types are never changed in
// place (a pass that changes a type makes a new one).
func (b *builder) tensorType(dt ir.DType, dims []ir.Dim, mem ir.MemoryType) *ir.TensorType {
	var k typeKey
	cached := len(dims) <= len(k.dims)
	if cached {
		k = typeKey{dt: dt, mem: mem, rank: len(dims)}
		copy(k.dims[:], dims)
		if t, ok := b.typeCache[k]; ok {
			return t
		}
	}
	t := take(&b.ir.tensors)
	*t = ir.TensorType{DType: dt, Dims: append(b.ir.dimSlice(len(dims)), dims...), Mem: mem}
	if cached {
		if b.typeCache == nil {
			b.typeCache = map[typeKey]*ir.TensorType{}
		}
		b.typeCache[k] = t
	}
	return t
}

func memHint(word string) string {
	if s := suggest(word, ir.MemWords); s != "" {
		return " (did you mean " + s + "?)"
	}
	return " (the memory types are " + strings.Join(ir.MemWords, ", ") + ")"
}

func typeText(t *typeAST) string {
	parts := make([]string, len(t.Shape.Dims))
	for i, d := range t.Shape.Dims {
		parts[i] = d.Extent.Text
	}
	return t.Name.Text + "[" + strings.Join(parts, ", ") + "]"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
