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
// pairs are read once the Run has drained (gpuSettle). A serialised trace
// uses the first pair for every op.

// gpuClock is a rank's events for GPU times.
type gpuClock struct {
	timer runtime.EventTimer
	ref   runtime.Event
	refNs int64 // the job's clock when ref had passed; 0: not this Run yet
	off   bool  // the runtime does not time events, or making an event failed
	// pairs are the (start, end) events made so far; e0 and e1 the current
	// op's; used counts the pairs this Run took (TraceOverlap), of the
	// trace event each belongs to.
	pairs  [][2]runtime.Event
	e0, e1 runtime.Event
	used   int
	of     []int
	// async: the current op is an async collective, whose pair collective
	// records on the communication stream around its work (asyncBefore,
	// asyncAfter), not the op loop on the current stream.
	async bool
}

// gpuTimed says whether op's stream work is timed (ir.OpInfo.Kernel).
func gpuTimed(op *ir.Op) bool { return op.Code.Info().Kernel }

// gpuBefore records the start event of op on cur; false when op is not
// timed or the runtime cannot time it.
func (r *rank) gpuBefore(op *ir.Op, cur runtime.Stream) bool {
	g := &r.traceState.gpu
	g.async = false
	if g.off || !gpuTimed(op) {
		return false
	}
	if g.timer == nil {
		t, ok := r.dev.(runtime.EventTimer)
		if !ok {
			g.off = true
			return false
		}
		ref, err := r.dev.NewEvent()
		if err != nil {
			g.off = true
			return false
		}
		g.timer, g.ref = t, ref
	}
	if g.refNs == 0 {
		s := r.dev.DefaultStream()
		if s.Record(g.ref) != nil || g.ref.Synchronize() != nil {
			return false
		}
		g.refNs = r.job.traceClock(time.Now())
	}
	k := 0 // serialised: one pair serves every op
	if r.job.opts.TraceOverlap {
		k = g.used
	}
	if k == len(g.pairs) {
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
	if r.job.opts.TraceOverlap {
		g.used++
	}
	g.e0, g.e1 = g.pairs[k][0], g.pairs[k][1]
	if g.async = op.Async(); g.async {
		return true // recorded on the communication stream by collective
	}
	return cur.Record(g.e0) == nil
}

// gpuAfter records the end event on the stream the op's work went to
// (an async collective's was recorded by collective).
func (r *rank) gpuAfter(s runtime.Stream) error {
	g := &r.traceState.gpu
	if g.async {
		g.async = false
		return nil
	}
	return s.Record(g.e1)
}

// asyncBefore and asyncAfter time an async collective's work on the
// communication stream s, when the trace times this op.
func (r *rank) asyncBefore(s runtime.Stream) error {
	if g := &r.traceState.gpu; g.async {
		return s.Record(g.e0)
	}
	return nil
}

func (r *rank) asyncAfter(s runtime.Stream) error {
	if g := &r.traceState.gpu; g.async {
		return s.Record(g.e1)
	}
	return nil
}

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
	if g.ref != nil {
		errs = append(errs, g.ref.Close())
	}
	for _, p := range g.pairs {
		errs = append(errs, p[0].Close(), p[1].Close())
	}
	*g = gpuClock{}
	return errors.Join(errs...)
}
