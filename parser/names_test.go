package parser

import (
	"strconv"
	"testing"
)

// TestNameTableGrows fills a table made for no names: every name is found
// again, by the entry it was given, and each lists them in order.
func TestNameTableGrows(t *testing.T) {
	table := newNameTable(0)
	const n = 5000
	entries := make([]*nameEntry, n)
	for i := range n {
		entries[i] = table.entry("v" + strconv.Itoa(i))
		entries[i].line = int32(i)
	}
	for i := range n {
		name := "v" + strconv.Itoa(i)
		if e := table.lookup(name); e != entries[i] || e.name != name || e.line != int32(i) {
			t.Fatalf("lookup(%q) = %+v, want the entry made for it", name, e)
		}
		if e := table.entry(name); e != entries[i] {
			t.Fatalf("entry(%q) made a second entry", name)
		}
	}
	if e := table.lookup("v" + strconv.Itoa(n)); e != nil {
		t.Fatalf("lookup of a name never entered = %+v", e)
	}
	i := 0
	table.each(func(e *nameEntry) {
		if e != entries[i] {
			t.Fatalf("each: entry %d is %q, want %q", i, e.name, entries[i].name)
		}
		i++
	})
	if i != n {
		t.Fatalf("each visited %d entries, want %d", i, n)
	}
}
