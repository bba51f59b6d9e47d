// This file holds what names mean where: scopes, the stack of open
// regions (frames), definitions, and the resolution of uses, with the
// errors for names that are undefined, defined twice or not visible.

package parser

import (
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

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

func (b *builder) top() *frame { return b.stack[len(b.stack)-1] }

func (b *builder) atTopLevel() bool { return len(b.stack) == 1 }

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
