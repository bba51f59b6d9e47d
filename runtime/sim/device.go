package sim

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hirlab/hir/runtime"
)

// Device is one rank of the job.
type Device struct {
	rt   *Runtime
	rank int
	def  *stream

	mu               sync.Mutex
	streams          map[*stream]bool
	symAllocSeq      int64 // symmetric allocs so far: matches the k-th across ranks
	collSeq          int64 // collectives enqueued so far
	barrierSeq       int64
	streamBarrierSeq int64 // StreamBarrier's meetings, counted apart from Barrier's
	// sends enqueued so far, by destination, and recvs by source: maps,
	// not slices of the world size, so a rank holds only the peers it
	// talks to (slices made the runtime's memory quadratic in the mesh)
	sendSeq map[int]int64
	recvSeq map[int]int64

	exchangeSeq atomic.Int64 // Exchange calls so far: the k-th meets every rank's k-th

	capture  *capture // the open graph capture, if any (graph.go)
	captures int64    // captures begun so far: the k-th graph of every rank matches the others' k-th
}

var _ runtime.Device = (*Device)(nil)

func (d *Device) Rank() int      { return d.rank }
func (d *Device) WorldSize() int { return d.rt.size }

// DefaultStream is the stream ops run on unless the program says else. It
// is an ordinary stream: it does not synchronise with the others.
func (d *Device) DefaultStream() runtime.Stream { return d.def }

// NewStream starts a new stream (a worker goroutine).
func (d *Device) NewStream() (runtime.Stream, error) {
	if d.rt.isClosed() {
		return nil, ErrClosed
	}
	return newStream(d, false), nil
}

// NewEvent makes an event that has never been recorded (so it is complete).
func (d *Device) NewEvent() (runtime.Event, error) {
	return &event{rtClosed: d.rt.closed}, nil
}

func (d *Device) allStreams() []*stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []*stream{d.def}
	for s := range d.streams {
		if s != d.def {
			out = append(out, s)
		}
	}
	return out
}

// syncAll waits for every stream of the device to pass the work enqueued so
// far (without clearing their errors).
func (d *Device) syncAll() error {
	var errs []error
	for _, s := range d.allStreams() {
		if err := s.waitPassed(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stream converts the interface value, defaulting nil to the default stream.
func (d *Device) stream(rs runtime.Stream) (*stream, error) {
	if rs == nil {
		return d.def, nil
	}
	s, ok := rs.(*stream)
	if !ok || s == nil {
		return nil, errorf(d.rank, "%T is not a sim stream", rs)
	}
	if s.dev != d {
		return nil, errorf(d.rank, "stream belongs to rank %d", s.dev.rank)
	}
	return s, nil
}
