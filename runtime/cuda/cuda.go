package cuda

import (
	"context"
	"errors"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"os"
	"sync"
	"time"

	"github.com/hirlab/hir/runtime"
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
	Tuning *coll.Tuning
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
	p := gpu.Probe()
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

// gpu is what the device layer keeps of o.
func (o Options) gpu() gpu.Options {
	return gpu.Options{Rank: o.Rank, WorldSize: o.WorldSize, Device: o.Device, Store: o.Store, Token: o.Token,
		Timeout: o.Timeout, NoFabric: o.NoFabric, Stalled: o.Stalled, StallAfter: o.StallAfter}
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
	p := gpu.Probe()
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
	d := &Device{Comm: &coll.Comm{Device: gpu.New(opts.gpu(), p.Devices[opts.Device])}}
	if opts.Tuning != nil {
		d.Tune = *opts.Tuning
	} else {
		d.Tune = coll.TuningFromEnv()
	}
	d.Upper = d
	d.Opts.NoPDL = !d.Tune.PDL
	if err := d.Open(); err != nil {
		d.close()
		return nil, fmt.Errorf("cuda: rank %d: %w", opts.Rank, err)
	}
	return &Runtime{dev: d}, nil
}

func (rt *Runtime) Name() string        { return "cuda" }
func (rt *Runtime) WorldSize() int      { return rt.dev.Opts.WorldSize }
func (rt *Runtime) Ranks() []int        { return []int{rt.dev.Opts.Rank} }
func (rt *Runtime) CUDADevice() *Device { return rt.dev }

// Device returns this process's rank's device.
func (rt *Runtime) Device(rank int) (runtime.Device, error) {
	if rank != rt.dev.Opts.Rank {
		return nil, fmt.Errorf("cuda: this process hosts rank %d only, not rank %d (one process per GPU)", rt.dev.Opts.Rank, rank)
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

// Device is one rank's GPU: the context, memory, streams, kernels and
// graphs (gpuDevice), with the compute kernels and the collectives.
type Device struct {
	*coll.Comm              // the collectives, over the device layer (*gpu.Device)
	compute    computeState // compiled compute kernels and the BLAS handle (compute.go)
}

var _ runtime.Device = (*Device)(nil)
var _ runtime.StreamBarrierer = (*Device)(nil)
var _ runtime.CollectiveWarmer = (*Device)(nil)

// close tears the layers down: the collectives first, then the device,
// the BLAS handle last before the context goes.
func (d *Device) close() error { return d.Device.Close(d.CloseComm, d.closeCompute) }

// StreamClosed gives back a closing stream's collective channel and
// frees its cuBLAS workspace.
func (d *Device) StreamClosed(s *gpu.Stream) error {
	d.State.ReleaseChannel(s)
	if bh := d.compute.blasH; bh != nil {
		if err := d.WithCtx(func() error { return bh.releaseWorkspace(s) }); err != nil {
			return fmt.Errorf("cuda: rank %d: freeing a closed stream's cuBLAS workspace: %w", d.Opts.Rank, err)
		}
	}
	return nil
}

// Stats reports what is live; after every allocation is freed, Handles,
// Mappings, Reservations and OpenFDs are zero.
func (d *Device) Stats() gpu.Stats {
	s := d.Device.Stats()
	d.State.Mu.Lock()
	s.Channels = len(d.State.Chans)
	d.State.Mu.Unlock()
	return s
}

// ShareGPUsEnv names the variable that lets a job have more ranks than the
// machine has GPUs: rank r's device d becomes d mod the GPU count, so
// several processes share a GPU. It is for testing many-rank programs on a
// small machine (symmetric memory and our kernels work; NCCL refuses two
// ranks on one GPU, and figures measured so mean nothing).
const ShareGPUsEnv = "HIR_CUDA_SHARE_GPUS"

// SharingGPUs reports whether HIR_CUDA_SHARE_GPUS=1.
func SharingGPUs() bool { return os.Getenv(ShareGPUsEnv) == "1" }
