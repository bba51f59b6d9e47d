package parser

import (
	"runtime/debug"
	"testing"
)

// TestLessGC: a large parse raises GOGC and restores it, parses at the
// same time share the raise, and a GOGC off or already higher is left
// alone, as is one changed during the parse.
func TestLessGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	large := gcMinSource
	lessGC(large - 1)()
	if got := gcPercentNow(); got != 100 {
		t.Fatalf("a small source: GOGC %d, want 100", got)
	}
	restore := lessGC(large)
	if got := gcPercentNow(); got != gcPercent {
		t.Fatalf("during a large parse: GOGC %d, want %d", got, gcPercent)
	}
	other := lessGC(large)
	restore()
	if got := gcPercentNow(); got != gcPercent {
		t.Fatalf("while another parse goes on: GOGC %d, want %d", got, gcPercent)
	}
	other()
	if got := gcPercentNow(); got != 100 {
		t.Fatalf("after: GOGC %d, want 100", got)
	}
	for _, set := range []int{-1, 2 * gcPercent} {
		debug.SetGCPercent(set)
		restore := lessGC(large)
		if got := gcPercentNow(); got != set {
			t.Errorf("GOGC %d: %d during a large parse", set, got)
		}
		restore()
		if got := gcPercentNow(); got != set {
			t.Errorf("GOGC %d: %d after a large parse", set, got)
		}
	}
	debug.SetGCPercent(100)
	restore = lessGC(large)
	debug.SetGCPercent(50)
	restore()
	if got := gcPercentNow(); got != 50 {
		t.Errorf("GOGC set to 50 during a parse: %d after it", got)
	}
}
