package parser

import (
	"bytes"
	"fmt"
	"testing"
)

// TestLargeProgramInParallel holds Parse, which reads a program this large
// on every core, to reading it on one goroutine: a valid program, and one
// with errors of every kind the builder words spread through it.
func TestLargeProgramInParallel(t *testing.T) {
	src := generateProgram(15_000)
	if len(src) < parallelMin {
		t.Fatalf("the program is %d bytes, read on one goroutine", len(src))
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	bad := []string{
		"%v1 = relu %x\n",                           // defined twice
		"%early = relu %later\n",                    // used before its definition
		"%q = relu %nowhere\n",                      // undefined
		"%r = relux %x peer=+1\n",                   // unknown op
		"%s = relu %x : f33[8]\n",                   // unknown dtype
		"%t = relu %x, 99999999999999999999\n",      // integer too large
		"%u = relu %x ^\n",                          // bad character
		"}\n",                                       // no region open
		"%later = relu %x\n",                        // (the definition)
		"%open = fusion %x : f32[64/DIDx, 128] {\n", // never closed
	}
	var broken []byte
	for i, l := range lines {
		broken = append(broken, l...)
		if k := i / 1500; i%1500 == 1000 && k < len(bad) {
			broken = append(broken, bad[k]...)
		}
	}
	if n := len(lines) / 1500; n < len(bad) {
		t.Fatalf("the program has room for %d of the %d errors", n, len(bad))
	}
	// A name defined twice alone: Verify does not look for it again when
	// the builder reports nothing (builder.verify).
	twice := append(bytes.Join(lines[:1000], nil), bad[0]...)
	twice = append(twice, bytes.Join(lines[1000:], nil)...)
	for _, src := range [][]byte{src, broken, twice} {
		prog, err := Parse("f.hir", src)
		b := newBuilder("f.hir")
		b.chunkBytes = -1
		seq, serr := b.parse(src, true)
		if fmt.Sprint(err) != fmt.Sprint(serr) {
			t.Fatalf("errors differ:\nparallel: %v\none goroutine: %v", err, serr)
		}
		if err == nil && positions(prog) != positions(seq) {
			t.Fatal("programs differ")
		}
	}
}
