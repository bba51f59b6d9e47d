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
	"github.com/hirlab/hir/runtime/launch"
	"github.com/hirlab/hir/runtime/store"
)

func init() {
	runtime.Register("cuda", Open)
}

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

// Open is the "cuda" backend's runtime.Factory: one rank per process. The
// rank, world and store come from the launcher's environment
// (launch.FromEnv: hirrun, torchrun or srun) where cfg leaves them open;
// a single process with no launcher variables is a world of one.
func Open(cfg runtime.Config) (runtime.Runtime, error) {
	p := Probe()
	if !p.Available {
		return nil, fmt.Errorf("cuda backend unavailable: %s", p.Unavailable())
	}
	opts, rv, err := optionsFromEnv(cfg)
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	rt, err := New(opts)
	if err != nil {
		if rv != nil {
			rv.Close(context.Background())
		}
		return nil, err
	}
	if rv != nil {
		rt.closeStore = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
			defer cancel()
			return rv.Close(ctx)
		}
		rt.abortStore = rv.Abort
	}
	return rt, nil
}

func optionsFromEnv(cfg runtime.Config) (Options, *launch.Rendezvous, error) {
	o := Options{Rank: cfg.Rank, WorldSize: cfg.WorldSize, Timeout: cfg.EffectiveTimeout(),
		NoFabric: os.Getenv("HIR_CUDA_FABRIC") == "0", Stalled: cfg.Stalled, StallAfter: cfg.StallAfter}
	env, launched, err := launch.FromEnv()
	if err != nil {
		return o, nil, err
	}
	if !launched {
		if cfg.WorldSize > 1 {
			return o, nil, fmt.Errorf("the cuda runtime runs one rank per process: start the %d ranks with hirrun --backend cuda, torchrun or srun (RANK is not set)", cfg.WorldSize)
		}
		env = launch.Env{Rank: 0, WorldSize: 1}
	}
	if o.Rank < 0 {
		o.Rank = env.Rank
	} else if launched && o.Rank != env.Rank {
		return o, nil, fmt.Errorf("asked to open rank %d but RANK=%d", o.Rank, env.Rank)
	}
	if o.WorldSize == 0 {
		o.WorldSize = env.WorldSize
	} else if env.WorldSize != o.WorldSize {
		return o, nil, fmt.Errorf("the program's mesh has %d ranks but the launcher started %d (WORLD_SIZE)", o.WorldSize, env.WorldSize)
	}
	o.Device = env.LocalRank
	if cfg.Devices != nil {
		if len(cfg.Devices) != o.WorldSize {
			return o, nil, fmt.Errorf("%d device ids for a world of %d ranks", len(cfg.Devices), o.WorldSize)
		}
		o.Device = cfg.Devices[o.Rank]
	}
	if o.WorldSize == 1 {
		return o, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	rv, err := launch.Join(ctx, env, o.Timeout)
	if err != nil {
		return o, nil, err
	}
	o.Store, o.Token = rv.Client, env.Token
	return o, rv, nil
}

// Runtime is one rank of a job on one GPU.
type Runtime struct {
	dev        *Device
	closeStore func() error // collective: meets the other ranks first
	abortStore func() error // leaves at once
	closeOnce  sync.Once
	closeErr   error
}

var _ runtime.Runtime = (*Runtime)(nil)

// New opens the rank described by opts: retains the device's primary
// context, creates the default stream and, for more than one rank, meets
// the peers' fd-exchange sockets through the store.
func New(opts Options) (*Runtime, error) {
	p := Probe()
	if !p.Available {
		return nil, fmt.Errorf("cuda backend unavailable: %s", p.Unavailable())
	}
	if opts.WorldSize < 1 || opts.Rank < 0 || opts.Rank >= opts.WorldSize {
		return nil, fmt.Errorf("cuda: rank %d is out of range for world size %d", opts.Rank, opts.WorldSize)
	}
	if opts.Device >= len(p.Devices) && SharingGPUs() && len(p.Devices) > 0 {
		opts.Device %= len(p.Devices)
	}
	if opts.Device < 0 || opts.Device >= len(p.Devices) {
		return nil, fmt.Errorf("cuda: rank %d wants device %d but this machine shows %d device(s) (%s=1 places ranks on GPU rank mod %d, for testing)",
			opts.Rank, opts.Device, len(p.Devices), ShareGPUsEnv, len(p.Devices))
	}
	if opts.WorldSize > 1 && opts.Store == nil {
		return nil, fmt.Errorf("cuda: a world of %d ranks needs the job's store", opts.WorldSize)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = runtime.DefaultTimeout
	}
	drv, _ := loadDriver()
	d := &Device{drv: drv, opts: opts, info: p.Devices[opts.Device], live: map[uint64]*buffer{},
		streams: map[*stream]bool{}, events: map[*event]bool{}}
	if opts.Tuning != nil {
		d.tune = *opts.Tuning
	} else {
		d.tune = TuningFromEnv()
	}
	if err := d.open(); err != nil {
		d.close()
		return nil, fmt.Errorf("cuda: rank %d: %w", opts.Rank, err)
	}
	return &Runtime{dev: d}, nil
}

func (rt *Runtime) Name() string        { return "cuda" }
func (rt *Runtime) WorldSize() int      { return rt.dev.opts.WorldSize }
func (rt *Runtime) Ranks() []int        { return []int{rt.dev.opts.Rank} }
func (rt *Runtime) CUDADevice() *Device { return rt.dev }

// Device returns this process's rank's device.
func (rt *Runtime) Device(rank int) (runtime.Device, error) {
	if rank != rt.dev.opts.Rank {
		return nil, fmt.Errorf("cuda: this process hosts rank %d only, not rank %d (one process per GPU)", rt.dev.opts.Rank, rank)
	}
	return rt.dev, nil
}

// Close frees everything the rank still holds (locally: no collective
// step), closes the peer sockets and releases the primary context.
func (rt *Runtime) Close() error {
	rt.closeOnce.Do(func() {
		rt.closeErr = rt.dev.close()
		if rt.closeStore != nil {
			rt.closeErr = errors.Join(rt.closeErr, rt.closeStore())
		}
	})
	return rt.closeErr
}

// Device is one rank's GPU.
//
// Threading: CUDA keeps a "current context" per OS thread, and Go moves
// goroutines between threads at will. Every driver call sequence of a
// Device therefore runs inside withCtx, which locks the goroutine to its
// thread, makes the device's primary context current on it and unlocks
// afterwards. cuCtxSetCurrent only writes a thread-local, so doing it on
// every entry costs nanoseconds, and no state ties a goroutine to a thread
// between calls. Several Devices (one per GPU) may live in one process.
type Device struct {
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

	bounce     readBounce // pinned memory ReadToHost reads through (readhost.go)
	loop       loopKernel // device loops in graph mode (graph_loop.go)
	loopStream uintptr    // the stream loop bodies are captured on (made at the first)

	compute computeState // compiled compute kernels and the BLAS handle (compute.go)
	comm    commState    // collectives: signal pads, kernels, NCCL, p2p inboxes (signal.go)

	// Counters of live driver objects; teardown must bring them to zero.
	liveHandles      atomic.Int64 // cuMemCreate / import, not yet released
	liveMappings     atomic.Int64 // cuMemMap, not yet unmapped
	liveReservations atomic.Int64 // cuMemAddressReserve, not yet freed
	openFDs          atomic.Int64 // exported or received fds not yet closed
	liveModules      atomic.Int64
	liveGraphs       atomic.Int64 // instantiated graphs not yet closed
}

var _ runtime.Device = (*Device)(nil)

func (d *Device) Rank() int      { return d.opts.Rank }
func (d *Device) WorldSize() int { return d.opts.WorldSize }

// Info is the probe's view of this device.
func (d *Device) Info() DeviceInfo { return d.info }

// withCtx runs f on a locked OS thread with the device's context current.
func (d *Device) withCtx(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := d.drv.setCurrent(d.ctx); err != nil {
		return err
	}
	return f()
}

func (d *Device) open() error {
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

func (d *Device) allocProp(handleTypes int32) memAllocationProp {
	return memAllocationProp{Type: memAllocationTypePinned, RequestedHandleTypes: handleTypes,
		Location: memLocation{Type: memLocationTypeDevice, ID: d.dev}}
}

func (d *Device) storeBarrier(name string) error {
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

// Stats reports what is live; after every allocation is freed, Handles,
// Mappings, Reservations and OpenFDs are zero.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	s := Stats{Allocations: len(d.live), Streams: len(d.streams), Events: len(d.events)}
	d.mu.Unlock()
	s.Handles, s.Mappings, s.Reservations = d.liveHandles.Load(), d.liveMappings.Load(), d.liveReservations.Load()
	s.OpenFDs, s.Modules, s.Graphs = d.openFDs.Load(), d.liveModules.Load(), d.liveGraphs.Load()
	if d.fdx != nil {
		s.OpenFDs += int64(d.fdx.Pending())
	}
	d.comm.mu.Lock()
	s.Channels = len(d.comm.chans)
	d.comm.mu.Unlock()
	return s
}

// MemInfo is cuMemGetInfo for this device.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.withCtx(func() error {
		free, total, err = d.drv.memGetInfo()
		return err
	})
	return
}

// Barrier waits for the stream's work, then for every rank.
func (d *Device) Barrier(s runtime.Stream) error {
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
func (d *Device) stalledBarrier(name, what string) error {
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

func (d *Device) close() error {
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
		errs = append(errs, d.closeComm())
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
		errs = append(errs, d.closeCompute())
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

func (d *Device) checkOpen() error {
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
func (d *Device) ImportCounts() (fabric, posixFD int64) {
	return d.fabricImports.Load(), d.fdImports.Load()
}

// ShareGPUsEnv names the variable that lets a job have more ranks than the
// machine has GPUs: rank r's device d becomes d mod the GPU count, so
// several processes share a GPU. It is for testing many-rank programs on a
// small machine (symmetric memory and our kernels work; NCCL refuses two
// ranks on one GPU, and figures measured so mean nothing).
const ShareGPUsEnv = "HIR_CUDA_SHARE_GPUS"

// SharingGPUs reports whether HIR_CUDA_SHARE_GPUS=1.
func SharingGPUs() bool { return os.Getenv(ShareGPUsEnv) == "1" }
