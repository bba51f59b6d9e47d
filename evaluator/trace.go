package evaluator

import (
	"fmt"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// Recording Options.Trace: block times each op as Stats does (the op, then
// a synchronisation of its stream) and traceOp turns the times into a
// TraceEvent in integer nanoseconds on the job's clock (Job.epoch), naming
// the stream the op's work went to, the op's program id and occurrence
// (which link one collective call across ranks), and, for async ops, when
// the run saw the work complete.

// Stream numbers of TraceEvent.Stream.
const (
	TraceDefaultStream = 0 // the device's default stream
	TraceCommStream    = 1 // where async collectives and transfers run
	// TraceFirstStream + k is the stream the `stream` op of op id k made.
	TraceFirstStream = 2
)

// traceState is a rank's bookkeeping for the Run being traced.
type traceState struct {
	seen    []int64     // executions so far by op id
	pending map[int]int // async result value id -> index of its op in trace
	streams []traceStream
	gpu     gpuClock
}

// traceStream is a stream the run touched, with its TraceEvent number and
// name.
type traceStream struct {
	s    runtime.Stream
	id   int
	name string
}

// traceClock is t on the job's clock: the wall clock at NewJob in ns since
// the Unix epoch plus the monotonic time since, so times are exact and
// ordered within a process and shared (to the wall clocks' agreement) by
// processes on one machine.
func (j *Job) traceClock(t time.Time) int64 {
	return j.epochNs + t.Sub(j.epoch).Nanoseconds()
}

// resetTrace starts a Run's trace.
func (r *rank) resetTrace() {
	r.trace = r.trace[:0]
	if !r.job.opts.Trace {
		return
	}
	ts := &r.traceState
	if ts.seen == nil {
		ts.seen = make([]int64, len(r.job.plan.ops))
		ts.pending = map[int]int{}
	}
	clear(ts.seen)
	clear(ts.pending)
	ts.gpu.refNs = 0 // a new reference at the Run's first timed op
}

// traceOp records op p, started at start on stream cur and ended at end.
func (r *rank) traceOp(f *frame, p *opPlan, cur runtime.Stream, start, end time.Time) {
	op := p.op
	ts := &r.traceState
	async := (op.Code.IsCollective() && op.Async()) || op.Code == ir.OpTransfer
	s := cur
	if async && r.comm != nil {
		s = r.comm
	}
	id, name := r.traceStreamOf(s)
	t0, t1 := r.job.traceClock(start), r.job.traceClock(end)
	ev := TraceEvent{Op: p.code, Pos: p.pos, Iter: f.iter, Start: t0, Dur: t1 - t0,
		Stream: id, StreamName: name, OpID: p.id, Occurrence: ts.seen[p.id],
		Collective: op.Code.IsCollective() || op.Code.Info().Meets, Async: async}
	ts.seen[p.id]++
	if async && len(p.res) > 0 {
		ts.pending[p.res[0]] = len(r.trace)
	}
	if op.Code == ir.OpWait && len(p.args) > 0 {
		// The wait is timed with its stream synchronised: the work it
		// waited for was complete when it ended.
		if i, ok := ts.pending[p.args[0]]; ok {
			r.trace[i].Done = t1
			delete(ts.pending, p.args[0])
		}
	}
	r.trace = append(r.trace, ev)
}

// endTrace completes the async ops no `wait` saw: every stream of the run
// has been synchronised, so their work was complete by now.
func (r *rank) endTrace() {
	if !r.job.opts.Trace {
		return
	}
	now := r.job.traceClock(time.Now())
	for _, i := range r.traceState.pending {
		r.trace[i].Done = now
	}
	clear(r.traceState.pending)
	r.gpuSettle()
}

// traceStreamOf numbers and names s.
func (r *rank) traceStreamOf(s runtime.Stream) (int, string) {
	ts := &r.traceState
	for _, t := range ts.streams {
		if t.s == s {
			return t.id, t.name
		}
	}
	t := traceStream{s: s, id: -1}
	switch {
	case s == r.dev.DefaultStream():
		t.id, t.name = TraceDefaultStream, "default stream"
	case s == r.comm:
		t.id, t.name = TraceCommStream, "comm stream (async)"
	default:
		for k, made := range r.streams {
			if made == s {
				p := r.job.plan.ops[k]
				t.id = TraceFirstStream + k
				t.name = fmt.Sprintf("stream %s (line %d)", p.op.Result(), p.op.Pos.Line)
				break
			}
		}
	}
	if t.id < 0 { // not the program's: cannot happen, but name it apart
		t.id, t.name = TraceFirstStream+len(r.job.plan.ops)+len(ts.streams), "stream"
	}
	ts.streams = append(ts.streams, t)
	return t.id, t.name
}
