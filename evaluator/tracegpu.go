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

// With Options.TraceOverlap nothing is waited for after an op: each timed
// op takes a pair of events of its own (kept for later Runs), and the
// pairs are read once the Run has drained (gpuSettle).

// gpuClock is a rank's events for GPU times.
type gpuClock struct {
	timer       runtime.EventTimer
	ref, e0, e1 runtime.Event
	refNs       int64 // the job's clock when ref had passed; 0: not this Run yet
	off         bool  // the runtime does not time events, or making an event failed
	// TraceOverlap: every pair made so far, used takes of this Run, and
	// the trace index each used pair belongs to.
	pairs [][2]runtime.Event
	used  int
	of    []int
	own   [2]runtime.Event // the pair made with ref (e0, e1 are the current pair)
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
	if r.job.opts.TraceOverlap {
		if g.used == len(g.pairs) {
			e0, err0 := r.dev.NewEvent()
			e1, err1 := r.dev.NewEvent()
			if err0 != nil || err1 != nil {
				for _, e := range []runtime.Event{e0, e1} {
					if e != nil {
						e.Close()
					}
				}
				return false
			}
			g.pairs = append(g.pairs, [2]runtime.Event{e0, e1})
		}
		g.e0, g.e1 = g.pairs[g.used][0], g.pairs[g.used][1]
		g.used++
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
	g.own = [2]runtime.Event{evs[1], evs[2]}
	return nil
}

// gpuAfter records the end event on the stream the op's work went to.
func (r *rank) gpuAfter(s runtime.Stream) error { return s.Record(r.traceState.gpu.e1) }

// gpuTrace fills the GPU times of trace event i once the op's stream has
// been synchronised; a timer's error leaves them zero. With TraceOverlap
// it only notes i: gpuSettle reads the pair at the Run's end.
func (r *rank) gpuTrace(i int) {
	g := &r.traceState.gpu
	if r.job.opts.TraceOverlap {
		g.of = append(g.of, i)
		return
	}
	r.gpuTimes(&r.trace[i], g.e0, g.e1)
}

func (r *rank) gpuTimes(ev *TraceEvent, e0, e1 runtime.Event) {
	g := &r.traceState.gpu
	if e1.Synchronize() != nil {
		return
	}
	from, err1 := g.timer.Elapsed(g.ref, e0)
	dur, err2 := g.timer.Elapsed(e0, e1)
	if err1 != nil || err2 != nil {
		return
	}
	ev.GPUStart, ev.GPUDur = g.refNs+from.Nanoseconds(), max(dur.Nanoseconds(), 1)
}

// gpuSettle reads this Run's pairs (TraceOverlap; every stream drained)
// and frees them for the next Run.
func (r *rank) gpuSettle() {
	g := &r.traceState.gpu
	for k, i := range g.of {
		if i < len(r.trace) {
			r.gpuTimes(&r.trace[i], g.pairs[k][0], g.pairs[k][1])
		}
	}
	g.used, g.of = 0, g.of[:0]
}

// closeGPUClock releases the events (Job.Close).
func (r *rank) closeGPUClock() error {
	g := &r.traceState.gpu
	var errs []error
	evs := []runtime.Event{g.ref, g.own[0], g.own[1]}
	for _, p := range g.pairs {
		evs = append(evs, p[0], p[1])
	}
	for _, e := range evs {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	*g = gpuClock{}
	return errors.Join(errs...)
}
