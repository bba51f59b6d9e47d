package runtime

import "fmt"

// Capturer is implemented by devices that can record the work a rank
// enqueues into a graph and replay it with one launch (graph mode,
// docs/GRAPHS.md), as CUDA's stream capture does:
//
//   - BeginCapture(s) puts s in capture mode: work enqueued on s is
//     recorded, not run.
//   - A stream that waits on an event recorded by captured work joins the
//     capture (a fork); it must be joined back into s (s waits on an event
//     recorded on it after its last captured work) before EndCapture.
//   - While a capture is open, nothing may wait on the host for captured
//     work (Stream.Synchronize, Event.Synchronize or Query of a captured
//     event), nor allocate or free, nor block on peers (Barrier): those
//     fail with a *CaptureError and the capture is invalidated.
//   - Captured work keeps the addresses and arguments it was enqueued with:
//     a replay reads and writes the same buffers. Synchronisation between
//     ranks (collectives, send/recv) advances with each replay on the
//     device, never from a counter fixed at capture.
type Capturer interface {
	BeginCapture(s Stream) error
	// EndCapture closes the capture begun on s and returns its graph. On
	// an error (an unjoined fork, work that could not be captured) no
	// graph is made and the streams leave capture mode.
	EndCapture(s Stream) (Graph, error)
	// IsCapturing reports whether s records into an open capture (the
	// origin or a fork).
	IsCapturing(s Stream) (bool, error)
}

// LoopCapturer is a Capturer that can capture a loop's body once and have
// the graph repeat it on the device (CUDA: a WHILE conditional node whose
// condition a kernel at the end of the body sets), so a long loop is not
// unrolled into the graph.
//
//   - BeginLoop(s, trips), on a stream that captures, starts a body: the
//     work enqueued on s until EndLoop(s) runs trips times, in order, where
//     BeginLoop stands in the graph; the work after EndLoop runs after the
//     last trip. Bodies do not nest: BeginLoop inside a body fails (on
//     CUDA a nested node's condition is assigned its default only when the
//     top graph launches, so it would stay closed from its enclosing
//     loop's second trip on).
//   - A body is one stream's work: no other stream may join it or wait on
//     an event recorded in it, and it may record no event that work
//     outside it waits on (the graph fails with a *CaptureError).
//   - Each trip synchronises between ranks afresh, as each replay does.
//   - LoopSupport says, before any capture, why BeginLoop cannot work on
//     this device (on CUDA: a driver older than 12.4), nil when it can.
type LoopCapturer interface {
	Capturer
	BeginLoop(s Stream, trips int64) error
	EndLoop(s Stream) error
	LoopSupport() error
}

// Graph is a captured sequence of work, replayed as a whole.
type Graph interface {
	// Launch enqueues one replay on s; the replay's work is ordered after
	// what s ran before, and s's later work after all of the replay,
	// including the work of the streams it forked to.
	Launch(s Stream) error
	// Nodes is the number of operations the graph holds (kernels, copies,
	// collectives, event edges), for statistics.
	Nodes() int
	// Close releases the graph once no replay of it is still running.
	Close() error
}

// CaptureError says why a call is not allowed while a stream captures.
type CaptureError struct {
	Rank int
	Call string // what was called: "Stream.Synchronize", "Alloc", ...
	Why  string
}

func (e *CaptureError) Error() string {
	return fmt.Sprintf("rank %d: %s during a graph capture: %s", e.Rank, e.Call, e.Why)
}
