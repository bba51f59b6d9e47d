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
