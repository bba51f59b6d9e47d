package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// stream is a CUstream created non-blocking, so it never serialises with
// the legacy default stream.
type stream struct {
	dev    *gpuDevice
	h      uintptr
	def    bool
	mu     sync.Mutex
	closed bool
}

var _ runtime.Stream = (*stream)(nil)

func (d *gpuDevice) newStream(def bool) (*stream, error) {
	s := &stream{dev: d, def: def}
	if err := d.withCtx(func() error {
		return d.drv.StreamCreate.Call2(uintptr(unsafe.Pointer(&s.h)), streamNonBlocking)
	}); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.opts.Rank, err)
	}
	d.mu.Lock()
	d.streams[s] = true
	d.mu.Unlock()
	return s, nil
}

// DefaultStream is the stream ops run on unless the program says else.
func (d *gpuDevice) DefaultStream() runtime.Stream { return d.def }

// NewStream creates a stream.
func (d *gpuDevice) NewStream() (runtime.Stream, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.newStream(false)
}

func (d *gpuDevice) stream(rs runtime.Stream) (*stream, error) {
	if rs == nil {
		return d.def, nil
	}
	s, ok := rs.(*stream)
	if !ok || s.dev != d {
		return nil, fmt.Errorf("cuda: rank %d: stream %T does not belong to this device", d.opts.Rank, rs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("cuda: rank %d: stream is closed", d.opts.Rank)
	}
	return s, nil
}

// Synchronize waits for the stream; a collective that timed out on this
// device (its kernel gave up waiting for a peer) is reported here.
func (s *stream) Synchronize() error {
	if err := s.dev.refuseInCapture("Stream.Synchronize", whyWaits); err != nil {
		return err
	}
	return s.dev.upper.commCheck(s.dev.withCtx(func() error { return s.dev.drv.StreamSynchronize.Call1(s.h) }))
}

func (s *stream) Record(re runtime.Event) error {
	e, err := s.dev.event(re)
	if err != nil {
		return err
	}
	return s.dev.withCtx(func() error { return s.dev.drv.EventRecord.Call2(e.h, s.h) })
}

func (s *stream) WaitEvent(re runtime.Event) error {
	e, err := s.dev.event(re)
	if err != nil {
		return err
	}
	return s.dev.withCtx(func() error { return s.dev.drv.StreamWaitEvent.Call3(s.h, e.h, 0) })
}

// Close releases the stream once its work has run; the default stream
// lives as long as the runtime.
func (s *stream) Close() error {
	if s.def {
		return nil
	}
	err := s.destroy()
	// After destroy (which waits for the stream's work), not inside it:
	// the comm teardown destroys its own side streams holding comm.mu.
	s.dev.upper.streamClosed(s)
	return err
}

func (s *stream) destroy() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return s.dev.withCtx(func() error {
		if err := s.dev.drv.StreamSynchronize.Call1(s.h); err != nil {
			return err
		}
		return s.dev.drv.StreamDestroy.Call1(s.h)
	})
}

// event is a CUevent with timing enabled (benchmarks read it).
type event struct {
	dev    *gpuDevice
	h      uintptr
	mu     sync.Mutex
	closed bool
}

var _ runtime.Event = (*event)(nil)

// NewEvent creates an event.
func (d *gpuDevice) NewEvent() (runtime.Event, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	e := &event{dev: d}
	if err := d.withCtx(func() error {
		return d.drv.EventCreate.Call2(uintptr(unsafe.Pointer(&e.h)), eventDefault)
	}); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.opts.Rank, err)
	}
	d.mu.Lock()
	d.events[e] = true
	d.mu.Unlock()
	return e, nil
}

func (d *gpuDevice) event(re runtime.Event) (*event, error) {
	e, ok := re.(*event)
	if !ok || e == nil || e.dev != d {
		return nil, fmt.Errorf("cuda: rank %d: event %T does not belong to this device", d.opts.Rank, re)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("cuda: rank %d: event is closed", d.opts.Rank)
	}
	return e, nil
}

func (e *event) Synchronize() error {
	if err := e.dev.refuseInCapture("Event.Synchronize", whyWaits); err != nil {
		return err
	}
	return e.dev.upper.commCheck(e.dev.withCtx(func() error { return e.dev.drv.EventSynchronize.Call1(e.h) }))
}

// Query reports whether the event's point has passed; an error (other
// than "not ready") counts as passed, so pollers stop and the next
// Synchronize reports it.
func (e *event) Query() bool {
	err := e.dev.withCtx(func() error { return e.dev.drv.EventQuery.Call1(e.h) })
	return err == nil || !IsResult(err, errNotReady)
}

func (e *event) Close() error { return e.destroy() }

func (e *event) destroy() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.dev.mu.Lock()
	delete(e.dev.events, e)
	e.dev.mu.Unlock()
	return e.dev.withCtx(func() error { return e.dev.drv.EventDestroy.Call1(e.h) })
}

// ElapsedMillis is the time between two recorded events, in milliseconds.
func ElapsedMillis(start, end runtime.Event) (float32, error) {
	a, ok1 := start.(*event)
	b, ok2 := end.(*event)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("cuda: ElapsedMillis of events of another backend")
	}
	var ms float32
	err := a.dev.withCtx(func() error {
		return a.dev.drv.EventElapsedTime.Call3(uintptr(unsafe.Pointer(&ms)), a.h, b.h)
	})
	return ms, err
}
