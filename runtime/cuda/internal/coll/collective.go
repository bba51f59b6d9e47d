package coll

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

// Running a collective: Device.collective plans it (collective_plan.go),
// then dispatches to its algorithm (collective_oneshot.go, _ring.go,
// _ce.go, coll_nccl.go); the launch helpers here load the kernels
// (collective_kernels.go) and launch them with one collArgs.

// collBlocks is the most blocks a collective kernel of this rank would
// launch: one per multiprocessor (override, Tuning.Blocks from
// HIR_COLL_BLOCKS, where > 0), at most the pads' maxBlocks. The ranks
// agree on the smallest (commReady), since block b of a rank meets block b
// of its peers.
func collBlocks(sms, override int) int {
	if override > 0 {
		return min(override, MaxBlocks)
	}
	if sms <= 0 {
		return 32
	}
	return min(sms, MaxBlocks)
}

const collThreads = 512

// grid is the grid for units of work (4 per thread before a second block
// is worth it), at most the agreed block count.
func (cs *CommState) grid(units int64) uint32 {
	g := (units + collThreads*4 - 1) / (collThreads * 4)
	return uint32(max(1, min(g, int64(max(cs.Blocks, 1)))))
}

// blockLayout is block k of extent ext along axis of a contiguous tensor
// of shape full: the run of elements per outer index and the pitch
// between runs; contiguous (run 0) when nothing lies outside the axis.
func BlockLayout(full []int64, axis int, ext int64) (off1 int64, l lay) {
	outer := ir.Product(full[:axis])
	inner := ir.Product(full[axis+1:])
	run := ext * inner
	if outer == 1 {
		return run, lay{}
	}
	return run, lay{Run: run, Pitch: full[axis] * inner}
}

// Collective runs c on stream s: the symmetric-memory kernels of
// docs/COLLECTIVES.md, or NCCL for algo=nccl.
func (d *Comm) Collective(c *runtime.CollectiveCall, rs runtime.Stream) error {
	if c == nil {
		return fmt.Errorf("cuda: rank %d: collective: nil call", d.Opts.Rank)
	}
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	// Every rank reaches its first collective at the same point: make the
	// pads there, before anything that could fail on one rank only.
	cs, err := d.commReady()
	if err != nil {
		return err
	}
	// A call made before (same tensors, same stream) reuses its plan,
	// already validated and agreed on: no planning, formatting or store.
	capture := d.captureToken()
	capturing := capture != nil
	key, cacheable := planKeyOf(c, s, capturing)
	var p *CollPlan
	if cacheable {
		cs.Mu.Lock()
		p = cs.Plans[key]
		cs.Mu.Unlock()
		if p != nil && (p.inB.Freed.Load() || p.outB.Freed.Load()) {
			p = nil
		}
	}
	if err := d.FaultErr(); err != nil {
		return err
	}
	var ch *CommChannel
	var seq uint64
	// The stream's channel, and this launch's number on it.
	takeChannel := func() error {
		cs.Mu.Lock()
		defer cs.Mu.Unlock()
		var err error
		if ch, err = cs.Channel(s, d.Opts.Rank); ch != nil {
			ch.seq = cs.seq.Add(1)
			seq = ch.seq
		}
		return err
	}
	if p == nil {
		if p, err = d.PlanCollective(c, capturing); err != nil {
			return err
		}
		if err := takeChannel(); err != nil {
			return err
		}
		p.what = fmt.Sprintf("%s algo=%s %s%v", p.op, p.algo, p.dt, p.in.Shape)
		if p.reduce != ir.ReduceUnset {
			p.what += " op=" + p.reduce.String()
		}
		p.Desc += fmt.Sprintf(" channel=%d", ch.Idx)
		if err := d.agree(cs, p); err != nil {
			return err
		}
		if cacheable {
			cs.Mu.Lock()
			if len(cs.Plans) >= maxCachedPlans {
				clear(cs.Plans)
			}
			cs.Plans[key] = p
			cs.Mu.Unlock()
		}
	} else {
		if err := takeChannel(); err != nil {
			return err
		}
	}
	if p.in.NumElements() == 0 && p.out.NumElements() == 0 {
		return nil
	}
	if d.Opts.WorldSize == 1 {
		// One rank: every collective is a copy (reduce ops of one value
		// are the value, avg included).
		if p.outPtr == p.inPtr {
			return nil
		}
		return d.Copy(p.out, p.in, s)
	}
	run, ok := CollAlgorithms[CollKey{p.op, p.Impl}]
	if !ok {
		return fmt.Errorf("cuda: rank %d: %s: no implementation of %s algo=%s (internal error)", d.Opts.Rank, p.what, p.op, p.Impl)
	}
	runErr := d.orderAfterPrevious(cs, ch, s, capture)
	if runErr == nil {
		runErr = run(d, cs, ch, p, s)
	}
	if runErr == nil {
		runErr = d.collectiveIssued(cs, ch, s, capture)
	}
	if runErr != nil {
		return fmt.Errorf("cuda: rank %d: %s (collective #%d, stream channel %d): %w", d.Opts.Rank, p.what, seq, ch.Idx, runErr)
	}
	return nil
}

// preloadKernels loads the modules p's algorithm launches.
func (d *Comm) preloadKernels(cs *CommState, p *CollPlan) error {
	if p.Impl == ir.AlgoNCCL || d.Opts.WorldSize == 1 {
		return nil
	}
	if _, err := d.commFunction(&cs.mods, "hir_barrier"); err != nil {
		return err
	}
	if p.Impl == ir.AlgoLL && p.reduce == ir.ReduceUnset {
		_, err := d.commFunction(&cs.mods, "hir_ll_copy")
		return err
	}
	if p.reduce == ir.ReduceUnset {
		return nil
	}
	dt := p.dt
	_, err := d.commFunction(&cs.mods, kernels.ReduceKernelName(dt, p.reduce, false))
	return err
}

// peerPtrs is where tensor t (in this rank's shard b) lies in every
// rank's shard, as mapped here; for a tensor not touched remotely only
// this rank's entry is set.
func (d *Comm) peerPtrs(b *gpu.Buffer, t runtime.Tensor, remote bool) (out [maxRanks]uint64) {
	if !remote {
		out[d.Opts.Rank] = b.Ptr + uint64(t.Offset)
		return out
	}
	for r, m := range b.Sym.Maps {
		out[r] = m.Ptr + uint64(t.Offset)
	}
	return out
}

func (d *Comm) baseArgs(cs *CommState, ch *CommChannel, base uint64) CollArgs {
	return CollArgs{Pad: cs.padsFor(ch), Status: cs.status.Ptr, Base: base, TimeoutNS: uint64(d.Opts.Timeout.Nanoseconds()),
		Epochs: cs.epochs.Ptr + uint64(ch.Idx*epochWords*8),
		Rank:   int32(d.Opts.Rank), World: int32(d.Opts.WorldSize), Channel: int32(ch.Idx)}
}

// launchColl launches collective kernel name (compiled on first use, in
// the module whose source defines it) with a.
func (d *Comm) launchColl(cs *CommState, name string, grid uint32, a *CollArgs, s *gpu.Stream) error {
	f, err := d.commFunction(&cs.mods, name)
	if err != nil {
		return err
	}
	return d.launchArgs(f, grid, collThreads, s, a)
}

// launchBlock is a collective launch's by-value argument and the
// kernelParams array pointing at it, recycled (launchBlocks): the driver
// copies both before cuLaunchKernel returns, so a launch allocates nothing.
type launchBlock struct {
	args   CollArgs
	params [1]unsafe.Pointer
}

var launchBlocks = sync.Pool{New: func() any {
	b := new(launchBlock)
	b.params[0] = unsafe.Pointer(&b.args)
	return b
}}

// launchArgs launches f with a (passed by value) on s: LaunchFunction
// without its per-argument conversions and copies, since collectives are
// issued at a rate where the host's microseconds show.
func (d *Comm) launchArgs(f *gpu.Function, grid, block uint32, s *gpu.Stream, a *CollArgs) error {
	lb := launchBlocks.Get().(*launchBlock)
	lb.args = *a
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := d.Drv.SetCurrent(d.Ctx); err != nil {
		launchBlocks.Put(lb)
		return err
	}
	err := d.LaunchOwn(f.H, gpu.Dim3{X: grid}, gpu.Dim3{X: block}, 0, s.H, unsafe.Pointer(&lb.params[0]))
	launchBlocks.Put(lb)
	if err != nil {
		return fmt.Errorf("cuda: rank %d: launch %s: %w", d.Opts.Rank, f.Name, err)
	}
	return nil
}

func (d *Comm) launchReduce(cs *CommState, p *CollPlan, vec bool, grid uint32, a *CollArgs, s *gpu.Stream) error {
	dt := p.dt
	return d.launchColl(cs, kernels.ReduceKernelName(dt, p.reduce, vec), grid, a, s)
}

// overlaps reports whether two tensors share bytes.
func overlaps(a runtime.Tensor, ab *gpu.Buffer, b runtime.Tensor, bb *gpu.Buffer) bool {
	if ab.Ptr+uint64(a.Offset) >= bb.Ptr+uint64(b.Offset)+uint64(b.Bytes()) {
		return false
	}
	return bb.Ptr+uint64(b.Offset) < ab.Ptr+uint64(a.Offset)+uint64(a.Bytes())
}

// StreamBarrier meets every rank on stream rs without the host waiting
// (runtime.StreamBarrierer): the barrier kernel on rs's channel, as the
// collectives meet. The evaluator meets so around the uploads of new
// symmetric inputs, where a host barrier cost a store round trip and two
// stream synchronisations per Run.
func (d *Comm) StreamBarrier(rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil || d.Opts.WorldSize == 1 {
		return err
	}
	cs, err := d.commReady()
	if err != nil {
		return err
	}
	if err := d.FaultErr(); err != nil {
		return err
	}
	cs.Mu.Lock()
	ch, err := cs.Channel(s, d.Opts.Rank)
	cs.Mu.Unlock()
	if err != nil {
		return err
	}
	// The barrier kernel spins for its peers as a collective does: it
	// keeps the host's order across channels too (order.go).
	capture := d.captureToken()
	if err := d.orderAfterPrevious(cs, ch, s, capture); err != nil {
		return err
	}
	if err := d.BarrierKernel(cs, ch, "stream barrier", s); err != nil {
		return err
	}
	return d.collectiveIssued(cs, ch, s, capture)
}

// barrierKernel meets every rank on stream s (one block).
func (d *Comm) BarrierKernel(cs *CommState, ch *CommChannel, what string, s *gpu.Stream) error {
	a := d.baseArgs(cs, ch, 0)
	cs.Mu.Lock()
	ch.take(&a, 1, what)
	cs.Mu.Unlock()
	return d.launchColl(cs, "hir_barrier", 1, &a, s)
}

// tempBuffer wraps a stream-ordered temporary (cuMemAllocAsync) as a
// buffer Copy accepts; it is not tracked (staged frees it).
func (d *Comm) tempBuffer(ptr uint64, size int64) *gpu.Buffer {
	return &gpu.Buffer{Dev: d.Device, Bytes: size, MemType: ir.Global, Kind: gpu.KindGlobal, Ptr: ptr, Owner: d.Opts.Rank}
}
