package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/fdpass"
	"github.com/hirlab/hir/runtime/store"
)

// Options open one rank of a job on one GPU.
type Options struct {
	Rank, WorldSize int
	// Device is the CUDA device ordinal this rank uses.
	Device int
	// Store is the job's rendezvous store; required when WorldSize > 1.
	// The runtime does not close it.
	Store *store.Client
	// Token is the job token; peers must prove it on the fd-exchange socket.
	Token string
	// Timeout bounds every wait for peers (0: runtime.DefaultTimeout).
	Timeout time.Duration
	// NoFabric keeps symmetric allocations on POSIX fds even where fabric
	// handles work (tests of the fd path, and HIR_CUDA_FABRIC=0).
	NoFabric bool
	// Tuning is the rank's tuning knobs; nil: TuningFromEnv() when the
	// device opens (knobs.go).
	Tuning *Tuning
	// Stalled hears of a host barrier that has waited StallAfter for its
	// peers (runtime.Config.Stalled; 0: runtime.DefaultStallAfter).
	Stalled    func(runtime.Stall)
	StallAfter time.Duration
}

// gpuDevice is one rank's GPU: its context, memory, streams, kernels and graphs.
//
// Threading: CUDA keeps a "current context" per OS thread, and Go moves
// goroutines between threads at will. Every driver call sequence of a
// Device therefore runs inside withCtx, which locks the goroutine to its
// thread, makes the device's primary context current on it and unlocks
// afterwards. cuCtxSetCurrent only writes a thread-local, so doing it on
// every entry costs nanoseconds, and no state ties a goroutine to a thread
// between calls. Several Devices (one per GPU) may live in one process.
type gpuDevice struct {
	exchangeSeq atomic.Uint64 // Exchange calls so far: each names its store keys
	drv         *driver
	opts        Options
	tune        Tuning // the knobs: opts.Tuning, else the environment's (knobs.go)
	info        DeviceInfo
	dev         int32
	ctx         uintptr

	granularity  uint64
	handleTypes  atomic.Int32 // requested on cuMemCreate
	fabricOK     atomic.Bool  // fabric export worked (or not tried yet)
	fabricImport atomic.Bool  // fabric import worked (or not tried yet)
	// How peers' shards were imported, for tests and reports.
	fabricImports, fdImports atomic.Int64
	fdx                      *fdpass.Exchange // nil for a world of one
	def                      *stream

	nextID   atomic.Uint64
	symSeq   atomic.Uint64
	barrierN atomic.Uint64

	mu      sync.Mutex
	live    map[uint64]*buffer // allocations (not views) not yet freed
	streams map[*stream]bool
	events  map[*event]bool
	closed  bool
	capture *captureState // an open graph capture (graph.go)

	copyOnce   sync.Once
	copyKernel *copyKernels
	copyErr    error

	kernels    kernelTable // kernels loaded on the device (kernelcache.go)
	upper      upperLayer  // the layers above: collectives' faults and channels
	bounce     readBounce // pinned memory ReadToHost reads through (readhost.go)
	loop       loopKernel // device loops in graph mode (graph_loop.go)
	loopStream uintptr    // the stream loop bodies are captured on (made at the first)


	// Counters of live driver objects; teardown must bring them to zero.
	liveHandles      atomic.Int64 // cuMemCreate / import, not yet released
	liveMappings     atomic.Int64 // cuMemMap, not yet unmapped
	liveReservations atomic.Int64 // cuMemAddressReserve, not yet freed
	openFDs          atomic.Int64 // exported or received fds not yet closed
	liveModules      atomic.Int64
	liveGraphs       atomic.Int64 // instantiated graphs not yet closed
}

func (d *gpuDevice) Rank() int      { return d.opts.Rank }
func (d *gpuDevice) WorldSize() int { return d.opts.WorldSize }

// Info is the probe's view of this device.
func (d *gpuDevice) Info() DeviceInfo { return d.info }

// newGPUDevice is a device not yet opened, with opts's tuning knobs, else
// the environment's.
func newGPUDevice(opts Options, info DeviceInfo) *gpuDevice {
	drv, _ := loadDriver()
	d := &gpuDevice{drv: drv, opts: opts, info: info, live: map[uint64]*buffer{},
		streams: map[*stream]bool{}, events: map[*event]bool{}}
	if opts.Tuning != nil {
		d.tune = *opts.Tuning
	} else {
		d.tune = TuningFromEnv()
	}
	return d
}

// withCtx runs f on a locked OS thread with the device's context current.
func (d *gpuDevice) withCtx(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := d.drv.setCurrent(d.ctx); err != nil {
		return err
	}
	return f()
}

func (d *gpuDevice) open() error {
	var err error
	if d.dev, err = d.drv.deviceGet(d.opts.Device); err != nil {
		return err
	}
	if err := d.drv.DevicePrimaryCtxRetain.Call2(uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); err != nil {
		return err
	}
	d.fabricOK.Store(d.info.Fabric && !d.opts.NoFabric)
	d.fabricImport.Store(true)
	d.handleTypes.Store(handleTypePosix)
	if d.fabricOK.Load() {
		d.handleTypes.Store(handleTypePosix | handleTypeFabric)
	}
	err = d.withCtx(func() error {
		prop := d.allocProp(d.handleTypes.Load())
		g, err := d.drv.granularity(&prop, memAllocGranularityRecommended)
		if err != nil && d.handleTypes.Load() != handleTypePosix {
			// The driver may refuse the fabric type outright: fall back.
			d.fabricOK.Store(false)
			d.handleTypes.Store(handleTypePosix)
			prop = d.allocProp(d.handleTypes.Load())
			g, err = d.drv.granularity(&prop, memAllocGranularityRecommended)
		}
		d.granularity = g
		return err
	})
	if err != nil {
		return err
	}
	if d.def, err = d.newStream(true); err != nil {
		return err
	}
	if d.opts.WorldSize == 1 {
		return nil
	}
	if d.fdx, err = fdpass.Listen(d.opts.Rank, d.opts.WorldSize, d.opts.Token); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	paths, err := store.ExchangeAll(ctx, d.opts.Store, "cuda/sockets", d.opts.Rank, d.opts.WorldSize, []byte(d.fdx.Path()), d.opts.Timeout)
	if err != nil {
		return err
	}
	ps := make([]string, len(paths))
	for i, p := range paths {
		ps[i] = string(p)
	}
	if err := d.fdx.Connect(ps, d.opts.Timeout); err != nil {
		return err
	}
	// Every rank has dialled every other before anyone sends a handle.
	if err := d.storeBarrier("cuda/connected"); err != nil {
		return err
	}
	// Nobody dials again: remove the socket's name now, so a rank killed
	// later (Ctrl-C, a failed peer) leaves no file behind.
	os.Remove(d.fdx.Path())
	return nil
}

func (d *gpuDevice) allocProp(handleTypes int32) memAllocationProp {
	return memAllocationProp{Type: memAllocationTypePinned, RequestedHandleTypes: handleTypes,
		Location: memLocation{Type: memLocationTypeDevice, ID: d.dev}}
}

func (d *gpuDevice) storeBarrier(name string) error {
	if d.opts.WorldSize == 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	return d.opts.Store.Barrier(ctx, name, d.opts.Rank, d.opts.WorldSize, d.opts.Timeout)
}

// Stats counts the driver objects and descriptors the device holds.
type Stats struct {
	Allocations  int // allocations not yet freed (global, host, symmetric)
	Handles      int64
	Mappings     int64
	Reservations int64
	OpenFDs      int64 // exported/received descriptors not yet closed, incl. unclaimed ones
	Modules      int64
	Graphs       int64 // instantiated graphs not yet closed
	Streams      int
	Events       int
	Channels     int // collective channels held by open streams (16 at most)
}

// Stats reports what is live but the collectives' channels (Device.Stats).
func (d *gpuDevice) Stats() Stats {
	d.mu.Lock()
	s := Stats{Allocations: len(d.live), Streams: len(d.streams), Events: len(d.events)}
	d.mu.Unlock()
	s.Handles, s.Mappings, s.Reservations = d.liveHandles.Load(), d.liveMappings.Load(), d.liveReservations.Load()
	s.OpenFDs, s.Modules, s.Graphs = d.openFDs.Load(), d.liveModules.Load(), d.liveGraphs.Load()
	if d.fdx != nil {
		s.OpenFDs += int64(d.fdx.Pending())
	}
	return s
}

// MemInfo is cuMemGetInfo for this device.
func (d *gpuDevice) MemInfo() (free, total uint64, err error) {
	err = d.withCtx(func() error {
		free, total, err = d.drv.memGetInfo()
		return err
	})
	return
}

// Barrier waits for the stream's work, then for every rank.
func (d *gpuDevice) Barrier(s runtime.Stream) error {
	if err := d.refuseInCapture("Barrier", whyHost); err != nil {
		return err
	}
	if s == nil {
		s = d.def
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	n := d.barrierN.Add(1)
	if err := d.stalledBarrier(fmt.Sprintf("cuda/barrier/%d", n), fmt.Sprintf("barrier #%d", n)); err != nil {
		return fmt.Errorf("rank %d: barrier #%d: %w", d.opts.Rank, n, err)
	}
	return nil
}

// stalledBarrier is storeBarrier telling Options.Stalled, once, of a wait
// that lasts StallAfter, with the ranks not yet arrived (what names the
// wait). The op that waits is the caller's to know: the host is in it.
func (d *gpuDevice) stalledBarrier(name, what string) error {
	watch := runtime.Config{Timeout: d.opts.Timeout, Stalled: d.opts.Stalled, StallAfter: d.opts.StallAfter}.StallWatch()
	if d.opts.WorldSize == 1 || watch == nil {
		return d.storeBarrier(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	return d.opts.Store.BarrierStalled(ctx, name, d.opts.Rank, d.opts.WorldSize, d.opts.Timeout, watch.After, func(missing []int) {
		watch.Report(runtime.Stall{Rank: d.opts.Rank, What: what, Waited: watch.After, Waiting: missing})
	})
}

// upperLayer is what the device tells the layers above it (the
// collectives) of: a synchronisation's result, to which a fault they saw is
// added, and a stream closed, whose channels they release.
type upperLayer interface {
	commCheck(err error) error
	streamClosed(s *stream)
}

// close frees everything the device holds: beforeRelease runs once the
// context is synchronised, before any buffer is released (the
// collectives' teardown); last after the kernel table is unloaded, with
// the context still held (the BLAS handle).
func (d *gpuDevice) close(beforeRelease, last func() error) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	bufs := make([]*buffer, 0, len(d.live))
	for _, b := range d.live {
		bufs = append(bufs, b)
	}
	streams := make([]*stream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	events := make([]*event, 0, len(d.events))
	for e := range d.events {
		events = append(events, e)
	}
	d.mu.Unlock()

	var errs []error
	if d.ctx != 0 {
		errs = append(errs, d.withCtx(d.drv.ctxSynchronize))
		errs = append(errs, beforeRelease())
		for _, b := range bufs {
			errs = append(errs, d.release(b))
		}
		for _, e := range events {
			errs = append(errs, e.destroy())
		}
		for _, s := range streams {
			errs = append(errs, s.destroy())
		}
		if d.copyKernel != nil {
			errs = append(errs, d.copyKernel.mod.Unload())
		}
		errs = append(errs, d.withCtx(d.closeLoops), d.closeBounce())
		errs = append(errs, d.closeKernels(), last())
	}
	if d.fdx != nil {
		errs = append(errs, d.fdx.Close())
	}
	if d.ctx != 0 {
		errs = append(errs, d.drv.DevicePrimaryCtxRelease.Call1(uintptr(d.dev)))
		d.ctx = 0
	}
	return errors.Join(errs...)
}

func (d *gpuDevice) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: rank %d: runtime closed", d.opts.Rank)
	}
	return nil
}

// ImportCounts says how peers' shards were imported so far: through
// fabric handles (published in the store) or POSIX fds (over the Unix
// socket). Fabric is tried first where the driver offers it; the first
// failure switches this rank to fds for good.
func (d *gpuDevice) ImportCounts() (fabric, posixFD int64) {
	return d.fabricImports.Load(), d.fdImports.Load()
}

