package sim

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// A stream is a worker goroutine running its queue in order, as a CUDA
// stream does. The host enqueues and returns at once. After the first error
// the stream skips later work (event records and waits still run, so nothing
// waiting on them hangs) until Synchronize reports the error and clears it.

type work struct {
	run func(s *stream) error
	// task runs when run is nil: work that needs no closure (a kernel
	// launch keeps its arguments in a record it reuses).
	task interface{ run(s *stream) error }
	// ev, when set (with run and task nil), is an event record (wait false)
	// or wait (wait true) of generation gen: no closure either.
	ev     *event
	gen    uint64
	wait   bool
	always bool // runs even after an error (event records and waits)
	label  any  // the stream's label when it was enqueued (runtime.Labeler)
	// replay is the graph replay this work belongs to (nil: enqueued
	// eagerly); meetings with peers are keyed by it (graph.go).
	replay *graph
	trip   uint64 // the loop trip of the replay it belongs to (0: none)
}

// do runs w on s's worker.
func (w *work) do(s *stream) error {
	switch {
	case w.run != nil:
		return w.run(s)
	case w.task != nil:
		return w.task.run(s)
	case w.ev != nil && w.wait:
		return w.ev.waitFor(w.gen, s.dev.rt.closed)
	case w.ev != nil:
		w.ev.complete(w.gen)
	}
	return nil
}

type stream struct {
	dev       *Device
	isDefault bool

	mu        sync.Mutex
	queue     []work // from head on: not run yet
	head      int
	wake      chan struct{} // buffered(1): something was enqueued or stop was asked
	submitted uint64
	completed uint64
	changed   chan struct{} // made by a waiter, closed (and dropped) when completed grows
	err       error         // first error since the last Synchronize
	label     any           // carried by work enqueued from now on
	closing   bool
	exited    chan struct{}

	arena compute.Arena // the working arrays of the kernels this stream runs, one at a time (worker only)

	capture *capture // the open capture this stream records into, if any (under mu)
	replay  *graph   // the replay of the work running now (worker only)
	trip    uint64   // and its loop trip (worker only)
	running any      // the label of the work running now (worker only), for stall reports
}

var _ runtime.Stream = (*stream)(nil)

func newStream(d *Device, isDefault bool) *stream {
	s := &stream{dev: d, isDefault: isDefault, wake: make(chan struct{}, 1),
		exited: make(chan struct{})}
	d.mu.Lock()
	d.streams[s] = true
	d.mu.Unlock()
	go s.loop()
	return s
}

func (s *stream) loop() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		for s.head == len(s.queue) {
			if s.closing {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		w := s.queue[s.head]
		s.queue[s.head] = work{}
		if s.head++; s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0 // the next enqueue reuses the array
		}
		skip := s.err != nil && !w.always
		s.mu.Unlock()

		var err error
		if !skip {
			s.replay, s.trip, s.running = w.replay, w.trip, w.label
			err = s.runSafely(&w)
			s.replay, s.trip, s.running = nil, 0, nil
		}
		if err != nil && w.label != nil {
			err = &runtime.WorkError{Label: w.label, Err: err}
		}

		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.completed++
		if s.changed != nil {
			close(s.changed)
			s.changed = nil
		}
		s.mu.Unlock()
	}
}

// runSafely turns a panic in the runtime's own code into the stream's error
// rather than killing the process.
func (s *stream) runSafely(w *work) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rank %d: internal error in the sim runtime: %v", s.dev.rank, r)
		}
	}()
	return w.do(s)
}

func (s *stream) enqueue(w work) error {
	s.mu.Lock()
	w.label = s.label
	s.mu.Unlock()
	return s.enqueueLabeled(w)
}

// enqueueLabeled enqueues w with the label it carries; while the stream
// captures, w is recorded instead (graph.go).
func (s *stream) enqueueLabeled(w work) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("rank %d: stream is closed", s.dev.rank)
	}
	if s.dev.rt.isClosed() {
		return ErrClosed
	}
	if s.capture != nil {
		return s.capture.record(s, w)
	}
	s.queue = append(s.queue, w)
	s.submitted++
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// Label sets the label of work enqueued from now on (runtime.Labeler).
func (s *stream) Label(label any) {
	s.mu.Lock()
	s.label = label
	s.mu.Unlock()
}

var _ runtime.Labeler = (*stream)(nil)

// waitPassed blocks until the stream has run everything enqueued before the
// call.
func (s *stream) waitPassed() error {
	s.mu.Lock()
	target := s.submitted
	for s.completed < target {
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.dev.rt.closed:
			s.mu.Lock()
			// Close drains before it interrupts; a stream still behind now
			// is stuck waiting on something that will not come.
			if s.completed < target {
				s.mu.Unlock()
				return ErrClosed
			}
			s.mu.Unlock()
			return nil
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	return nil
}

// Synchronize waits for the enqueued work and returns (and clears) the
// first error it met.
func (s *stream) Synchronize() error {
	if err := s.notCapturing("Stream.Synchronize"); err != nil {
		return err
	}
	if err := s.waitPassed(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.err
	s.err = nil
	return err
}

// drain is Synchronize for Close: it runs even after the runtime closed.
func (s *stream) drain() error { return s.Synchronize() }

// Record makes e complete once the stream passes this point.
func (s *stream) Record(re runtime.Event) error {
	e, ok := re.(*event)
	if !ok || e == nil {
		return fmt.Errorf("rank %d: record: %T is not a sim event", s.dev.rank, re)
	}
	if c := s.capturing(); c != nil {
		return c.recordEvent(s, e)
	}
	gen, ok := e.recordOnce()
	if !ok {
		return fmt.Errorf("rank %d: record of a closed event", s.dev.rank)
	}
	return s.enqueue(work{always: true, ev: e, gen: gen})
}

// WaitEvent makes later work wait for the event's latest record (as of
// now); an event never recorded is already complete.
func (s *stream) WaitEvent(re runtime.Event) error {
	e, ok := re.(*event)
	if !ok || e == nil {
		return fmt.Errorf("rank %d: wait event: %T is not a sim event", s.dev.rank, re)
	}
	if c := e.capturedIn(); c != nil {
		return c.waitEvent(s, e)
	}
	if c := s.capturing(); c != nil && e.latest() > 0 {
		return c.invalidate(&runtime.CaptureError{Rank: s.dev.rank, Call: "Stream.WaitEvent",
			Why: "the event was recorded outside the capture"})
	}
	gen := e.latest()
	return s.enqueue(work{always: true, ev: e, gen: gen, wait: true})
}

// Close waits for the stream's work, stops its worker and returns the
// pending error. The default stream lives as long as the runtime.
func (s *stream) Close() error {
	if s.isDefault {
		return nil
	}
	err := s.Synchronize()
	s.stop()
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return err
}

func (s *stream) stop() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.exited
}

// event marks points in streams. Each Record makes a new generation; the
// event is complete when the latest recorded generation has been passed.
type event struct {
	mu        sync.Mutex
	recorded  uint64
	completed uint64
	passedAt  time.Time     // when the stream passed the latest completed record (Elapsed)
	changed   chan struct{} // made by a waiter, closed (and dropped) at the next completion
	closed    bool
	rtClosed  <-chan struct{} // the runtime's: waits give up when it closes

	// Recorded by captured work: a mark of the open capture (graph.go),
	// not a point any stream will pass until the graph is launched.
	capture *capture
	mark    int
	// stale: the latest record was captured and its capture has ended. As
	// in CUDA (cuEventSynchronize answers CUDA_ERROR_INVALID_VALUE), the
	// host cannot wait on it until an eager record replaces it: a graph's
	// launch does not re-record the events its capture recorded.
	stale bool
}

var _ runtime.Event = (*event)(nil)

// recordOnce makes a new generation and returns it; false when the event
// is closed.
func (e *event) recordOnce() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, false
	}
	e.recorded++
	e.stale = false
	return e.recorded, true
}

func (e *event) latest() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorded
}

func (e *event) complete(gen uint64) {
	e.mu.Lock()
	if gen > e.completed {
		e.completed = gen
		e.passedAt = time.Now()
	}
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	e.mu.Unlock()
}

func (e *event) waitFor(gen uint64, closed <-chan struct{}) error {
	e.mu.Lock()
	for e.completed < gen {
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-closed:
			return ErrClosed
		}
		e.mu.Lock()
	}
	e.mu.Unlock()
	return nil
}

// Synchronize blocks until the latest record has been passed.
func (e *event) Synchronize() error {
	if c := e.capturedIn(); c != nil {
		return c.invalidate(&runtime.CaptureError{Rank: c.dev.rank, Call: "Event.Synchronize",
			Why: "the event was recorded by captured work, which runs only when the graph is launched"})
	}
	e.mu.Lock()
	stale := e.stale
	e.mu.Unlock()
	if stale {
		return errors.New("event synchronize: the event's latest record was captured into a graph, and a graph's launch does not record it; " +
			"record it again before waiting on it from the host (CUDA: CUDA_ERROR_INVALID_VALUE)")
	}
	return e.waitFor(e.latest(), e.rtClosed)
}

// Query reports whether the latest record has been passed. Querying an
// event recorded by captured work invalidates the capture (as in CUDA) and
// answers false.
func (e *event) Query() bool {
	if c := e.capturedIn(); c != nil {
		c.invalidate(&runtime.CaptureError{Rank: c.dev.rank, Call: "Event.Query",
			Why: "the event was recorded by captured work, which runs only when the graph is launched"})
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A stale event answers as CUDA's query does (an error, which the
	// cuda runtime's Query reports as "not pending").
	return e.stale || e.completed >= e.recorded
}

// capturedIn is the open capture whose work recorded e last, or nil.
func (e *event) capturedIn() *capture {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.capture
}

func (e *event) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}
