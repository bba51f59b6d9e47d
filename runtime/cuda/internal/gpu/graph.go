package gpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// Graph mode (runtime.Capturer) through CUDA stream capture: BeginCapture
// puts the stream in relaxed capture mode (the rank's calls may come from
// any OS thread), every launch, copy, memset, event record and wait the
// evaluator enqueues becomes a node, streams that wait on a captured event
// join as forks, and EndCapture instantiates the graph. A replay is one
// cuGraphLaunch.
//
// The symmetric-memory collectives and send/recv take their signal values
// from counters on the device (take_count in kernels/collective.cu), so
// every replay synchronises with fresh values; NCCL's collectives
// (algo=nccl) capture as NCCL supports. What a graph cannot hold (a wait
// on the host, Alloc, Free, Barrier, Exchange) is refused while a capture
// is open, with a *runtime.CaptureError that also fails the capture.

const (
	captureModeRelaxed  = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
	captureStatusActive = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
)

var _ runtime.Capturer = (*Device)(nil)

// captureState is the device's open capture, if any (under Device.mu).
type captureState struct {
	origin   *Stream
	err      error     // the first refused call: the capture fails with it
	loop     *openLoop // the loop body being captured (graph_loop.go)
	counters []uintptr // device loops' trip counts: the graph frees them
}

// BeginCapture starts capturing the work enqueued on rs.
func (d *Device) BeginCapture(rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	d.Mu.Lock()
	if d.Capture != nil {
		d.Mu.Unlock()
		return fmt.Errorf("cuda: rank %d: begin capture: a capture is already open on this rank", d.Opts.Rank)
	}
	d.Capture = &captureState{origin: s}
	d.Mu.Unlock()
	if err := d.WithCtx(func() error { return d.Drv.StreamBeginCapture.Call2(s.H, captureModeRelaxed) }); err != nil {
		d.Mu.Lock()
		d.Capture = nil
		d.Mu.Unlock()
		return fmt.Errorf("cuda: rank %d: begin capture: %w", d.Opts.Rank, err)
	}
	return nil
}

// EndCapture ends the capture begun on rs and instantiates its graph.
func (d *Device) EndCapture(rs runtime.Stream) (runtime.Graph, error) {
	s, err := d.Stream(rs)
	if err != nil {
		return nil, err
	}
	d.Mu.Lock()
	c := d.Capture
	if c == nil || c.origin != s {
		d.Mu.Unlock()
		return nil, fmt.Errorf("cuda: rank %d: end capture: no capture was begun on this stream", d.Opts.Rank)
	}
	d.Capture = nil
	d.Mu.Unlock()
	g := &graph{dev: d, counters: c.counters}
	if c.loop != nil {
		d.abandonLoop(c)
		if c.err == nil {
			c.err = fmt.Errorf("cuda: rank %d: end capture: a loop body begun in it was not ended (EndLoop)", d.Opts.Rank)
		}
	}
	err = d.WithCtx(func() error {
		endErr := d.Drv.StreamEndCapture.Call2(s.H, uintptr(unsafe.Pointer(&g.graph)))
		if endErr != nil || c.err != nil {
			return errors.Join(c.err, endErr)
		}
		if err := d.Drv.GraphInstantiateWithFlags.Call3(uintptr(unsafe.Pointer(&g.exec)), g.graph, 0); err != nil {
			return err
		}
		var n uintptr
		if err := d.Drv.GraphGetNodes.Call3(g.graph, 0, uintptr(unsafe.Pointer(&n))); err != nil {
			return err
		}
		g.nodes = int(n)
		return nil
	})
	if err != nil {
		g.destroy()
		if c.err != nil {
			return nil, c.err
		}
		return nil, fmt.Errorf("cuda: rank %d: end capture: %w", d.Opts.Rank, err)
	}
	d.liveGraphs.Add(1)
	return g, nil
}

// IsCapturing reports whether rs records into an open capture.
func (d *Device) IsCapturing(rs runtime.Stream) (bool, error) {
	s, err := d.Stream(rs)
	if err != nil {
		return false, err
	}
	var status int32
	err = d.WithCtx(func() error { return d.Drv.StreamIsCapturing.Call2(s.H, uintptr(unsafe.Pointer(&status))) })
	return status == captureStatusActive, err
}

// refuseInCapture fails call while a capture is open on this device, and
// makes the capture fail with the same error.
func (d *Device) RefuseInCapture(call, why string) error {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	c := d.Capture
	if c == nil {
		return nil
	}
	err := &runtime.CaptureError{Rank: d.Opts.Rank, Call: call, Why: why}
	if c.err == nil {
		c.err = err
	}
	return err
}

const (
	WhyHost  = "it runs on the host, not on a stream"
	whyWaits = "the captured work runs only when the graph is launched"
)

// graph is an instantiated capture.
type graph struct {
	dev         *Device
	graph, exec uintptr
	nodes       int
	closed      bool
	counters    []uintptr // device loops' trip counts (graph_loop.go)
}

var _ runtime.Graph = (*graph)(nil)

// Launch replays the graph on rs.
func (g *graph) Launch(rs runtime.Stream) error {
	d := g.dev
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	if g.closed {
		return fmt.Errorf("cuda: rank %d: graph launch: the graph is closed", d.Opts.Rank)
	}
	if err := d.WithCtx(func() error { return d.Drv.GraphLaunch.Call2(g.exec, s.H) }); err != nil {
		return fmt.Errorf("cuda: rank %d: graph launch: %w", d.Opts.Rank, err)
	}
	return nil
}

// Nodes is the number of nodes of the captured graph.
func (g *graph) Nodes() int { return g.nodes }

// Close destroys the graph; replays already launched finish first (the
// driver defers the release).
func (g *graph) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	err := g.destroy()
	g.dev.liveGraphs.Add(-1)
	return err
}

func (g *graph) destroy() error {
	d := g.dev
	return d.WithCtx(func() error {
		var errs []error
		if g.exec != 0 {
			errs = append(errs, d.Drv.GraphExecDestroy.Call1(g.exec))
			g.exec = 0
		}
		if g.graph != 0 {
			errs = append(errs, d.Drv.GraphDestroy.Call1(g.graph))
			g.graph = 0
		}
		for _, p := range g.counters {
			errs = append(errs, d.Drv.MemFree.Call1(p))
		}
		g.counters = nil
		return errors.Join(errs...)
	})
}
