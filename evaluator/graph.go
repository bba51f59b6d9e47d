package evaluator

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// Graph mode (Options.Graph, docs/GRAPHS.md). The first Run is eager: it
// allocates, exchanges symmetric handles, compiles kernels. The second
// interprets the program once more with the default stream capturing, so
// every device call lands in a graph per rank (the program's streams
// joined as forks), then launches it. Later Runs upload the inputs into the
// same input buffers, launch the graph and read the outputs: the host no
// longer walks the program.
//
// An op that waits on the host (ir.GraphSplits) splits the capture: the
// graph so far is ended and launched, its stream synchronised, the op run
// on the host, and a new graph begun. A replay does the same with what the
// capture left: each graph in turn, and between two graphs the op's host
// part (a registration's meeting with the peers, a barrier).

// graphStep is one graph of a rank's program and, when the program goes
// on after it, the host part of the op that split it there.
type graphStep struct {
	g    runtime.Graph
	op   *ir.Op       // the op that ended this graph (nil for the last)
	host func() error // its part on the host at a replay (nil: none)
}

// capturing is a capture in progress: its stream and the streams forked
// from it.
type capturing struct {
	c      runtime.Capturer
	origin runtime.Stream
	forks  []runtime.Stream
}

// checkGraphMode says why prog cannot run in graph mode on rt, or nil.
func checkGraphMode(prog *ir.Program, rt runtime.Runtime, opts Options) error {
	if opts.Stats || opts.Trace {
		return errors.New("graph mode runs the program as one graph: per-op Stats and Trace need the host between ops; use one or the other")
	}
	if err := ir.CheckCapturable(prog); err != nil {
		return err
	}
	loops := ir.DeviceLoops(prog)
	for _, rank := range rt.Ranks() {
		dev, err := rt.Device(rank)
		if err != nil {
			return err
		}
		if _, ok := dev.(runtime.Capturer); !ok {
			return fmt.Errorf("the %s runtime cannot capture graphs yet: run without graph mode", rt.Name())
		}
		if len(loops) > 0 {
			lc, ok := dev.(runtime.LoopCapturer)
			if !ok {
				return fmt.Errorf("%s: the %s runtime cannot have the device repeat a loop in a graph: run without graph mode",
					loops[0].Op.Pos, rt.Name())
			}
			// Said before any Run: a driver without conditional nodes is
			// known now, not halfway through a capture.
			if err := lc.LoopSupport(); err != nil {
				return fmt.Errorf("%s: this loop runs on the device in graph mode, which this device cannot do: %w; run without graph mode",
					loops[0].Op.Pos, err)
			}
		}
	}
	return nil
}

// capture runs the body with the default stream capturing (split at each
// op that waits on the host), launching each graph as it is made, and
// reads the outputs. Inputs are bound already (outside the graphs: later
// Runs upload new ones into the same buffers).
func (r *rank) capture(f *frame) (map[string]*host.Array, error) {
	origin := f.current
	// The program's other streams (made by the warm-up) join each capture
	// first, so the work the program puts on them is captured too.
	r.capturing = &capturing{c: r.dev.(runtime.Capturer), origin: origin, forks: r.otherStreams(origin)} // checked at NewJob
	defer func() { r.capturing = nil }()
	err := r.beginGraph(f)
	if err == nil {
		err = r.block(f, r.job.plan.body)
	}
	f.setCurrent(origin) // the outputs are read after the graph, on its stream
	var ts []runtime.Tensor
	if err == nil {
		ts, err = r.outputTensors(f)
	}
	if err = r.endGraph(f, nil, err); err != nil {
		// No partial program is left to replay: the next Run captures anew.
		if cerr := r.closeGraph(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	r.graphOuts = slices.Clone(ts) // ts is outputTensors' scratch
	for _, st := range r.graph {
		r.stats.GraphNodes += st.g.Nodes()
	}
	r.stats.Graphs = len(r.graph)
	r.stats.GraphReplays++
	outs, err := r.readTensors(f, r.graphOuts) // synchronises the origin, which joined every fork
	if err == nil {
		r.settleTransfers()
	}
	return outs, err
}

// settleTransfers tells the registrations that the transfers the capture
// posted are done (after a graph's launch was synchronised): the host
// cannot wait on their captured events.
func (r *rank) settleTransfers() {
	if r.xfer == nil {
		return
	}
	for _, reg := range r.xfer.regs {
		reg.Settle()
	}
}

// beginGraph starts capturing on the origin and forks the other streams.
func (r *rank) beginGraph(f *frame) error {
	cs := r.capturing
	if err := cs.c.BeginCapture(cs.origin); err != nil {
		return err
	}
	return r.forkJoin(f, cs.forks, cs.origin, true)
}

// endGraph joins the forks, ends the capture and launches the graph (err:
// the capture's work failed; the capture is still ended). at is the op
// that splits the program here, nil at its end.
func (r *rank) endGraph(f *frame, at *ir.Op, err error) error {
	cs := r.capturing
	if err == nil {
		err = r.forkJoin(f, cs.forks, cs.origin, false)
	}
	g, endErr := cs.c.EndCapture(cs.origin)
	if err == nil {
		err = endErr
	}
	if err != nil { // the op's error says more than "the capture failed"
		if g != nil {
			g.Close()
		}
		return err
	}
	r.graph = append(r.graph, graphStep{g: g, op: at})
	return g.Launch(cs.origin)
}

// splitGraph runs op p, which waits on the host, between two graphs: the
// graph so far is ended, launched and waited for; the op runs as in an
// eager Run; its host part is kept for the replays; a new graph begins.
// Everything before the split is then done, so what is left of it (a
// producer's event, an async result's) needs no wait.
func (r *rank) splitGraph(f *frame, p *opPlan) error {
	if err := r.endGraph(f, p.op, nil); err != nil {
		return err
	}
	origin := r.capturing.origin
	if err := origin.Synchronize(); err != nil {
		return err
	}
	r.settleTransfers()
	host, err := r.hostPart(f, p)
	if err != nil {
		return err
	}
	r.graph[len(r.graph)-1].host = host
	for i := range f.vals {
		if s := &f.vals[i]; s.live {
			s.ready = nil
			if s.done != nil {
				if s.done != settled {
					r.pool.recycleEvent(s.done)
				}
				s.done = settled
			}
		}
	}
	return r.beginGraph(f)
}

// hostPart runs an op that waits on the host (at a split, every stream
// synchronised) and returns what a replay must do again on the host.
func (r *rank) hostPart(f *frame, p *opPlan) (func() error, error) {
	switch p.op.Code {
	case ir.OpRegister:
		if err := r.register(f, p); err != nil {
			return nil, err
		}
		// The registration is cached from now on: a replay meets the
		// peers with it, so none reads this rank's tensor before its
		// producers (the graph before) are done.
		return r.xfer.bound[p.res[0]].Quiesce, nil
	case ir.OpDeregister:
		reg, err := r.registration(p.args[0])
		if err != nil {
			return nil, err
		}
		if err := r.deregister(p); err != nil {
			return nil, err
		}
		// The graph before holds this rank's transfers and has finished:
		// meeting the peers says none of theirs touches the tensor now.
		return reg.Quiesce, nil
	case ir.OpBarrier:
		origin := r.capturing.origin
		if err := r.dev.Barrier(origin); err != nil {
			return nil, err
		}
		return func() error { return r.dev.Barrier(origin) }, nil
	case ir.OpSyncStream:
		return nil, nil // the split synchronised every stream
	}
	return nil, fmt.Errorf("%s waits on the host, but graph mode cannot split at it", p.op.Code)
}

// settled stands for an async result whose work finished at a graph
// split: wait has nothing to order.
var settled runtime.Event = settledEvent{}

type settledEvent struct{}

func (settledEvent) Synchronize() error { return nil }
func (settledEvent) Query() bool        { return true }
func (settledEvent) Close() error       { return nil }

// otherStreams are the rank's streams other than origin: the program's
// and the one async collectives and transfers run on.
func (r *rank) otherStreams(origin runtime.Stream) []runtime.Stream {
	var out []runtime.Stream
	add := func(s runtime.Stream) {
		if s != nil && s != origin && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range r.streams {
		add(s)
	}
	add(r.comm)
	return out
}

// forkJoin forks (fork true: each stream waits for origin) or joins
// (origin waits for each stream) the streams of a capture, through events.
func (r *rank) forkJoin(f *frame, streams []runtime.Stream, origin runtime.Stream, fork bool) error {
	for _, s := range streams {
		ev, err := r.pool.takeEvent()
		if err != nil {
			return err
		}
		f.events = append(f.events, ev)
		from, to := s, origin
		if fork {
			from, to = origin, s
		}
		if err := from.Record(ev); err != nil {
			return err
		}
		if err := to.WaitEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// replay launches the graphs in turn on the current (default) stream, with
// the host parts of the ops between them, and reads the outputs the last
// one wrote.
func (r *rank) replay(f *frame) (map[string]*host.Array, error) {
	for _, st := range r.graph {
		if err := st.g.Launch(f.current); err != nil {
			return nil, err
		}
		if st.op == nil {
			continue
		}
		if err := f.current.Synchronize(); err != nil {
			return nil, err
		}
		if st.host != nil {
			if err := st.host(); err != nil {
				return nil, r.runError(st.op, err)
			}
		}
	}
	r.stats.GraphReplays++
	return r.readTensors(f, r.graphOuts)
}

// closeGraph releases the graphs (before the buffers they use).
func (r *rank) closeGraph() error {
	steps := r.graph
	r.graph, r.graphOuts = nil, nil
	var errs []error
	for _, st := range steps {
		errs = append(errs, st.g.Close())
	}
	return errors.Join(errs...)
}

// deviceLoop captures loop p of n trips from index from, which the device
// repeats (ir.DeviceLoopUnroll: its body reads no index, uses one stream and
// waits on nothing on the host): the body unrolled p.unroll times, once,
// as a loop the graph runs n/p.unroll times, then the n%p.unroll trips
// left unrolled after it.
func (r *rank) deviceLoop(f *frame, p *opPlan, from int64, n uint64) error {
	lc := r.dev.(runtime.LoopCapturer) // checked at NewJob
	idx := p.bodyArgs[0]
	f.vals[idx] = slot{live: true, index: from} // read by nothing in the body
	defer func() { f.vals[idx] = slot{} }()
	body := func(times uint64) error {
		for range times {
			if err := r.block(f, p.body); err != nil {
				return err
			}
		}
		return nil
	}
	s := f.current
	if err := lc.BeginLoop(s, int64(n/p.unroll)); err != nil {
		return err
	}
	err := body(p.unroll)
	if err = errors.Join(err, lc.EndLoop(s)); err != nil {
		return err
	}
	return body(n % p.unroll) // the body kept to s: ir rules out stream ops in it
}
