package gpu

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

// gpuOptions is what the device layer keeps of Options (cuda.go): all
// but the tuning knobs, which belong to the layers above.
type Options struct {
	Rank, WorldSize, Device int
	Store                   *store.Client
	Token                   string
	Timeout                 time.Duration
	NoFabric                bool
	NoPDL                   bool // never launch with programmatic dependent launch (LaunchOwn)
	Stalled                 func(runtime.Stall)
	StallAfter              time.Duration
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
type Device struct {
	ExchangeSeq atomic.Uint64 // Exchange calls so far: each names its store keys
	Drv         *driver
	Opts        Options
	Props       DeviceInfo
	Dev         int32
	Ctx         uintptr

	Granularity  uint64
	pdl          bool         // LaunchOwn uses programmatic dependent launch (kernel.go)
	handleTypes  atomic.Int32 // requested on cuMemCreate
	fabricOK     atomic.Bool  // fabric export worked (or not tried yet)
	fabricImport atomic.Bool  // fabric import worked (or not tried yet)
	// How peers' shards were imported, for tests and reports.
	fabricImports, fdImports atomic.Int64
	Fdx                      *fdpass.Exchange // nil for a world of one
	Def                      *Stream

	NextID   atomic.Uint64
	symSeq   atomic.Uint64
	barrierN atomic.Uint64

	Mu      sync.Mutex
	Live    map[uint64]*Buffer // allocations (not views) not yet freed
	streams map[*Stream]bool
	Events  map[*Event]bool
	closed  bool
	Capture *captureState // an open graph capture (graph.go)

	copyOnce   sync.Once
	copyKernel *copyKernels
	copyErr    error

	kernels    kernelTable // kernels loaded on the device (kernelcache.go)
	Upper      UpperLayer  // the layers above: collectives' faults and channels
	bounce     readBounce  // pinned memory ReadToHost reads through (readhost.go)
	loop       loopKernel  // device loops in graph mode (graph_loop.go)
	loopStream uintptr     // the stream loop bodies are captured on (made at the first)

	// Counters of live driver objects; teardown must bring them to zero.
	LiveHandles      atomic.Int64 // cuMemCreate / import, not yet released
	LiveMappings     atomic.Int64 // cuMemMap, not yet unmapped
	LiveReservations atomic.Int64 // cuMemAddressReserve, not yet freed
	OpenFDs          atomic.Int64 // exported or received fds not yet closed
	liveModules      atomic.Int64
	liveGraphs       atomic.Int64 // instantiated graphs not yet closed
}

func (d *Device) Rank() int      { return d.Opts.Rank }
func (d *Device) WorldSize() int { return d.Opts.WorldSize }

// Info is the probe's view of this device.
func (d *Device) Info() DeviceInfo { return d.Props }

// newGPUDevice is a device not yet opened.
func New(opts Options, info DeviceInfo) *Device {
	drv, _ := LoadDriver()
	d := &Device{Drv: drv, Opts: opts, Props: info, Live: map[uint64]*Buffer{},
		streams: map[*Stream]bool{}, Events: map[*Event]bool{}}
	return d
}

// withCtx runs f on a locked OS thread with the device's context current.
func (d *Device) WithCtx(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := d.Drv.SetCurrent(d.Ctx); err != nil {
		return err
	}
	return f()
}

func (d *Device) Open() error {
	var err error
	if d.Dev, err = d.Drv.GetDevice(d.Opts.Device); err != nil {
		return err
	}
	if err := d.Drv.DevicePrimaryCtxRetain.Call2(uintptr(unsafe.Pointer(&d.Ctx)), uintptr(d.Dev)); err != nil {
		return err
	}
	d.fabricOK.Store(d.Props.Fabric && !d.Opts.NoFabric)
	d.pdl = !d.Opts.NoPDL && d.Props.ComputeCapability[0] >= 9 && d.Drv.LaunchKernelEx.Resolved()
	d.fabricImport.Store(true)
	d.handleTypes.Store(HandleTypePosix)
	if d.fabricOK.Load() {
		d.handleTypes.Store(HandleTypePosix | HandleTypeFabric)
	}
	err = d.WithCtx(func() error {
		prop := d.AllocProp(d.handleTypes.Load())
		g, err := d.Drv.granularity(&prop, memAllocGranularityRecommended)
		if err != nil && d.handleTypes.Load() != HandleTypePosix {
			// The driver may refuse the fabric type outright: fall back.
			d.fabricOK.Store(false)
			d.handleTypes.Store(HandleTypePosix)
			prop = d.AllocProp(d.handleTypes.Load())
			g, err = d.Drv.granularity(&prop, memAllocGranularityRecommended)
		}
		d.Granularity = g
		if err == nil {
			d.keepStagingPool()
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.Def, err = d.OpenStream(true); err != nil {
		return err
	}
	if d.Opts.WorldSize == 1 {
		return nil
	}
	if d.Fdx, err = fdpass.Listen(d.Opts.Rank, d.Opts.WorldSize, d.Opts.Token); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	paths, err := store.ExchangeAll(ctx, d.Opts.Store, "cuda/sockets", d.Opts.Rank, d.Opts.WorldSize, []byte(d.Fdx.Path()), d.Opts.Timeout)
	if err != nil {
		return err
	}
	ps := make([]string, len(paths))
	for i, p := range paths {
		ps[i] = string(p)
	}
	if err := d.Fdx.Connect(ps, d.Opts.Timeout); err != nil {
		return err
	}
	// Every rank has dialled every other before anyone sends a handle.
	if err := d.storeBarrier("cuda/connected"); err != nil {
		return err
	}
	// Nobody dials again: remove the socket's name now, so a rank killed
	// later (Ctrl-C, a failed peer) leaves no file behind.
	os.Remove(d.Fdx.Path())
	return nil
}

func (d *Device) AllocProp(handleTypes int32) MemAllocationProp {
	return MemAllocationProp{Type: memAllocationTypePinned, RequestedHandleTypes: handleTypes,
		Location: MemLocation{Type: memLocationTypeDevice, ID: d.Dev}}
}

func (d *Device) storeBarrier(name string) error {
	if d.Opts.WorldSize == 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	return d.Opts.Store.Barrier(ctx, name, d.Opts.Rank, d.Opts.WorldSize, d.Opts.Timeout)
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
func (d *Device) Stats() Stats {
	d.Mu.Lock()
	s := Stats{Allocations: len(d.Live), Streams: len(d.streams), Events: len(d.Events)}
	d.Mu.Unlock()
	s.Handles, s.Mappings, s.Reservations = d.LiveHandles.Load(), d.LiveMappings.Load(), d.LiveReservations.Load()
	s.OpenFDs, s.Modules, s.Graphs = d.OpenFDs.Load(), d.liveModules.Load(), d.liveGraphs.Load()
	if d.Fdx != nil {
		s.OpenFDs += int64(d.Fdx.Pending())
	}
	return s
}

// MemInfo is cuMemGetInfo for this device.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.WithCtx(func() error {
		free, total, err = d.Drv.memGetInfo()
		return err
	})
	return
}

// Barrier waits for the stream's work, then for every rank.
func (d *Device) Barrier(s runtime.Stream) error {
	if err := d.RefuseInCapture("Barrier", WhyHost); err != nil {
		return err
	}
	if s == nil {
		s = d.Def
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	n := d.barrierN.Add(1)
	if err := d.stalledBarrier(fmt.Sprintf("cuda/barrier/%d", n), fmt.Sprintf("barrier #%d", n)); err != nil {
		return fmt.Errorf("rank %d: barrier #%d: %w", d.Opts.Rank, n, err)
	}
	return nil
}

// stalledBarrier is storeBarrier telling Options.Stalled, once, of a wait
// that lasts StallAfter, with the ranks not yet arrived (what names the
// wait). The op that waits is the caller's to know: the host is in it.
func (d *Device) stalledBarrier(name, what string) error {
	watch := runtime.Config{Timeout: d.Opts.Timeout, Stalled: d.Opts.Stalled, StallAfter: d.Opts.StallAfter}.StallWatch()
	if d.Opts.WorldSize == 1 || watch == nil {
		return d.storeBarrier(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	return d.Opts.Store.BarrierStalled(ctx, name, d.Opts.Rank, d.Opts.WorldSize, d.Opts.Timeout, watch.After, func(missing []int) {
		watch.Report(runtime.Stall{Rank: d.Opts.Rank, What: what, Waited: watch.After, Waiting: missing})
	})
}

// UpperLayer is what the device tells the layers above it (the
// collectives) of: a synchronisation's result, to which a fault they saw is
// added, and a stream closed, whose channels (and cuBLAS workspace)
// they release.
type UpperLayer interface {
	CommCheck(err error) error
	StreamClosed(s *Stream) error
}

// close frees everything the device holds: beforeRelease runs once the
// context is synchronised, before any buffer is released (the
// collectives' teardown); last after the kernel table is unloaded, with
// the context still held (the BLAS handle).
func (d *Device) Close(beforeRelease, last func() error) error {
	d.Mu.Lock()
	if d.closed {
		d.Mu.Unlock()
		return nil
	}
	d.closed = true
	bufs := make([]*Buffer, 0, len(d.Live))
	for _, b := range d.Live {
		bufs = append(bufs, b)
	}
	streams := make([]*Stream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	events := make([]*Event, 0, len(d.Events))
	for e := range d.Events {
		events = append(events, e)
	}
	d.Mu.Unlock()

	var errs []error
	if d.Ctx != 0 {
		errs = append(errs, d.WithCtx(d.Drv.SyncCtx))
		errs = append(errs, beforeRelease())
		for _, b := range bufs {
			errs = append(errs, d.Release(b))
		}
		for _, e := range events {
			errs = append(errs, e.Destroy())
		}
		for _, s := range streams {
			errs = append(errs, s.Destroy())
		}
		if d.copyKernel != nil {
			errs = append(errs, d.copyKernel.mod.Unload())
		}
		errs = append(errs, d.WithCtx(d.closeLoops), d.closeBounce())
		errs = append(errs, d.closeKernels(), last())
	}
	if d.Fdx != nil {
		errs = append(errs, d.Fdx.Close())
	}
	if d.Ctx != 0 {
		errs = append(errs, d.Drv.DevicePrimaryCtxRelease.Call1(uintptr(d.Dev)))
		d.Ctx = 0
	}
	return errors.Join(errs...)
}

func (d *Device) CheckOpen() error {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: rank %d: runtime closed", d.Opts.Rank)
	}
	return nil
}

// ImportCounts says how peers' shards were imported so far: through
// fabric handles (published in the store) or POSIX fds (over the Unix
// socket). Fabric is tried first where the driver offers it; the first
// failure switches this rank to fds for good.
func (d *Device) ImportCounts() (fabric, posixFD int64) {
	return d.fabricImports.Load(), d.fdImports.Load()
}

// stagingPoolKeep is what the device's default memory pool keeps mapped
// between synchronisations. Staged (strided reads, staged collective
// inputs) allocates from that pool, which by default gives its memory
// back to the driver at every synchronisation, so every Run's first
// staging allocation mapped pages anew.
const stagingPoolKeep = 256 << 20

// memPoolAttrReleaseThreshold is CU_MEMPOOL_ATTR_RELEASE_THRESHOLD.
const memPoolAttrReleaseThreshold = 4

// keepStagingPool sets the default pool's release threshold (under
// withCtx); a driver without pools keeps its default, which is only
// slower.
func (d *Device) keepStagingPool() {
	var pool uintptr
	if d.Drv.DeviceGetDefaultMemPool.Call2(uintptr(unsafe.Pointer(&pool)), uintptr(d.Dev)) != nil || pool == 0 {
		return
	}
	keep := uint64(stagingPoolKeep)
	_ = d.Drv.MemPoolSetAttribute.Call3(pool, memPoolAttrReleaseThreshold, uintptr(unsafe.Pointer(&keep)))
}
