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
// every device call lands in one graph per rank (the program's streams
// joined as forks), then launches it. Later Runs upload the inputs into the
// same input buffers, launch the graph and read the outputs: the host no
// longer walks the program.

// checkGraphMode says why prog cannot run in graph mode on rt, or nil.
func checkGraphMode(prog *ir.Program, rt runtime.Runtime, opts Options) error {
	if opts.Stats || opts.Trace {
		return errors.New("graph mode runs the program as one graph: per-op Stats and Trace need the host between ops; use one or the other")
	}
	if err := ir.CheckCapturable(prog); err != nil {
		return err
	}
	for _, rank := range rt.Ranks() {
		dev, err := rt.Device(rank)
		if err != nil {
			return err
		}
		if _, ok := dev.(runtime.Capturer); !ok {
			return fmt.Errorf("the %s runtime cannot capture graphs yet: run without graph mode", rt.Name())
		}
	}
	return nil
}

// capture runs the body with the default stream capturing, launches the
// graph it made and reads the outputs. Inputs are bound already (outside
// the graph: later Runs upload new ones into the same buffers).
func (r *rank) capture(f *frame) (map[string]*host.Array, error) {
	c := r.dev.(runtime.Capturer) // checked at NewJob
	origin := f.current
	if err := c.BeginCapture(origin); err != nil {
		return nil, err
	}
	// The program's other streams (made by the warm-up) join the capture
	// first, so the work the program puts on them is captured too.
	forks := r.otherStreams(origin)
	err := r.forkJoin(f, forks, origin, true)
	if err == nil {
		err = r.block(f, r.job.plan.body)
	}
	if err == nil {
		err = r.forkJoin(f, forks, origin, false)
	}
	f.setCurrent(origin) // the outputs are read after the graph, on its stream
	var ts []runtime.Tensor
	if err == nil {
		ts, err = r.outputTensors(f)
	}
	g, endErr := c.EndCapture(origin)
	if err == nil {
		err = endErr
	}
	if err != nil { // the op's error says more than "the capture failed"
		if g != nil {
			g.Close()
		}
		return nil, err
	}
	r.graph, r.graphOuts = g, ts
	r.stats.GraphNodes = g.Nodes()
	return r.replay(f)
}

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

// replay launches the graph on the current (default) stream and reads the
// outputs it wrote.
func (r *rank) replay(f *frame) (map[string]*host.Array, error) {
	if err := r.graph.Launch(f.current); err != nil {
		return nil, err
	}
	r.stats.GraphReplays++
	return r.readTensors(f, r.graphOuts)
}

// closeGraph releases the graph (before the buffers it uses).
func (r *rank) closeGraph() error {
	g := r.graph
	r.graph, r.graphOuts = nil, nil
	if g == nil {
		return nil
	}
	return g.Close()
}
