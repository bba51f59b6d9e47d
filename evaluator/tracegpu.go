package evaluator

import (
	"errors"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// GPU times for Options.Trace, on a runtime that times events
// (runtime.EventTimer): an event recorded on the op's stream before its
// work and one after; Trace synchronises the stream after the op anyway,
// so both have passed when the op's TraceEvent is made. Their difference
// is the op's time on the stream; a reference event, recorded and waited
// for at the Run's first timed op, places the start on the job's clock.

// gpuClock is a rank's events for GPU times.
type gpuClock struct {
	timer       runtime.EventTimer
	ref, e0, e1 runtime.Event
	refNs       int64 // the job's clock when ref had passed; 0: not this Run yet
	off         bool  // the runtime does not time events, or making an event failed
}

// gpuTimed says whether op's stream work is timed (ir.OpInfo.Kernel: an
// async collective's runs on another stream).
func gpuTimed(op *ir.Op) bool { return op.Code.Info().Kernel && !op.Async() }

// gpuBefore records the start event of op on cur; false when op is not
// timed or the runtime cannot time it.
func (r *rank) gpuBefore(op *ir.Op, cur runtime.Stream) bool {
	g := &r.traceState.gpu
	if g.off || !gpuTimed(op) {
		return false
	}
	if g.timer == nil {
		if err := r.startGPUClock(); err != nil {
			g.off = true
			return false
		}
	}
	if g.refNs == 0 {
		s := r.dev.DefaultStream()
		if s.Record(g.ref) != nil || g.ref.Synchronize() != nil {
			return false
		}
		g.refNs = r.job.traceClock(time.Now())
	}
	return cur.Record(g.e0) == nil
}

func (r *rank) startGPUClock() error {
	g := &r.traceState.gpu
	t, ok := r.dev.(runtime.EventTimer)
	if !ok {
		return errors.New("no event timer")
	}
	var evs [3]runtime.Event
	for i := range evs {
		ev, err := r.dev.NewEvent()
		if err != nil {
			for _, e := range evs[:i] {
				e.Close()
			}
			return err
		}
		evs[i] = ev
	}
	g.timer, g.ref, g.e0, g.e1 = t, evs[0], evs[1], evs[2]
	return nil
}

// gpuAfter records the end event on the stream the op's work went to.
func (r *rank) gpuAfter(s runtime.Stream) error { return s.Record(r.traceState.gpu.e1) }

// gpuTrace fills ev's GPU times once the op's stream has been
// synchronised; a timer's error leaves them zero.
func (r *rank) gpuTrace(ev *TraceEvent) {
	g := &r.traceState.gpu
	if g.e1.Synchronize() != nil {
		return
	}
	from, err1 := g.timer.Elapsed(g.ref, g.e0)
	dur, err2 := g.timer.Elapsed(g.e0, g.e1)
	if err1 != nil || err2 != nil {
		return
	}
	ev.GPUStart, ev.GPUDur = g.refNs+from.Nanoseconds(), max(dur.Nanoseconds(), 1)
}

// closeGPUClock releases the events (Job.Close).
func (r *rank) closeGPUClock() error {
	g := &r.traceState.gpu
	var errs []error
	for _, e := range []runtime.Event{g.ref, g.e0, g.e1} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	*g = gpuClock{}
	return errors.Join(errs...)
}
