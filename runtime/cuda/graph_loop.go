package cuda

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

var _ runtime.LoopCapturer = (*gpuDevice)(nil)

const (
	graphNodeTypeConditional = 13 // CU_GRAPH_NODE_TYPE_CONDITIONAL
	graphCondTypeWhile       = 1  // CU_GRAPH_COND_TYPE_WHILE
	graphCondAssignDefault   = 1  // CU_GRAPH_COND_ASSIGN_DEFAULT
	streamSetCaptureDeps     = 1  // CU_STREAM_SET_CAPTURE_DEPENDENCIES
)

// graphNodeParams is CUgraphNodeParams (256 bytes) holding a
// CUDA_CONDITIONAL_NODE_PARAMS at offset 16.
type graphNodeParams struct {
	typ       int32
	_         [3]int32
	handle    uint64   // CUgraphConditionalHandle
	condType  int32    // CUgraphConditionalNodeType
	size      uint32   // body graphs: 1 for WHILE
	bodiesOut *uintptr // CUgraph*: the driver's array of body graphs
	ctx       uintptr
	_         [25]int64
	_         int64
}

// openLoop is a body being captured.
type openLoop struct {
	s      *stream
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

func (d *gpuDevice) loopNext() (*Function, error) {
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
				image, err := compile(kernels.GraphLoop, "hir_graph_loop.cu", d.info.ComputeCapability, opts...)
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
		k.err = fmt.Errorf("cuda: rank %d: the device-loop kernel: %w", d.opts.Rank, errors.Join(errs...))
	})
	return k.fn, k.err
}

// LoopSupport says why this device cannot capture device loops: a driver
// without conditional graph nodes, or the trip kernel not compiling.
func (d *gpuDevice) LoopSupport() error {
	if !d.drv.GraphConditionalHandleCreate.Resolved() || !d.drv.StreamBeginCaptureToGraph.Resolved() ||
		!d.drv.GraphAddNode.Resolved() || !d.drv.StreamGetCaptureInfo.Resolved() {
		return fmt.Errorf("cuda: rank %d: the driver has no conditional graph nodes (CUDA 12.4 or later)", d.opts.Rank)
	}
	_, err := d.loopNext()
	return err
}

// BeginLoop starts a loop body on rs, which captures: what is enqueued on
// rs until EndLoop runs trips times where the loop stands in the graph.
func (d *gpuDevice) BeginLoop(rs runtime.Stream, trips int64) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	if trips < 1 {
		return fmt.Errorf("cuda: rank %d: begin loop: %d trips (at least 1)", d.opts.Rank, trips)
	}
	d.mu.Lock()
	c := d.capture
	d.mu.Unlock()
	if c == nil {
		return fmt.Errorf("cuda: rank %d: begin loop: the stream is not capturing", d.opts.Rank)
	}
	if c.loop != nil {
		return fmt.Errorf("cuda: rank %d: begin loop: inside another loop's body (device loops do not nest)", d.opts.Rank)
	}
	if err := d.LoopSupport(); err != nil { // the kernel compiled before the graph changes
		return err
	}
	l := openLoop{s: s, parent: s.h, trips: uint64(trips)}
	err = d.withCtx(func() error {
		// relaxed capture allows the allocation; the graph frees it
		if err := d.drv.MemAlloc.Call2(uintptr(unsafe.Pointer(&l.trip)), 8); err != nil {
			return err
		}
		c.counters = append(c.counters, l.trip)
		if err := d.drv.MemsetD8Async.Call4(l.trip, 0, 8, s.h); err != nil {
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
		if err := d.drv.StreamGetCaptureInfo.Call(s.h, uintptr(unsafe.Pointer(&status)), uintptr(unsafe.Pointer(&id)),
			uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&edges)), uintptr(unsafe.Pointer(&n))); err != nil {
			return err
		}
		if status != captureStatusActive {
			return errors.New("the stream is not capturing")
		}
		if err := d.drv.GraphConditionalHandleCreate.Call(uintptr(unsafe.Pointer(&l.handle)), graph, d.ctx, 1, graphCondAssignDefault); err != nil {
			return err
		}
		p := graphNodeParams{typ: graphNodeTypeConditional, handle: l.handle, condType: graphCondTypeWhile, size: 1, ctx: d.ctx}
		var node uintptr
		if err := d.drv.GraphAddNode.Call(uintptr(unsafe.Pointer(&node)), graph, deps, edges, n, uintptr(unsafe.Pointer(&p))); err != nil {
			return err
		}
		if p.bodiesOut == nil {
			return errors.New("the driver returned no body graph")
		}
		bodyGraph := *p.bodiesOut
		if err := d.drv.StreamUpdateCaptureDependencies.Call4(s.h, uintptr(unsafe.Pointer(&node)), 1, streamSetCaptureDeps); err != nil {
			return err
		}
		body, err := d.bodyStream()
		if err != nil {
			return err
		}
		l.body = body
		return d.drv.StreamBeginCaptureToGraph.Call(body, bodyGraph, 0, 0, 0, captureModeRelaxed)
	})
	if err != nil {
		err = fmt.Errorf("cuda: rank %d: begin loop: %w", d.opts.Rank, err)
		d.failCapture(err)
		return err
	}
	c.loop = &l
	s.h = l.body // until EndLoop, the stream's work goes into the body
	return nil
}

// EndLoop closes the loop body begun on rs: the trip kernel, then the end
// of the body's capture.
func (d *gpuDevice) EndLoop(rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	d.mu.Lock()
	c := d.capture
	d.mu.Unlock()
	if c == nil || c.loop == nil || c.loop.s != s {
		return fmt.Errorf("cuda: rank %d: end loop: no loop body was begun on this stream", d.opts.Rank)
	}
	l := c.loop
	c.loop = nil
	s.h = l.parent
	fn, err := d.loopNext()
	if err != nil {
		return err
	}
	handle, trip, trips := l.handle, l.trip, l.trips
	params := [3]unsafe.Pointer{unsafe.Pointer(&handle), unsafe.Pointer(&trip), unsafe.Pointer(&trips)}
	err = d.withCtx(func() error {
		launchErr := d.drv.LaunchKernel.Call11(fn.h, 1, 1, 1, 1, 1, 1, 0, l.body, uintptr(unsafe.Pointer(&params[0])), 0)
		var g uintptr
		return errors.Join(launchErr, d.drv.StreamEndCapture.Call2(l.body, uintptr(unsafe.Pointer(&g))))
	})
	if err != nil {
		err = fmt.Errorf("cuda: rank %d: end loop: %w", d.opts.Rank, err)
		d.failCapture(err)
	}
	return err
}

// abandonLoop ends the capture of a body left open (a capture ending
// with an error) and gives its stream its handle back.
func (d *gpuDevice) abandonLoop(c *captureState) {
	l := c.loop
	c.loop = nil
	l.s.h = l.parent
	var g uintptr
	d.withCtx(func() error { return d.drv.StreamEndCapture.Call2(l.body, uintptr(unsafe.Pointer(&g))) })
}

// bodyStream is the stream loop bodies are captured on (made once,
// destroyed with the device).
func (d *gpuDevice) bodyStream() (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loopStream == 0 {
		if err := d.drv.StreamCreate.Call2(uintptr(unsafe.Pointer(&d.loopStream)), streamNonBlocking); err != nil {
			return 0, err
		}
	}
	return d.loopStream, nil
}

// failCapture makes the open capture fail with err (its first error).
func (d *gpuDevice) failCapture(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.capture; c != nil && c.err == nil {
		c.err = err
	}
}

// closeLoops destroys the body streams and the trip kernel's module.
func (d *gpuDevice) closeLoops() error {
	var errs []error
	if d.loopStream != 0 {
		errs = append(errs, d.drv.StreamDestroy.Call1(d.loopStream))
		d.loopStream = 0
	}
	if d.loop.mod != nil {
		errs = append(errs, d.loop.mod.Unload())
		d.loop.mod = nil
	}
	return errors.Join(errs...)
}
