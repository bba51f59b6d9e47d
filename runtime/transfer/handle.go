package transfer

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hirlab/hir/runtime"
)

// State is where a handle's last post stands.
type State int

const (
	// NotPosted: the handle was never posted.
	NotPosted State = iota
	// InFlight: the last post has not completed.
	InFlight
	// Done: the last post completed.
	Done
	// Failed: the last post completed with an error (Status returns it).
	Failed
)

func (s State) String() string {
	switch s {
	case NotPosted:
		return "not posted"
	case InFlight:
		return "in flight"
	case Done:
		return "done"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Handle is a prepared transfer: checked once by Prepare, posted any
// number of times. A completion event, recorded after the copies on the
// stream of each post, is what Status queries and both waits wait on.
type Handle struct {
	reg    *Registration
	op     Op
	peer   int
	copies []runtime.PeerCopy
	ev     runtime.Event

	mu        sync.Mutex
	gen       uint64 // posts so far
	waitedGen uint64 // the post the host last waited for
	stream    runtime.Stream
	postErr   error // a failure while posting the last post
	err       error // what the last host wait returned
	released  bool
}

// Op is the handle's direction, Peer its remote rank.
func (h *Handle) Op() Op    { return h.op }
func (h *Handle) Peer() int { return h.peer }

func (h *Handle) errorf(format string, args ...any) error {
	return h.reg.a.errorf("%s from rank %d: %s", h.op, h.peer, fmt.Sprintf(format, args...))
}

func (h *Handle) wrap(err error) error {
	return h.reg.a.errorf("%s from rank %d: %w", h.op, h.peer, err)
}

// Post enqueues the transfer on s (nil: the device's default stream), after
// the work already there, and returns at once. Posting again is allowed
// once the last post completed, or at any time on the stream of the last
// post (stream order completes that one first); posting on another stream
// while the last post is in flight fails with ErrInFlight.
func (h *Handle) Post(s runtime.Stream) error {
	if s == nil {
		s = h.reg.a.dev.DefaultStream()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.reg.isDead() {
		return h.wrap(ErrDeregistered)
	}
	if h.gen > h.waitedGen && s != h.stream && !h.ev.Query() {
		return h.wrap(ErrInFlight)
	}
	var postErr error
	for _, c := range h.copies {
		if postErr = c.Post(s); postErr != nil {
			break
		}
	}
	// Record even after a failed post, so waits on this post return.
	recErr := s.Record(h.ev)
	h.gen++
	h.stream, h.err = s, nil
	h.postErr = errors.Join(postErr, recErr)
	if h.postErr != nil {
		return h.errorf("post: %v", h.postErr)
	}
	return nil
}

// Status says where the last post stands, without blocking.
func (h *Handle) Status() (State, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.gen == 0:
		return NotPosted, nil
	case h.waitedGen == h.gen || h.released:
		if h.err != nil {
			return Failed, h.err
		}
		return Done, nil
	case !h.ev.Query():
		return InFlight, nil
	}
	if err := h.copyErrs(); err != nil {
		return Failed, err
	}
	return Done, nil
}

// waitSpin is how long Wait polls the completion event before it sleeps.
const waitSpin = 30 * time.Microsecond

// Wait blocks the calling goroutine until the last post completes and
// returns its error: it polls the completion event for waitSpin, then
// sleeps on it rather than spinning. A wait on a handle never posted fails
// with ErrNotPosted; a second wait on the same post returns at once, with
// the first wait's result.
func (h *Handle) Wait() error {
	h.mu.Lock()
	switch {
	case h.gen == 0:
		h.mu.Unlock()
		return h.wrap(ErrNotPosted)
	case h.waitedGen == h.gen || h.released:
		err := h.err
		h.mu.Unlock()
		return err
	}
	gen, ev := h.gen, h.ev
	h.mu.Unlock()

	// Poll briefly before sleeping: the OS wakes a thread that sleeps on a
	// blocking-sync event about 10 µs late, longer than a small transfer
	// takes. Past waitSpin the host sleeps, so a long wait costs no CPU.
	for deadline := time.Now().Add(waitSpin); !ev.Query() && time.Now().Before(deadline); {
	}
	err := ev.Synchronize()
	if err != nil {
		err = h.errorf("wait: %v", err)
	} else {
		err = h.copyErrs()
	}
	h.mu.Lock()
	if h.gen == gen {
		h.waitedGen, h.err = gen, err
	}
	h.mu.Unlock()
	return err
}

// WaitOn makes later work on stream s wait until the last post completes,
// without blocking the caller: a stream wait on the completion event
// (cuStreamWaitEvent on GPUs), which a CUDA graph captures when the post is
// captured too. It fails with ErrNotPosted on a handle never posted; it may
// be called any number of times.
func (h *Handle) WaitOn(s runtime.Stream) error {
	if s == nil {
		s = h.reg.a.dev.DefaultStream()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.gen == 0:
		return h.wrap(ErrNotPosted)
	case h.released:
		return nil // released only once complete
	}
	if err := s.WaitEvent(h.ev); err != nil {
		return h.errorf("wait on a stream: %v", err)
	}
	return nil
}

// copyErrs joins what posting and the copies themselves reported.
func (h *Handle) copyErrs() error {
	errs := []error{h.postErr}
	for _, c := range h.copies {
		errs = append(errs, c.Err())
	}
	if err := errors.Join(errs...); err != nil {
		return h.errorf("%v", err)
	}
	return nil
}

// pending reports a post the host has not waited for.
func (h *Handle) pending() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen > h.waitedGen && !h.released
}

// settle marks the last post as waited for (Registration.Settle).
func (h *Handle) settle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen > h.waitedGen && !h.released {
		h.waitedGen, h.err = h.gen, h.copyErrs()
	}
}

// release waits for a post still in flight, then destroys the event.
func (h *Handle) release() error {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return nil
	}
	h.released = true
	pending, ev := h.gen > h.waitedGen, h.ev
	h.mu.Unlock()
	var errs []error
	if pending {
		errs = append(errs, ev.Synchronize())
	}
	errs = append(errs, ev.Close())
	return errors.Join(errs...)
}
