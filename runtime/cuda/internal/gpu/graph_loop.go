package gpu

import (
	"errors"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/kernels"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// Device loops (runtime.LoopCapturer): a loop body captured once into the
// body graph of a WHILE conditional node (CUDA 12.4 and later), which the
// device runs while hir_loop_next (kernels/graph_loop.cu), launched at the
// end of the body, says trips remain. The trip count lives in 8 bytes of
// device memory that a memset node zeroes before the loop, so every
// replay starts at the first trip.
//
// BeginLoop adds the node after the capturing stream's current work
// (cuStreamGetCaptureInfo, cuGraphAddNode, cuStreamUpdateCaptureDependencies)
// and starts capturing a stream of its own into the body graph
// (cuStreamBeginCaptureToGraph); until EndLoop the stream's handle is that
// body stream's, so everything enqueued on the stream lands in the body
// and the callers (the evaluator, the pool) keep one stream. Bodies do not
// nest (runtime.LoopCapturer).

var _ runtime.LoopCapturer = (*Device)(nil)

const (
	graphNodeTypeConditional = 13 // CU_GRAPH_NODE_TYPE_CONDITIONAL
	graphCondTypeWhile       = 1  // CU_GRAPH_COND_TYPE_WHILE
	graphCondAssignDefault   = 1  // CU_GRAPH_COND_ASSIGN_DEFAULT
	streamSetCaptureDeps     = 1  // CU_STREAM_SET_CAPTURE_DEPENDENCIES
)

// graphNodeParams is CUgraphNodeParams (256 bytes) holding a
// CUDA_CONDITIONAL_NODE_PARAMS at offset 16.
type GraphNodeParams struct {
	typ       int32
	_         [3]int32
	Handle    uint64   // CUgraphConditionalHandle
	CondType  int32    // CUgraphConditionalNodeType
	Size      uint32   // body graphs: 1 for WHILE
	BodiesOut *uintptr // CUgraph*: the driver's array of body graphs
	Ctx       uintptr
	_         [25]int64
	_         int64
}

// openLoop is a body being captured.
type openLoop struct {
	s      *Stream
	parent uintptr // the stream's handle before the body
	body   uintptr // the body stream, capturing into the body graph
	handle uint64
	trip   uintptr // the trip count on the device
	trips  uint64
}

// loopKernel is hir_loop_next, compiled once per device.
type loopKernel struct {
	once sync.Once
	mod  *Module
	fn   *Function
	err  error
}

func (d *Device) loopNext() (*Function, error) {
	k := &d.loop
	k.once.Do(func() {
		// NVRTC to a cubin, ptxas resolving the device runtime's setter;
		// else to PTX, which the driver finishes at load. Each with the
		// setter declared by the source, then by NVRTC's own headers.
		var errs []error
		for _, ptx := range []bool{false, true} {
			for _, opts := range [][]string{nil, {"-DHIR_BUILTIN_SET_CONDITIONAL", "-include", "cuda_device_runtime_api.h"}} {
				compile := CompileCUDA
				if ptx {
					compile = CompileCUDAToPTX
				}
				image, err := compile(kernels.GraphLoop, "hir_graph_loop.cu", d.Props.ComputeCapability, opts...)
				if err == nil {
					if ptx {
						image = append(image, 0)
					}
					if k.mod, err = d.LoadModule(image); err == nil {
						if k.fn, err = k.mod.Function("hir_loop_next"); err == nil {
							return
						}
						k.mod.Unload()
						k.mod = nil
					}
				}
				errs = append(errs, err)
			}
		}
		k.err = fmt.Errorf("cuda: rank %d: the device-loop kernel: %w", d.Opts.Rank, errors.Join(errs...))
	})
	return k.fn, k.err
}

// LoopSupport says why this device cannot capture device loops: a driver
// without conditional graph nodes, or the trip kernel not compiling.
func (d *Device) LoopSupport() error {
	if !d.Drv.GraphConditionalHandleCreate.Resolved() || !d.Drv.StreamBeginCaptureToGraph.Resolved() ||
		!d.Drv.GraphAddNode.Resolved() || !d.Drv.StreamGetCaptureInfo.Resolved() {
		return fmt.Errorf("cuda: rank %d: the driver has no conditional graph nodes (CUDA 12.4 or later)", d.Opts.Rank)
	}
	_, err := d.loopNext()
	return err
}

// BeginLoop starts a loop body on rs, which captures: what is enqueued on
// rs until EndLoop runs trips times where the loop stands in the graph.
func (d *Device) BeginLoop(rs runtime.Stream, trips int64) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	if trips < 1 {
		return fmt.Errorf("cuda: rank %d: begin loop: %d trips (at least 1)", d.Opts.Rank, trips)
	}
	d.Mu.Lock()
	c := d.Capture
	d.Mu.Unlock()
	if c == nil {
		return fmt.Errorf("cuda: rank %d: begin loop: the stream is not capturing", d.Opts.Rank)
	}
	if c.loop != nil {
		return fmt.Errorf("cuda: rank %d: begin loop: inside another loop's body (device loops do not nest)", d.Opts.Rank)
	}
	if err := d.LoopSupport(); err != nil { // the kernel compiled before the graph changes
		return err
	}
	l := openLoop{s: s, parent: s.H, trips: uint64(trips)}
	err = d.WithCtx(func() error {
		// relaxed capture allows the allocation; the graph frees it
		if err := d.Drv.MemAlloc.Call2(uintptr(unsafe.Pointer(&l.trip)), 8); err != nil {
			return err
		}
		c.counters = append(c.counters, l.trip)
		if err := d.Drv.MemsetD8Async.Call4(l.trip, 0, 8, s.H); err != nil {
			return err
		}
		var (
			status int32
			id     uint64
			graph  uintptr
			deps   uintptr // const CUgraphNode*
			edges  uintptr // const CUgraphEdgeData*
			n      uintptr
		)
		if err := d.Drv.StreamGetCaptureInfo.Call(s.H, uintptr(unsafe.Pointer(&status)), uintptr(unsafe.Pointer(&id)),
			uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&edges)), uintptr(unsafe.Pointer(&n))); err != nil {
			return err
		}
		if status != captureStatusActive {
			return errors.New("the stream is not capturing")
		}
		if err := d.Drv.GraphConditionalHandleCreate.Call(uintptr(unsafe.Pointer(&l.handle)), graph, d.Ctx, 1, graphCondAssignDefault); err != nil {
			return err
		}
		p := GraphNodeParams{typ: graphNodeTypeConditional, Handle: l.handle, CondType: graphCondTypeWhile, Size: 1, Ctx: d.Ctx}
		var node uintptr
		if err := d.Drv.GraphAddNode.Call(uintptr(unsafe.Pointer(&node)), graph, deps, edges, n, uintptr(unsafe.Pointer(&p))); err != nil {
			return err
		}
		if p.BodiesOut == nil {
			return errors.New("the driver returned no body graph")
		}
		bodyGraph := *p.BodiesOut
		if err := d.Drv.StreamUpdateCaptureDependencies.Call4(s.H, uintptr(unsafe.Pointer(&node)), 1, streamSetCaptureDeps); err != nil {
			return err
		}
		body, err := d.bodyStream()
		if err != nil {
			return err
		}
		l.body = body
		return d.Drv.StreamBeginCaptureToGraph.Call(body, bodyGraph, 0, 0, 0, captureModeRelaxed)
	})
	if err != nil {
		err = fmt.Errorf("cuda: rank %d: begin loop: %w", d.Opts.Rank, err)
		d.failCapture(err)
		return err
	}
	c.loop = &l
	s.H = l.body // until EndLoop, the stream's work goes into the body
	return nil
}

// EndLoop closes the loop body begun on rs: the trip kernel, then the end
// of the body's capture.
func (d *Device) EndLoop(rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	d.Mu.Lock()
	c := d.Capture
	d.Mu.Unlock()
	if c == nil || c.loop == nil || c.loop.s != s {
		return fmt.Errorf("cuda: rank %d: end loop: no loop body was begun on this stream", d.Opts.Rank)
	}
	l := c.loop
	c.loop = nil
	s.H = l.parent
	fn, err := d.loopNext()
	if err != nil {
		return err
	}
	handle, trip, trips := l.handle, l.trip, l.trips
	params := [3]unsafe.Pointer{unsafe.Pointer(&handle), unsafe.Pointer(&trip), unsafe.Pointer(&trips)}
	err = d.WithCtx(func() error {
		launchErr := d.Drv.LaunchKernel.Call11(fn.H, 1, 1, 1, 1, 1, 1, 0, l.body, uintptr(unsafe.Pointer(&params[0])), 0)
		var g uintptr
		return errors.Join(launchErr, d.Drv.StreamEndCapture.Call2(l.body, uintptr(unsafe.Pointer(&g))))
	})
	if err != nil {
		err = fmt.Errorf("cuda: rank %d: end loop: %w", d.Opts.Rank, err)
		d.failCapture(err)
	}
	return err
}

// abandonLoop ends the capture of a body left open (a capture ending
// with an error) and gives its stream its handle back.
func (d *Device) abandonLoop(c *captureState) {
	l := c.loop
	c.loop = nil
	l.s.H = l.parent
	var g uintptr
	d.WithCtx(func() error { return d.Drv.StreamEndCapture.Call2(l.body, uintptr(unsafe.Pointer(&g))) })
}

// bodyStream is the stream loop bodies are captured on (made once,
// destroyed with the device).
func (d *Device) bodyStream() (uintptr, error) {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	if d.loopStream == 0 {
		if err := d.Drv.StreamCreate.Call2(uintptr(unsafe.Pointer(&d.loopStream)), streamNonBlocking); err != nil {
			return 0, err
		}
	}
	return d.loopStream, nil
}

// failCapture makes the open capture fail with err (its first error).
func (d *Device) failCapture(err error) {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	if c := d.Capture; c != nil && c.err == nil {
		c.err = err
	}
}

// closeLoops destroys the body streams and the trip kernel's module.
func (d *Device) closeLoops() error {
	var errs []error
	if d.loopStream != 0 {
		errs = append(errs, d.Drv.StreamDestroy.Call1(d.loopStream))
		d.loopStream = 0
	}
	if d.loop.mod != nil {
		errs = append(errs, d.loop.mod.Unload())
		d.loop.mod = nil
	}
	return errors.Join(errs...)
}
