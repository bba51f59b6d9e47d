package sim

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hirlab/hir/runtime"
)

// Graph mode (runtime.Capturer), modelled on CUDA's stream capture: while
// a stream captures, the work enqueued on it is recorded as nodes instead
// of run. An event recorded by captured work becomes a mark; a stream that
// waits on a mark joins the capture (a fork) and must be joined back into
// the origin before EndCapture. Launch replays the nodes: the origin's on
// the launch stream, each fork's on a stream the graph owns, marks as
// events the graph owns, so the replay keeps the captured concurrency.
//
// What the GPU cannot capture fails here too (waiting on the host, Alloc,
// Free, Barrier, Exchange), so a program that captures on this runtime
// captures on cuda. Captured work keeps its buffers and arguments. Peers'
// meetings are keyed by the graph and its replay count, which the replay's
// first node advances when it runs, as a device-side counter would: a key
// fixed at capture would make the second replay meet the first's peers.

var _ runtime.LoopCapturer = (*Device)(nil)

// capture is an open capture on a device.
type capture struct {
	dev *Device
	id  int64 // the k-th capture of this rank: the same on every rank

	mu      sync.Mutex
	streams []*stream // 0: the origin, then the forks in the order they joined
	index   map[*stream]int
	nodes   []node
	nMarks  int
	marked  []*event  // events whose latest record is a mark, cleared at the end
	err     error     // the first error that invalidated the capture
	loop    *openLoop // the loop body being captured (bodies do not nest)
	// sealed[m]: mark m was recorded in a loop body that has ended; as in
	// CUDA (the body is a graph of its own), nothing outside may wait on it.
	sealed []bool
}

// openLoop is a loop body being captured (BeginLoop to EndLoop).
type openLoop struct {
	stream *stream
	trips  int64
	start  int // its first node's index in nodes
	marks  int // the first mark recorded in it
}

// loopNode is a captured loop: body runs trips times in a row.
type loopNode struct {
	trips int64
	body  []node
}

// node is one captured operation.
type node struct {
	stream int  // index into the capture's streams
	w      work // the work (zero for an event edge)
	mark   int  // >= 0: records this mark
	wait   int  // >= 0: waits for this mark
	loop   *loopNode
}

// keeper is captured work that must not be recycled after it runs (a
// kernel launch's argument record): the graph runs it again.
type keeper interface{ keep() }

// BeginCapture starts capturing the work enqueued on rs.
func (d *Device) BeginCapture(rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capture != nil {
		return errorf(d.rank, "begin capture: a capture is already open on this rank")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &capture{dev: d, id: d.captures, streams: []*stream{s}, index: map[*stream]int{s: 0}}
	d.captures++
	d.capture = c
	s.capture = c
	return nil
}

// EndCapture closes the capture begun on rs and returns its graph.
func (d *Device) EndCapture(rs runtime.Stream) (runtime.Graph, error) {
	s, err := d.stream(rs)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	c := d.capture
	if c == nil || c.streams[0] != s {
		d.mu.Unlock()
		return nil, errorf(d.rank, "end capture: no capture was begun on this stream")
	}
	d.capture = nil
	d.mu.Unlock()
	c.detach()
	if c.err == nil && c.loop != nil {
		c.err = errors.New("a loop body begun in it was not ended (EndLoop)")
	}
	if c.err != nil {
		return nil, fmt.Errorf("rank %d: the capture failed: %w", d.rank, c.err)
	}
	if err := c.checkJoined(); err != nil {
		return nil, err
	}
	d.rt.liveGraphs.Add(1)
	return &graph{dev: d, id: c.id, nodes: c.nodes, forks: len(c.streams) - 1, nMarks: c.nMarks}, nil
}

// detach takes every stream and event out of the capture. Streams are
// locked without c.mu held: record locks a stream, then the capture.
func (c *capture) detach() {
	c.mu.Lock()
	streams := slices.Clone(c.streams)
	c.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		s.capture = nil
		s.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.marked {
		e.mu.Lock()
		if e.capture == c {
			e.capture, e.stale = nil, true
		}
		e.mu.Unlock()
	}
}

// checkJoined makes sure every fork's last node comes before the origin's
// last node: the replay's end is the end of all of its work.
func (c *capture) checkJoined() error {
	last := make([]int, len(c.streams))
	for i := range last {
		last[i] = -1
	}
	prev := make([]int, len(c.nodes)) // the node before, on the same stream
	recorder := make([]int, c.nMarks) // the node that records each mark
	for i, n := range c.nodes {
		prev[i] = last[n.stream]
		last[n.stream] = i
		if n.mark >= 0 {
			recorder[n.mark] = i
		}
	}
	reached := make([]bool, len(c.nodes))
	var todo []int
	if last[0] >= 0 {
		todo = append(todo, last[0])
	}
	for len(todo) > 0 {
		i := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if i < 0 || reached[i] {
			continue
		}
		reached[i] = true
		todo = append(todo, prev[i])
		if w := c.nodes[i].wait; w >= 0 {
			todo = append(todo, recorder[w])
		}
	}
	for k := 1; k < len(c.streams); k++ {
		if !reached[last[k]] {
			return errorf(c.dev.rank, "end capture: a stream forked into the capture was not joined back "+
				"(the capturing stream must wait on an event recorded on it after its last work)")
		}
	}
	return nil
}

// record adds w, enqueued on s, as a node. Called with s.mu held.
func (c *capture) record(s *stream, w work) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := w.task.(keeper); ok {
		k.keep()
	}
	if err := c.checkLoopStream(s, "enqueue"); err != nil {
		return err
	}
	c.nodes = append(c.nodes, node{stream: c.index[s], w: w, mark: -1, wait: -1})
	return nil
}

// checkLoopStream fails the capture when a loop body is open and s is not
// its stream: a body is one stream's work. Called with c.mu held.
func (c *capture) checkLoopStream(s *stream, call string) error {
	if c.loop != nil && c.loop.stream != s {
		err := &runtime.CaptureError{Rank: c.dev.rank, Call: call,
			Why: "a loop body captured for the device to repeat is one stream's work, and this is another stream"}
		if c.err == nil {
			c.err = err
		}
		return err
	}
	return nil
}

// LoopSupport: the CPU runtime always repeats loop bodies.
func (d *Device) LoopSupport() error { return nil }

// BeginLoop starts a loop body on rs, which captures: the work enqueued on
// it until EndLoop runs trips times where the loop stands.
func (d *Device) BeginLoop(rs runtime.Stream, trips int64) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	c := s.capturing()
	if c == nil {
		return errorf(d.rank, "begin loop: the stream is not capturing")
	}
	if trips < 1 {
		return errorf(d.rank, "begin loop: %d trips (at least 1)", trips)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop != nil { // as on cuda (runtime.LoopCapturer)
		return errorf(d.rank, "begin loop: inside another loop's body (device loops do not nest)")
	}
	c.loop = &openLoop{stream: s, trips: trips, start: len(c.nodes), marks: c.nMarks}
	return nil
}

// EndLoop closes the loop body begun on rs.
func (d *Device) EndLoop(rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	c := s.capturing()
	if c == nil {
		return errorf(d.rank, "end loop: the stream is not capturing")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop == nil || c.loop.stream != s {
		return errorf(d.rank, "end loop: no loop body was begun on this stream")
	}
	l := c.loop
	c.loop = nil
	body := slices.Clone(c.nodes[l.start:])
	c.nodes = append(c.nodes[:l.start], node{stream: c.index[s], mark: -1, wait: -1, loop: &loopNode{trips: l.trips, body: body}})
	for len(c.sealed) < c.nMarks {
		c.sealed = append(c.sealed, false)
	}
	for m := l.marks; m < c.nMarks; m++ {
		c.sealed[m] = true
	}
	return nil
}

// recordEvent makes e a mark recorded by s's captured work.
func (c *capture) recordEvent(s *stream, e *event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("rank %d: record of a closed event", s.dev.rank)
	}
	if err := c.checkLoopStream(s, "Stream.Record"); err != nil {
		return err
	}
	mark := c.nMarks
	c.nMarks++
	c.nodes = append(c.nodes, node{stream: c.index[s], mark: mark, wait: -1})
	e.capture, e.mark = c, mark
	c.marked = append(c.marked, e)
	return nil
}

// waitEvent makes s wait for the mark e stands for; s joins the capture
// if it is not in it yet.
func (c *capture) waitEvent(s *stream, e *event) error {
	if s.dev != c.dev {
		return c.invalidate(&runtime.CaptureError{Rank: c.dev.rank, Call: "Stream.WaitEvent",
			Why: fmt.Sprintf("a stream of rank %d waits on an event captured on rank %d", s.dev.rank, c.dev.rank)})
	}
	e.mu.Lock()
	mark := e.mark
	e.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.capture {
	case nil:
		s.capture = c
		c.mu.Lock()
		c.index[s] = len(c.streams)
		c.streams = append(c.streams, s)
		c.mu.Unlock()
	case c:
	default:
		return errorf(c.dev.rank, "wait event: the stream is in another capture")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLoopStream(s, "Stream.WaitEvent"); err != nil {
		return err
	}
	if mark < len(c.sealed) && c.sealed[mark] && c.err == nil {
		c.err = &runtime.CaptureError{Rank: c.dev.rank, Call: "Stream.WaitEvent",
			Why: "the event was recorded in a loop body the device repeats, which nothing outside the body may wait on"}
	}
	if c.loop != nil && mark < c.loop.marks && c.err == nil {
		c.err = &runtime.CaptureError{Rank: c.dev.rank, Call: "Stream.WaitEvent",
			Why: "a loop body the device repeats waits on an event recorded outside it"}
	}
	c.nodes = append(c.nodes, node{stream: c.index[s], mark: -1, wait: mark})
	return c.err
}

// invalidate remembers err as the reason the capture failed and returns it.
func (c *capture) invalidate(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	return err
}

// capturing is the capture s records into, or nil.
func (s *stream) capturing() *capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capture
}

// notCapturing fails (and invalidates the capture) when s captures: call
// would wait on the host for work that has not run.
func (s *stream) notCapturing(call string) error {
	if c := s.capturing(); c != nil {
		return c.invalidate(&runtime.CaptureError{Rank: s.dev.rank, Call: call,
			Why: "the captured work runs only when the graph is launched"})
	}
	return nil
}

// notCapturing fails (and invalidates the capture) while the device has a
// capture open: call cannot be captured on GPUs.
func (d *Device) notCapturing(call string) error {
	d.mu.Lock()
	c := d.capture
	d.mu.Unlock()
	if c != nil {
		return c.invalidate(&runtime.CaptureError{Rank: d.rank, Call: call,
			Why: "it cannot be recorded in a graph (on GPUs it runs on the host, not on a stream)"})
	}
	return nil
}

// IsCapturing reports whether rs records into an open capture.
func (d *Device) IsCapturing(rs runtime.Stream) (bool, error) {
	s, err := d.stream(rs)
	if err != nil {
		return false, err
	}
	return s.capturing() != nil, nil
}

// graph is a closed capture, replayed by Launch.
type graph struct {
	dev    *Device
	id     int64
	nodes  []node
	forks  int
	nMarks int

	mu      sync.Mutex // Launch and Close
	ready   bool       // side and marks are made (at the first Launch)
	side    []*stream
	marks   []*event
	closed  bool
	replays atomic.Uint64 // advanced on the stream by each replay's first node
}

var _ runtime.Graph = (*graph)(nil)

// key keys a meeting of captured work by graph and replay; eager work
// (g nil) keeps k.
func (g *graph) key(k meetKey) meetKey {
	if g != nil {
		k.graph, k.replay = g.id+1, g.replays.Load()
	}
	return k
}

// key keys a meeting of the work running on s: by its graph replay and,
// in a loop body the device repeats, its trip.
func (s *stream) key(k meetKey) meetKey {
	k = s.replay.key(k)
	k.trip = s.trip
	return k
}

// Nodes is the number of captured operations, event edges included.
func (g *graph) Nodes() int { return countNodes(g.nodes) }

// countNodes counts a loop as one node and its body's nodes once.
func countNodes(ns []node) int {
	n := len(ns)
	for _, x := range ns {
		if x.loop != nil {
			n += countNodes(x.loop.body)
		}
	}
	return n
}

// Launch enqueues one replay on rs.
func (g *graph) Launch(rs runtime.Stream) error {
	d := g.dev
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	if s.capturing() != nil {
		return errorf(d.rank, "graph launch: the stream is capturing")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errorf(d.rank, "graph launch: the graph is closed")
	}
	if err := g.instantiate(); err != nil {
		return err
	}
	// The replay's first node advances its count; every later node of it
	// runs after (on s, or on a fork that waits on a mark recorded after).
	if err := s.enqueueLabeled(work{always: true, run: func(*stream) error {
		g.replays.Add(1)
		return nil
	}}); err != nil {
		return err
	}
	var trip uint64
	for _, n := range g.nodes {
		on := s
		if n.stream > 0 {
			on = g.side[n.stream-1]
		}
		if err := g.enqueueNode(on, n, &trip, 0); err != nil {
			return err
		}
	}
	// The forks joined the origin (checked at EndCapture), so they are done
	// here: their errors become the launch stream's, as a failed node's
	// error is the launching stream's in CUDA.
	return s.enqueueLabeled(work{always: true, run: func(*stream) error {
		var errs []error
		for _, f := range g.side {
			errs = append(errs, f.takeErr())
		}
		return errors.Join(errs...)
	}})
}

// enqueueNode enqueues node n of a replay on stream on; in is the loop
// trip n belongs to (0: none), trip counts the replay's trips so far.
func (g *graph) enqueueNode(on *stream, n node, trip *uint64, in uint64) error {
	if l := n.loop; l != nil {
		// A body is one stream's work: every node of it runs on on, trip
		// after trip, each trip's meetings with peers keyed apart.
		for range l.trips {
			*trip++
			k := *trip
			for _, b := range l.body {
				if err := g.enqueueNode(on, b, trip, k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	switch {
	case n.mark >= 0:
		e := g.marks[n.mark]
		gen, _ := e.recordOnce()
		return on.enqueueLabeled(work{always: true, ev: e, gen: gen})
	case n.wait >= 0:
		e := g.marks[n.wait]
		return on.enqueueLabeled(work{always: true, ev: e, gen: e.latest(), wait: true})
	}
	w := n.w
	w.replay, w.trip = g, in
	return on.enqueueLabeled(w)
}

// instantiate makes the forks' streams and the marks' events, once.
func (g *graph) instantiate() error {
	if g.ready {
		return nil
	}
	for range g.forks {
		if g.dev.rt.isClosed() {
			return ErrClosed
		}
		g.side = append(g.side, newStream(g.dev, false))
	}
	g.marks = make([]*event, g.nMarks)
	for i := range g.marks {
		g.marks[i] = &event{rtClosed: g.dev.rt.closed}
	}
	g.ready = true
	return nil
}

// Close stops the graph's streams once their work has run.
func (g *graph) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	g.dev.rt.liveGraphs.Add(-1)
	var errs []error
	for _, f := range g.side {
		errs = append(errs, f.Close())
	}
	g.side, g.marks = nil, nil
	return errors.Join(errs...)
}

// takeErr returns and clears the stream's error (its work is known to
// have run).
func (s *stream) takeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.err
	s.err = nil
	return err
}

// LiveGraphs counts the graphs EndCapture made that are not closed yet.
func (rt *Runtime) LiveGraphs() int { return int(rt.liveGraphs.Load()) }
