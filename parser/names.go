package parser

import (
	"hash/maphash"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// nameTable is the program's one table of names: where each name was first
// defined (names are unique program-wide) and what it means at the top
// level.
//
// It is an open-addressing hash table of 8-byte slots rather than a Go
// map: each definition looks its name up first (to report a second one),
// and a new name lands on a random slot, so the table's size is what that
// costs in cache misses. For 100,000 names the slots take 2 MB, a map
// about 6.5 MB (BenchmarkParseAndCheck: 196 ms with this table, 222 ms
// with a map, medians of 8 interleaved runs).
type nameTable struct {
	seed    maphash.Seed
	slots   []nameSlot    // a power of two long, at most half full
	entries [][]nameEntry // in chunks that never move: entries are handed out by pointer
	n       int           // entries made
}

// nameSlot points to an entry; idx 0 marks an empty slot.
type nameSlot struct {
	tag uint32 // the high half of the name's hash: most other names differ in it
	idx int32  // the entry's number + 1
}

// nameEntry is 48 bytes: one is made for every name of the program.
type nameEntry struct {
	name      string
	v         *ir.Value // the value at the top level, nil if none
	inner     *innerDef // its values in the regions open, the innermost first (scope.set)
	line, col int32     // the definition's position; line 0 until defined
	poisoned  bool      // its definition was rejected: uses are not reported (builder.poison)
}

// defined reports whether the name is claimed (or poisoned) somewhere in
// the program.
func (e *nameEntry) defined() bool { return e.line > 0 }

// define records the definition at line:col (line >= 1).
func (e *nameEntry) define(p lexer.Position) {
	e.line, e.col = int32(max(p.Line, 1)), int32(p.Column)
}

const entryChunk = 1024

func newNameTable(names int) nameTable {
	t := nameTable{seed: maphash.MakeSeed()}
	t.resize(names)
	return t
}

// resize makes room for n names, keeping the table at most half full.
func (t *nameTable) resize(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	t.slots = make([]nameSlot, size)
	for i := range int32(t.n) {
		name := t.at(i).name
		h := t.hash(name)
		slot, _ := t.find(name, h)
		t.slots[slot] = nameSlot{tag: uint32(h >> 32), idx: i + 1}
	}
}

// reserve makes room for n more names at once (a line that names
// millions), rather than doubling the table again and again.
func (t *nameTable) reserve(n int) {
	if 2*(t.n+n) > len(t.slots) {
		t.resize(t.n + n)
	}
}

func (t *nameTable) at(i int32) *nameEntry { return &t.entries[i/entryChunk][i%entryChunk] }

func (t *nameTable) hash(name string) uint64 { return maphash.String(t.seed, name) }

// find returns the slot of name (whose hash is h): the one holding its
// entry, or the empty one where it goes.
func (t *nameTable) find(name string, h uint64) (int, *nameEntry) {
	tag, mask := uint32(h>>32), len(t.slots)-1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.idx == 0 {
			return i, nil
		}
		if s.tag == tag {
			if e := t.at(s.idx - 1); e.name == name {
				return i, e
			}
		}
	}
}

// touch has the slot where the look-up of name starts brought into the
// caches (prefetch: the processor does not wait for it), a little before
// that look-up, so that its cache miss overlaps the work before it rather
// than stalling it: in a large program or a long list of results, each new
// name lands on a slot of its own. It changes nothing. (A plain load of
// the slot, tried in its place, gained nothing: it stalls as the look-up
// does.)
func (t *nameTable) touch(name string) {
	if len(t.slots) > 0 {
		prefetch(&t.slots[int(t.hash(name))&(len(t.slots)-1)])
	}
}

// lookup is name's entry, nil if it has none.
func (t *nameTable) lookup(name string) *nameEntry {
	_, e := t.find(name, t.hash(name))
	return e
}

// entry is name's entry, made if there is none.
func (t *nameTable) entry(name string) *nameEntry {
	h := t.hash(name)
	slot, e := t.find(name, h)
	if e != nil {
		return e
	}
	if 2*(t.n+1) > len(t.slots) {
		t.resize(2 * (t.n + 1))
		slot, _ = t.find(name, h)
	}
	if t.n%entryChunk == 0 {
		t.entries = append(t.entries, make([]nameEntry, entryChunk))
	}
	e = t.at(int32(t.n))
	e.name = name
	t.n++
	t.slots[slot] = nameSlot{tag: uint32(h >> 32), idx: int32(t.n)}
	return e
}

// each calls f with every entry, in the order they were made.
func (t *nameTable) each(f func(*nameEntry)) {
	for i := range int32(t.n) {
		f(t.at(i))
	}
}
