package evaluator

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The ops the stream-parallel pass emits for a loop with streams
// (docs/PASSES.md): pick_stream chooses an iteration's stream, wait_stream
// joins streams into the current one. Neither waits on the host, so both
// are captured in graph mode (an event recorded on one captured stream and
// waited for on another).

// streamOp runs pick_stream or wait_stream.
func (r *rank) streamOp(f *frame, p *opPlan) error {
	op := p.op
	if op.Code == ir.OpPickStream {
		n := len(p.args) - 1
		i, err := r.indexOf(f, op.Operands[n], p.args[n])
		if err != nil {
			return err
		}
		s, err := r.stream(f, p.args[op.PickedStream(i, n)])
		if err != nil {
			return err
		}
		f.vals[p.res[0]] = slot{live: true, stream: s}
		return nil
	}
	if len(p.args) == 0 {
		return r.waitStream(f, r.dev.DefaultStream())
	}
	for _, id := range p.args {
		s, err := r.stream(f, id)
		if err != nil {
			return err
		}
		if err := r.waitStream(f, s); err != nil {
			return err
		}
	}
	return nil
}

// waitStream makes the current stream wait for the work enqueued on s so
// far: an event recorded on s, waited for on the device (the host goes
// on).
func (r *rank) waitStream(f *frame, s runtime.Stream) error {
	if s == f.current {
		return nil
	}
	ev, err := r.pool.takeEvent()
	if err != nil {
		return err
	}
	f.events = append(f.events, ev) // recycled at the end of the Run
	if err := s.Record(ev); err != nil {
		return err
	}
	return f.current.WaitEvent(ev)
}
