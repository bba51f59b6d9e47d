package gpu

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// stream is a CUstream created non-blocking, so it never serialises with
// the legacy default stream.
type Stream struct {
	dev    *Device
	H      uintptr
	def    bool
	mu     sync.Mutex
	closed bool
}

var _ runtime.Stream = (*Stream)(nil)

func (d *Device) OpenStream(def bool) (*Stream, error) {
	s := &Stream{dev: d, def: def}
	if err := d.WithCtx(func() error {
		return d.Drv.StreamCreate.Call2(uintptr(unsafe.Pointer(&s.H)), streamNonBlocking)
	}); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.Opts.Rank, err)
	}
	d.Mu.Lock()
	d.streams[s] = true
	d.Mu.Unlock()
	return s, nil
}

// DefaultStream is the stream ops run on unless the program says else.
func (d *Device) DefaultStream() runtime.Stream { return d.Def }

// NewStream creates a stream.
func (d *Device) NewStream() (runtime.Stream, error) {
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	return d.OpenStream(false)
}

func (d *Device) Stream(rs runtime.Stream) (*Stream, error) {
	if rs == nil {
		return d.Def, nil
	}
	s, ok := rs.(*Stream)
	if !ok || s.dev != d {
		return nil, fmt.Errorf("cuda: rank %d: stream %T does not belong to this device", d.Opts.Rank, rs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("cuda: rank %d: stream is closed", d.Opts.Rank)
	}
	return s, nil
}

// Synchronize waits for the stream; a collective that timed out on this
// device (its kernel gave up waiting for a peer) is reported here.
func (s *Stream) Synchronize() error {
	if err := s.dev.RefuseInCapture("Stream.Synchronize", whyWaits); err != nil {
		return err
	}
	return s.dev.Upper.CommCheck(s.dev.WithCtx(func() error { return s.dev.Drv.StreamSynchronize.Call1(s.H) }))
}

func (s *Stream) Record(re runtime.Event) error {
	e, err := s.dev.event(re)
	if err != nil {
		return err
	}
	return s.dev.WithCtx(func() error { return s.dev.Drv.EventRecord.Call2(e.H, s.H) })
}

func (s *Stream) WaitEvent(re runtime.Event) error {
	e, err := s.dev.event(re)
	if err != nil {
		return err
	}
	return s.dev.WithCtx(func() error { return s.dev.Drv.StreamWaitEvent.Call3(s.H, e.H, 0) })
}

// Close releases the stream once its work has run; the default stream
// lives as long as the runtime.
func (s *Stream) Close() error {
	if s.def {
		return nil
	}
	err := s.Destroy()
	// After destroy (which waits for the stream's work), not inside it:
	// the comm teardown destroys its own side streams holding comm.mu.
	return errors.Join(err, s.dev.Upper.StreamClosed(s))
}

func (s *Stream) Destroy() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.dev.Mu.Lock()
	delete(s.dev.streams, s)
	s.dev.Mu.Unlock()
	return s.dev.WithCtx(func() error {
		if err := s.dev.Drv.StreamSynchronize.Call1(s.H); err != nil {
			return err
		}
		return s.dev.Drv.StreamDestroy.Call1(s.H)
	})
}

// event is a CUevent with timing enabled (benchmarks read it).
type Event struct {
	Dev *Device
	H   uintptr
	// Sleepy: Synchronize sleeps between polls instead of spinning in
	// cuEventSynchronize (a host-wait event: runtime.OneSided's
	// NewHostWaitEvent). Not CU_EVENT_BLOCKING_SYNC: recording such an
	// event costs the GPU about 3.4 µs (an H200), more than a small
	// one-sided transfer itself (2.2-2.9 µs bare, 5.5-8 with it).
	Sleepy bool
	mu     sync.Mutex
	closed bool
}

var _ runtime.Event = (*Event)(nil)

// NewEvent creates an event.
func (d *Device) NewEvent() (runtime.Event, error) {
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	return d.newEvent(eventDefault)
}

// NewOrderEvent creates an event that only orders work (no timing: a
// record costs less), for the runtime's own fork, join and order points.
func (d *Device) NewOrderEvent() (*Event, error) { return d.newEvent(EventDisableTiming) }

func (d *Device) newEvent(flags uintptr) (*Event, error) {
	e := &Event{Dev: d}
	if err := d.WithCtx(func() error {
		return d.Drv.EventCreate.Call2(uintptr(unsafe.Pointer(&e.H)), flags)
	}); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.Opts.Rank, err)
	}
	d.Mu.Lock()
	d.Events[e] = true
	d.Mu.Unlock()
	return e, nil
}

func (d *Device) event(re runtime.Event) (*Event, error) {
	e, ok := re.(*Event)
	if !ok || e == nil || e.Dev != d {
		return nil, fmt.Errorf("cuda: rank %d: event %T does not belong to this device", d.Opts.Rank, re)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("cuda: rank %d: event is closed", d.Opts.Rank)
	}
	return e, nil
}

func (e *Event) Synchronize() error {
	if err := e.Dev.RefuseInCapture("Event.Synchronize", whyWaits); err != nil {
		return err
	}
	if e.Sleepy {
		// Sleeps growing from 5 µs to 1 ms: a wait that lasts costs no
		// CPU, a short one is woken late by at most its last sleep.
		for d := 5 * time.Microsecond; !e.Query(); d = min(2*d, time.Millisecond) {
			time.Sleep(d)
		}
	}
	return e.Dev.Upper.CommCheck(e.Dev.WithCtx(func() error { return e.Dev.Drv.EventSynchronize.Call1(e.H) }))
}

// Query reports whether the event's point has passed; an error (other
// than "not ready") counts as passed, so pollers stop and the next
// Synchronize reports it.
func (e *Event) Query() bool {
	err := e.Dev.WithCtx(func() error { return e.Dev.Drv.EventQuery.Call1(e.H) })
	return err == nil || !IsResult(err, errNotReady)
}

func (e *Event) Close() error { return e.Destroy() }

func (e *Event) Destroy() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.Dev.Mu.Lock()
	delete(e.Dev.Events, e)
	e.Dev.Mu.Unlock()
	return e.Dev.WithCtx(func() error { return e.Dev.Drv.EventDestroy.Call1(e.H) })
}

// ElapsedMillis is the time between two recorded events, in milliseconds.
func ElapsedMillis(start, end runtime.Event) (float32, error) {
	a, ok1 := start.(*Event)
	b, ok2 := end.(*Event)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("cuda: ElapsedMillis of events of another backend")
	}
	var ms float32
	err := a.Dev.WithCtx(func() error {
		return a.Dev.Drv.EventElapsedTime.Call3(uintptr(unsafe.Pointer(&ms)), a.H, b.H)
	})
	return ms, err
}
