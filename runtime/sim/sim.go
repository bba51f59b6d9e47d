// Package sim is the embedded CPU runtime: every rank of a job lives in this
// process, each with its own streams (worker goroutines), and memory is Go
// byte slices. It models the GPU runtime rather than shortcutting it:
// symmetric allocations are one shared backing range of D × size bytes,
// collectives run their named algorithm over that memory with signal-pad
// synchronisation, and every wait for a peer times out with an error naming
// the ranks that did not arrive. docs/RUNTIME.md describes the model.
package sim

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hirlab/hir/runtime"
)

func init() {
	runtime.Register("sim", func(cfg runtime.Config) (runtime.Runtime, error) { return New(cfg) })
}

// DefaultGranularity is the unit a symmetric allocation's size is rounded up
// to, as the GPU rounds to its allocation granularity: a shard's Size() may
// exceed what was asked for, and the contiguous view places rank r at
// r × Size(), so code that assumes tightly packed shards fails here as it
// would on the GPU.
const DefaultGranularity = 256

// Options tune the runtime beyond runtime.Config.
type Options struct {
	// Granularity rounds symmetric allocation sizes up (0 means
	// DefaultGranularity, 1 means no rounding).
	Granularity int64
	// MemoryLimit bounds the bytes all ranks may hold at once, as a GPU's
	// memory does: an allocation past it is an error naming the sizes, not
	// a crash of the whole process. 0 means DefaultMemoryLimit().
	MemoryLimit int64
}

// Runtime hosts every rank of a job.
type Runtime struct {
	size        int
	timeout     time.Duration
	granularity int64
	mem         memoryBudget
	devices     []*Device
	rv          *rendezvous
	ranks       []int // 0 … size-1, shared by every meeting of all ranks: never changed

	nextID     atomic.Uint64
	liveGraphs atomic.Int64 // graphs made by EndCapture and not yet closed

	mu   sync.Mutex
	live map[uint64]*buffer // allocations and views not yet released

	closed    chan struct{} // closed by Close: every wait gives up
	closeOnce sync.Once
}

var _ runtime.Runtime = (*Runtime)(nil)

// ErrClosed is returned by work interrupted because the runtime closed.
var ErrClosed = errors.New("sim runtime closed")

// New opens a runtime hosting every rank of cfg.WorldSize.
func New(cfg runtime.Config) (*Runtime, error) { return NewWithOptions(cfg, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(cfg runtime.Config, opts Options) (*Runtime, error) {
	if cfg.WorldSize < 1 {
		return nil, fmt.Errorf("sim: world size must be at least 1, got %d", cfg.WorldSize)
	}
	if cfg.Devices != nil && len(cfg.Devices) != cfg.WorldSize {
		return nil, fmt.Errorf("sim: %d device ids for a world of %d ranks", len(cfg.Devices), cfg.WorldSize)
	}
	g := opts.Granularity
	if g == 0 {
		g = DefaultGranularity
	}
	if g < 1 {
		return nil, fmt.Errorf("sim: granularity must be positive, got %d", g)
	}
	limit := opts.MemoryLimit
	if limit == 0 {
		if _, err := memoryLimitFromEnv(); err != nil {
			return nil, fmt.Errorf("sim: %v", err)
		}
		limit = DefaultMemoryLimit()
	}
	if limit < 0 {
		return nil, fmt.Errorf("sim: memory limit must be positive, got %d", limit)
	}
	rt := &Runtime{
		size:        cfg.WorldSize,
		timeout:     cfg.EffectiveTimeout(),
		granularity: g,
		mem:         memoryBudget{limit: limit},
		live:        map[uint64]*buffer{},
		closed:      make(chan struct{}),
	}
	rt.rv = newRendezvous(rt.closed, cfg.StallWatch())
	rt.ranks = make([]int, cfg.WorldSize)
	for r := range rt.ranks {
		rt.ranks[r] = r
	}
	for r := 0; r < cfg.WorldSize; r++ {
		d := &Device{rt: rt, rank: r, streams: map[*stream]bool{}, sendSeq: map[int]int64{}, recvSeq: map[int]int64{}}
		d.def = newStream(d, true)
		rt.devices = append(rt.devices, d)
	}
	return rt, nil
}

// Name is "sim".
func (rt *Runtime) Name() string { return "sim" }

// WorldSize is the number of ranks.
func (rt *Runtime) WorldSize() int { return rt.size }

// Ranks lists every rank: this runtime hosts them all.
func (rt *Runtime) Ranks() []int {
	rs := make([]int, rt.size)
	for i := range rs {
		rs[i] = i
	}
	return rs
}

// Device returns rank's device.
func (rt *Runtime) Device(rank int) (runtime.Device, error) {
	if rank < 0 || rank >= rt.size {
		return nil, fmt.Errorf("sim: rank %d out of range [0, %d)", rank, rt.size)
	}
	return rt.devices[rank], nil
}

// LiveBuffers is the number of allocations and views (peer buffers,
// contiguous views, collective staging) not yet released; tests use it to
// prove nothing leaks.
func (rt *Runtime) LiveBuffers() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.live)
}

// LiveStreams is the number of streams open on every rank, the default
// streams included; tests use it to prove nothing leaks.
func (rt *Runtime) LiveStreams() int {
	n := 0
	for _, d := range rt.devices {
		d.mu.Lock()
		n += len(d.streams)
		d.mu.Unlock()
	}
	return n
}

// Close drains every stream, then releases everything still allocated. Work
// still blocked after the timeout (on a peer that will never come) is
// interrupted with ErrClosed.
func (rt *Runtime) Close() error { return rt.closeWithin(rt.timeout) }

func (rt *Runtime) closeWithin(grace time.Duration) error {
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, d := range rt.devices {
			for _, s := range d.allStreams() {
				if err := s.drain(); err != nil {
					errs = append(errs, fmt.Errorf("rank %d: %w", d.rank, err))
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(grace):
		errs = append(errs, fmt.Errorf("sim: streams still busy after %v at close; interrupting them", grace))
	}
	rt.closeOnce.Do(func() { close(rt.closed) })
	<-done
	for _, d := range rt.devices {
		for _, s := range d.allStreams() {
			s.stop()
		}
	}
	rt.mu.Lock()
	for id, b := range rt.live {
		b.freed.Store(true)
		delete(rt.live, id)
	}
	rt.mu.Unlock()
	return errors.Join(errs...)
}

func (rt *Runtime) isClosed() bool {
	select {
	case <-rt.closed:
		return true
	default:
		return false
	}
}
