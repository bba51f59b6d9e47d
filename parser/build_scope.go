// This file holds what names mean where: scopes, the stack of open
// regions (frames), definitions, and the resolution of uses, with the
// errors for names that are undefined, defined twice or not visible.

package parser

import (
	"fmt"
	"iter"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// scope is what names a region sees.
//
// A name is looked up in O(1), however deep the regions nest (a file of a
// million lines ending in `{`): names are unique program-wide, so the
// values of the regions open are kept by name (nameEntry.inner), and the
// top level's, in the table of names, and what a lookup has to check is
// where the value is defined against the nearest fusion around (which sees
// only its operands and its own values).
//
// A scope is 48 bytes with what every scope shares behind one pointer
// (env): a file can open a region on each of its lines, and each scope
// stays until its region closes.
type scope struct {
	parent *scope
	// boundary is the nearest closed scope, this one or one around it (nil
	// for none).
	boundary *scope
	env      *scopeEnv
	// last is the latest of the values this region defines
	// (innerDef.prev: the one before); the top level's are in the table
	// of names.
	last *innerDef
	// operands: a fusion body's operands (captured), which it sees besides
	// its own values; nil for other scopes.
	operands *operandSet
	depth    int32
	// closed: a fusion body, which sees only its operands and its own
	// values.
	closed bool
	// lenient: inside a region whose header was rejected; names it cannot
	// resolve are not reported again. around: a scope around this one was
	// lenient when this one was made (scopes around the innermost one do
	// not change).
	lenient, around bool
}

// scopeEnv is what every scope of a program shares: the table of names,
// the top level's scope and the slabs scopes and definitions come from.
type scopeEnv struct {
	table    *nameTable
	top      *scope
	defs     []innerDef   // the definitions' slab
	scopes   []scope      // the regions' scopes' slab
	operands []operandSet // the fusion bodies' operands' slab
}

// innerDef is a value a region open (not the top level) defines, in its
// name's entry of the table of names (nameEntry.inner): the innermost
// first, should a name be defined twice. Definitions come from a slab (a
// fusion body's values cost no allocation each).
type innerDef struct {
	v     *ir.Value
	entry *nameEntry // the name's
	next  *innerDef  // a definition of the name in a scope further out
	prev  *innerDef  // the definition before in the same scope
	depth int32      // the defining scope's (one scope per depth is open)
}

// operandSet is a fusion body's operands: a slice while they are few (in
// buf while they fit), a map once there are more than smallScope.
type operandSet struct {
	vals  []*ir.Value
	buf   [4]*ir.Value
	names map[string]*ir.Value
}

const smallScope = 16

// newTopScope is the top level's scope.
func newTopScope(table *nameTable) *scope {
	s := &scope{env: &scopeEnv{table: table}}
	s.env.top = s
	return s
}

// child is a new scope within s.
func (s *scope) child(lenient bool) *scope {
	// Field by field into the slab's zeroed memory (forHeader).
	c := take(&s.env.scopes)
	c.parent, c.boundary, c.env = s, s.boundary, s.env
	c.lenient, c.around, c.depth = lenient, s.isLenient(), s.depth+1
	return c
}

// close makes s a fusion body's.
func (s *scope) close() {
	s.closed = true
	s.boundary = s
	s.operands = take(&s.env.operands)
	s.operands.vals = s.operands.buf[:0]
}

// lookup finds name; crossedFusion reports whether the search stopped at a
// fusion boundary (the name may be visible outside it). It is what looking
// in s, then in each scope around it up to the nearest fusion's, finds.
func (s *scope) lookup(name string) (v *ir.Value, crossedFusion bool) {
	e := s.env.table.lookup(name)
	if s.depth == 0 {
		// no region open sees into this one
		if e == nil {
			return nil, false
		}
		return e.v, false
	}
	b := s.boundary
	var inner *innerDef
	if e != nil {
		inner = e.inner
	}
	for d := inner; d != nil; d = d.next {
		if d.depth > s.depth {
			continue // in a region within s (s is not the innermost)
		}
		if b == nil || d.depth >= b.depth {
			return d.v, false
		}
		break // outside the fusion
	}
	if b != nil {
		// the fusion's operands
		if v := b.operands.get(name); v != nil {
			return v, false
		}
		return nil, true
	}
	if e == nil {
		return nil, false
	}
	return e.v, false // the top level's
}

// set makes v's name mean v in this scope, which defines it.
func (s *scope) set(v *ir.Value) { s.setEntry(v, s.env.table.entry(v.Name)) }

// setEntry is set, given the entry of v's name.
func (s *scope) setEntry(v *ir.Value, e *nameEntry) {
	if s.depth == 0 {
		e.v = v
		return
	}
	d := take(&s.env.defs)
	d.v, d.entry, d.next, d.prev, d.depth = v, e, e.inner, s.last, s.depth
	e.inner = d
	s.last = d
}

// capture makes v, an operand of the fusion whose body s is, visible in s.
func (s *scope) capture(v *ir.Value) { s.operands.add(v) }

// get is the operand named name, nil if none is.
func (o *operandSet) get(name string) *ir.Value {
	if o.names != nil {
		return o.names[name]
	}
	for _, v := range o.vals {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// add makes v the operand of its name.
func (o *operandSet) add(v *ir.Value) {
	if o.names != nil {
		o.names[v.Name] = v
		return
	}
	for i, u := range o.vals {
		if u.Name == v.Name {
			o.vals[i] = v
			return
		}
	}
	if len(o.vals) < smallScope {
		o.vals = append(o.vals, v)
		return
	}
	o.names = make(map[string]*ir.Value, 2*smallScope)
	for _, u := range o.vals {
		o.names[u.Name] = u
	}
	o.names[v.Name] = v
	o.vals = nil
}

// end forgets the values s defines, as its region closes: s is the
// innermost scope, so they come first in their names' entries.
func (s *scope) end() {
	for d := s.last; d != nil; d = d.prev {
		i := d.entry.inner
		for i != nil && i.depth == s.depth {
			i = i.next
		}
		d.entry.inner = i
	}
}

// each calls f with every name this scope defines (not its parents'), and
// a fusion body's operands.
func (s *scope) each(f func(string)) {
	if s.depth == 0 {
		s.env.table.each(func(e *nameEntry) {
			if e.v != nil {
				f(e.name)
			}
		})
		return
	}
	for d := s.last; d != nil; d = d.prev {
		f(d.v.Name)
	}
	if o := s.operands; o != nil {
		for _, v := range o.vals {
			f(v.Name)
		}
		for n := range o.names {
			f(n)
		}
	}
}

func (s *scope) isLenient() bool { return s.lenient || s.around }

// frame is a region being read: the top level, or the body of a for or
// fusion whose `}` has not been seen yet.
type frame struct {
	op      *ir.Op
	block   *ir.Block
	scope   *scope
	broken  bool // the header was rejected: the body is checked, then dropped
	tainted bool // an op of the body was rejected
}

func (b *builder) top() *frame { return b.stack[len(b.stack)-1] }

func (b *builder) atTopLevel() bool { return len(b.stack) == 1 }

func (b *builder) push(fr *frame, pos ir.Pos) {
	parent := b.top()
	fr.broken = fr.broken || parent.broken
	fr.scope = parent.scope.child(fr.broken)
	if len(b.stack) > maxNesting && !parent.broken {
		b.errs.Add(pos, "regions nest more than %d deep", maxNesting)
		fr.broken = true
		fr.scope.lenient = true
	}
	b.stack = push(b.stack, fr)
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
	fr.scope.end()
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

// laterDefinition is where the text first defines name, if it does, once
// every line is read: where the builder first claimed the name (every
// definition on a line that parses is claimed, or poisoned and defined, in
// the order of the text), or where an input inside a region, which defines
// nothing, declares it.
func (b *builder) laterDefinition(name string) (ir.Pos, bool) {
	p, ok := b.defined(name)
	if q, stray := b.strayInputs[name]; stray && (!ok || q.Less(p)) {
		return q, true
	}
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
			u.err.Msg = ir.Errorf(u.err.Pos, "%s is used before its definition at %s", u.text, later).Msg
		}
	}
	b.undefined = nil
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
		b.errorAt(b.pos(n.Pos), func() string {
			return fmt.Sprintf("%s is defined twice (first at %s)", n.Text, b.filePos.At(int(e.line), int(e.col)))
		})
		return e, false
	}
	e.define(n.Pos)
	return e, true
}

// poison marks name as one whose definition was rejected, so that its
// uses are not reported: in its entry in the table of names, or for a
// name the table does not hold, in b.poisoned.
func (b *builder) poison(name string) {
	if e := b.names.lookup(name); e != nil {
		e.poisoned = true
		return
	}
	b.poisoned[name] = true
}

// isPoisoned reports whether name was poisoned.
func (b *builder) isPoisoned(name string) bool {
	if e := b.names.lookup(name); e != nil && e.poisoned {
		return true
	}
	return len(b.poisoned) > 0 && b.poisoned[name]
}

// poisonResults marks the results of a rejected op, except names that were
// defined before (those still mean the earlier value).
func (b *builder) poisonResults(o *opAST) {
	if o == nil {
		return
	}
	for k := range o.resultCount() {
		r := o.result(k)
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
	if b.isPoisoned(name) || s.isLenient() {
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
	if !b.errs.Keeps(pos) {
		b.errs.Add(pos, "") // counted only: no suggestion to look for
		return nil
	}
	// Whether a later line defines it is settled once every line is read
	// (settleUndefined).
	e := ir.Errorf(pos, "undefined %s%s", n.Text, didYouMeanAmong(name, b.visibleNames(), "%"))
	b.errs.Append(e)
	b.undefined = append(b.undefined, undefinedUse{err: e, name: name, text: n.Text})
	return nil
}

// visibleOutsideFusion reports whether name resolves in the scopes around
// the innermost fusion body.
func (b *builder) visibleOutsideFusion(name string) bool {
	s := b.top().scope.boundary
	if s == nil {
		return false
	}
	v, _ := s.parent.lookup(name)
	return v != nil
}

// visibleNames is every name visible here.
func (b *builder) visibleNames() iter.Seq[string] {
	return func(yield func(string) bool) {
		more := true
		for s := b.top().scope; s != nil && more; s = s.parent {
			s.each(func(n string) { more = more && yield(n) })
			if s.closed {
				break
			}
		}
	}
}
