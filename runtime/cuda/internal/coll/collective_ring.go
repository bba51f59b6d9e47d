package coll

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

// ring: all_reduce and reduce_scatter through the neighbours' staging
// (hir_ring_*), and all_gather's ring writing into the right neighbour's
// symmetric output (hir_ag_ring_*).

// runAllGatherRing: blocks travel round the ring, written straight into
// the right neighbour's (symmetric) output.
func (d *Comm) runAllGatherRing(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	D := d.Opts.WorldSize
	es := p.es
	outs := d.peerPtrs(p.outB, p.out, true)
	run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
	nIn := p.in.NumElements()
	a := d.baseArgs(cs, ch, 0)
	a.Src[0] = p.inPtr
	a.Dst = outs
	a.Seg = run * es
	vec := p.inPtr%16 == 0
	for q := 0; q < D; q++ {
		vec = vec && outs[q]%16 == 0
	}
	if l.Run != 0 {
		vec = vec && (l.Run*es)%16 == 0 && (l.Pitch*es)%16 == 0 && a.Seg%16 == 0
	} else {
		vec = vec && a.Seg%16 == 0
	}
	name := fmt.Sprintf("hir_ag_ring_s%d", es)
	if vec {
		name = "hir_ag_ring_v16"
		bytes := nIn * es
		a.N = bytes / 16
		a.TailStart, a.TailEnd = a.N*16, bytes
		a.Ld = lay{l.Run * es / 16, l.Pitch * es / 16}
	} else {
		a.N, a.Ld = nIn, l
	}
	grid := cs.grid(max(nIn*es/16, 1))
	cs.Mu.Lock()
	ch.take(&a, uint64(max(2, D)), p.what)
	cs.Mu.Unlock()
	return d.launchColl(cs, name, grid, &a, s)
}

// ringGeom is the ring's shape: at most blocks blocks (and at most the
// agreed grid), seg bytes per segment, slots staging slots per block,
// and whether a block runs its steps in waves (MODE_WAVE, where there are
// slots enough: ringWaveSlots). Every rank must use the same one (it is
// part of the call's descriptor): HIR_COLL_RING_BLOCKS, HIR_COLL_RING_SEG
// (bytes, a multiple of 16), HIR_COLL_RING_SLOTS (2 to 16; the fused
// steps need 2) and HIR_COLL_RING_WAVE (1 or 0) set it.
type RingGeom struct {
	Blocks, Seg, Slots int64
	Wave               bool
}

// ringWaveSlots is the least number of slots per block the wave order
// runs with: a wave has a send in every step but the last, and a
// transfer is acked only in the next wave, so a block may have a wave's
// sends and those before its own in the current one outstanding (one
// fewer deadlocks in the model: TestRingWaveSlots).
func RingWaveSlots(D int, gather bool) int {
	if gather {
		return 2 * D
	}
	return D + 1
}

// useWave says whether a ring of D ranks runs in waves with g.
func (g RingGeom) UseWave(D int, gather bool) bool {
	return g.Wave && g.Slots >= int64(RingWaveSlots(D, gather))
}

// ringDefault: measured on 2 × H200 at 1 GiB bf16 (docs/COLLECTIVES.md):
// all_reduce 359 GB/s bus bandwidth, reduce_scatter 324; 64 blocks or 128
// KiB segments ran 10-20 % slower, 512 KiB segments gave reduce_scatter
// 338 for twice the staging (128 MiB per rank and channel here).
var RingDefault = RingGeom{Blocks: 128, Seg: 256 << 10, Slots: 4, Wave: true}

func (g RingGeom) String() string {
	s := fmt.Sprintf("%dx%dx%d", g.Blocks, g.Seg, g.Slots)
	if g.Wave {
		s += "w"
	}
	return s
}

// stride is the bytes of one staging slot; stagingBytes a rank's staging.
func (g RingGeom) Stride() int64       { return g.Seg + ringSlotPad }
func (g RingGeom) stagingBytes() int64 { return g.Blocks * g.Slots * g.Stride() }

// ringMinBlockBytes is the least of the widest chunk a ring block is
// given: small tensors run on fewer blocks (fewer handshakes).
const ringMinBlockBytes = 32 << 10

// ringStage is ch's ring staging (symmetric: made, collectively, on the
// channel's first ring, for geometry g; every rank runs the same rings
// on the channel in the same order, with the same geometry).
func (d *Comm) ringStage(ch *CommChannel, g RingGeom) ([maxRanks]uint64, error) {
	var out [maxRanks]uint64
	if ch.stage == nil {
		b, err := d.AllocSymmetric(g.stagingBytes())
		if err != nil {
			return out, fmt.Errorf("ring staging: %w", err)
		}
		ch.stage = b
		for _, m := range b.Sym.Maps {
			ch.stagePtrs = append(ch.stagePtrs, m.Ptr)
		}
	}
	if ch.stage.Bytes < g.stagingBytes() {
		return out, fmt.Errorf("ring staging of %d bytes is too small for ring geometry %v (the geometry changed after the channel's first ring)", ch.stage.Bytes, g)
	}
	copy(out[:], ch.stagePtrs)
	return out, nil
}

// ringLaunch is a ring launch's shape: its grid and segments per block.
func (cs *CommState) RingLaunch(g RingGeom, chunk []int64, es int64) (grid uint32, seg, nseg int64) {
	D := len(chunk) - 1
	var widest int64
	for c := 0; c < D; c++ {
		widest = max(widest, chunk[c+1]-chunk[c])
	}
	G := min(g.Blocks, int64(max(cs.Blocks, 1)), max(1, (widest*es+ringMinBlockBytes-1)/ringMinBlockBytes))
	seg = g.Seg / es
	part := (widest + G - 1) / G
	return uint32(G), seg, max(1, (part+seg-1)/seg)
}

// runRing runs all_reduce and reduce_scatter as a ring (hir_ring_*):
// this rank's values come from the input, the final chunks go straight to
// the output, and only the neighbours' staging is touched remotely.
// reduce_scatter whose blocks along the axis are strided, or whose output
// overlaps its input, runs on a packed copy of the input in a temporary.
func (d *Comm) runRing(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	g := p.ring
	stage, err := d.ringStage(ch, g)
	if err != nil {
		return err
	}
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.N = g.Stride()
	a.NOut = int32(g.Slots)
	var total int64
	if p.op == ir.OpAllReduce {
		total = p.in.NumElements()
		for c := 0; c <= D; c++ {
			a.Chunk[c] = total * int64(c) / int64(D)
		}
		a.Mode = modeAllGather
	} else {
		nOut := p.out.NumElements()
		total = nOut * int64(D)
		for c := 0; c <= D; c++ {
			a.Chunk[c] = nOut * int64(c)
		}
	}
	grid, seg, nseg := cs.RingLaunch(g, a.Chunk[:D+1], es)
	a.Seg, a.NSeg = seg, nseg
	if g.UseWave(D, a.Mode&modeAllGather != 0) {
		a.Mode |= modeWave
	}
	transfers := uint64(nseg) * uint64(D-1)
	if a.Mode&modeAllGather != 0 {
		transfers *= 2
	}
	dt := p.dt
	run := func(src, dst uint64) error {
		a.Src[0], a.Dst[0] = src, dst
		if src%16 == 0 && dst%16 == 0 {
			a.Xtra = 1
		}
		cs.Mu.Lock()
		ch.take(&a, transfers+1, p.what)
		cs.Mu.Unlock()
		return d.launchColl(cs, kernels.RingKernelName(dt, p.reduce), grid, &a, s)
	}
	if p.op == ir.OpAllReduce {
		// Each element is read from the input before the output's is
		// written (in-place works); a partial overlap does not.
		if p.outPtr != p.inPtr && overlaps(p.in, p.inB, p.out, p.outB) {
			return fmt.Errorf("the output partly overlaps the input")
		}
		return run(p.inPtr, p.outPtr)
	}
	nOut := p.out.NumElements()
	runLen, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
	if l.Run == 0 && !overlaps(p.in, p.inB, p.out, p.outB) {
		// Block c of the input is chunk c already; chunk r's element i
		// goes to the output's i - chunk[r] (the address wraps below the
		// output; only chunk r's elements are ever stored).
		return run(p.inPtr, p.outPtr-uint64(int64(r)*nOut*es))
	}
	// Pack the input's blocks along the axis one after another, run the
	// ring on the copy, keep chunk r.
	return d.Staged(int(total*es), s, func(tmp uint64) error {
		work := d.tempBuffer(tmp, total*es)
		for c := 0; c < D; c++ {
			src := runtime.Tensor{Buf: p.inB, Offset: p.in.Offset + int64(c)*runLen*es, DType: p.dt, Shape: p.out.Shape}
			if l.Run != 0 {
				src.Strides = runtime.ContiguousStrides(p.in.Shape)
			}
			dst := runtime.Tensor{Buf: work, Offset: int64(c) * nOut * es, DType: p.dt, Shape: p.out.Shape}
			if err := d.Copy(dst, src, s); err != nil {
				return err
			}
		}
		if err := run(tmp, tmp); err != nil {
			return err
		}
		return d.Copy(p.out, runtime.Tensor{Buf: work, Offset: int64(r) * nOut * es, DType: p.dt, Shape: p.out.Shape}, s)
	})
}
