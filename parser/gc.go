package parser

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A large source is parsed with fewer garbage collections.
//
// What a parse allocates stays live until it returns (the program it
// builds, the table of names, the regions open), so a collection during
// the parse frees little and scans all of it, and while it marks, every
// pointer the builder stores goes through the write barrier. Under the
// default GOGC of 100, the program of a 4 MB source, 50 to 150 MB, is
// collected 5 or 6 times as it grows. So, as cmd/compile raises its
// starting heap, Parse raises GOGC to gcPercent for a source of
// gcMinSource bytes or more, and restores it when it returns. On 2 cores
// (BenchmarkRejectHostile, 4 MiB, check), a valid program is read and
// checked 1.4 times as fast, deep nesting 1.2 to 1.4 times; `hirrun check`
// of a 55 MB program takes 2.7 s rather than 3.2-3.5, its peak RSS 590 MB
// rather than 607. The heap grows little past the program, which is
// live anyway: collections still come, at 5 times the heap live at the
// last one, and a memory limit (GOMEMLIMIT) still holds.
//
// Parses at the same time share one raise: the first saves the setting,
// the last restores it, unless something else changed it meanwhile. A
// GOGC already as high, or off, is left alone.
const (
	gcPercent   = 400
	gcMinSource = 1 << 20
)

var gcRaise struct {
	sync.Mutex
	parses int // the parses under the raise
	saved  int // GOGC before it
}

// lessGC raises GOGC for the parse of a source of size bytes; the
// function it returns restores it.
func lessGC(size int) (restore func()) {
	if size < gcMinSource {
		return func() {}
	}
	gcRaise.Lock()
	defer gcRaise.Unlock()
	if gcRaise.parses == 0 {
		if current := gcPercentNow(); current < 0 || current >= gcPercent {
			return func() {}
		}
		gcRaise.saved = debug.SetGCPercent(gcPercent)
	}
	gcRaise.parses++
	return func() {
		gcRaise.Lock()
		defer gcRaise.Unlock()
		if gcRaise.parses--; gcRaise.parses == 0 && gcPercentNow() == gcPercent {
			debug.SetGCPercent(gcRaise.saved)
		}
	}
}

// gcPercentNow is GOGC (negative: off), read without setting it.
func gcPercentNow() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1 // unknown: taken as off, and left alone
	}
	return int(int64(s[0].Value.Uint64()))
}
