package coll

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// one_shot and two_shot: every rank reads (reduce kernel) or writes (copy
// kernel) its peers' symmetric memory directly; two_shot's gather half
// on the copy engines; the LL kernel for small all_reduces.

// reduceSpec is one launch of the reduce kernel, in elements: every
// rank's source (layout ls) reduced into the targets (layout ld).
type reduceSpec struct {
	src   [maxRanks]uint64
	ls    lay
	dst   []uint64
	ld    lay
	n     int64 // elements this rank reduces
	gridN int64 // elements that size the grid (the same on every rank)
	tmp   bool  // the output aliases the input: stage through a temporary
}

// runReduce launches the reduce kernel for spec: the 16-byte vector
// instance where every address and layout allows it, else the scalar one.
func (d *Comm) runReduce(cs *CommState, ch *CommChannel, p *CollPlan, sp reduceSpec, s *gpu.Stream) error {
	D := d.Opts.WorldSize
	es := p.es
	V := 16 / es
	aligned := func(x uint64) bool { return x%16 == 0 }
	vec := true
	for r := 0; r < D; r++ {
		vec = vec && aligned(sp.src[r])
	}
	for _, t := range sp.dst {
		vec = vec && aligned(t)
	}
	for _, l := range []lay{sp.ls, sp.ld} {
		if l.Run != 0 {
			vec = vec && l.Run%V == 0 && l.Pitch%V == 0
		}
	}
	a := d.baseArgs(cs, ch, 0)
	a.Src = sp.src
	for i, t := range sp.dst {
		a.Dst[i] = t
	}
	a.NOut = int32(len(sp.dst))
	a.Ls, a.Ld = sp.ls, sp.ld
	units := sp.n
	if vec {
		units = sp.n / V
		a.Ls, a.Ld = lay{sp.ls.Run / V, sp.ls.Pitch / V}, lay{sp.ld.Run / V, sp.ld.Pitch / V}
		a.TailStart, a.TailEnd = units*V, sp.n
	}
	a.N = units
	// The grid depends only on what every rank agrees on (never on this
	// rank's alignment): blocks meet their peers' blocks of the same index.
	grid := cs.grid(max(1, (sp.gridN*es+15)/16))
	launch := func() error {
		cs.Mu.Lock()
		ch.take(&a, 2, p.what)
		cs.Mu.Unlock()
		return d.launchReduce(cs, p, vec, grid, &a, s)
	}
	if !sp.tmp {
		return launch()
	}
	a.Mode |= modeTmp
	return d.Staged(int(max(sp.n*es, 16)), s, func(tmp uint64) error {
		a.Work = tmp
		return launch()
	})
}

// copySpec is one launch of the copy kernel, in elements: task t copies n
// elements from src[t] (layout ls) to dst[t] (layout ld).
type copySpec struct {
	src, dst []uint64
	ls, ld   lay
	n        int64
}

func (d *Comm) runCopy(cs *CommState, ch *CommChannel, p *CollPlan, sp copySpec, gridN int64, s *gpu.Stream) error {
	es := p.es
	vec := true
	for i := range sp.src {
		vec = vec && sp.src[i]%16 == 0 && sp.dst[i]%16 == 0
	}
	for _, l := range []lay{sp.ls, sp.ld} {
		if l.Run != 0 {
			vec = vec && (l.Run*es)%16 == 0 && (l.Pitch*es)%16 == 0
		}
	}
	a := d.baseArgs(cs, ch, 0)
	copy(a.Src[:], sp.src)
	copy(a.Dst[:], sp.dst)
	a.NTask = int32(len(sp.src))
	name := fmt.Sprintf("hir_copy_s%d", es)
	gridUnits := gridN * es / 16
	if vec {
		name = "hir_copy_v16"
		bytes := sp.n * es
		a.N = bytes / 16
		a.TailStart, a.TailEnd = a.N*16, bytes
		a.Ls = lay{sp.ls.Run * es / 16, sp.ls.Pitch * es / 16}
		a.Ld = lay{sp.ld.Run * es / 16, sp.ld.Pitch * es / 16}
	} else {
		a.N = sp.n
		a.Ls, a.Ld = sp.ls, sp.ld
	}
	cs.Mu.Lock()
	ch.take(&a, 2, p.what)
	cs.Mu.Unlock()
	return d.launchColl(cs, name, cs.grid(max(gridUnits, 1)), &a, s)
}

// chunkBounds cuts n elements into D chunks for two_shot: chunk c is
// [b[c], b[c+1]), every bound but the last a multiple of align (16 bytes'
// worth), so every chunk moves as vectors. An array: a launch allocates
// nothing for it.
func chunkBounds(n int64, D int, align int64) (b [maxRanks + 1]int64) {
	for c := 0; c < D; c++ {
		b[c] = n * int64(c) / int64(D) / align * align
	}
	b[D] = n
	return b
}

// runSymmetric runs the one_shot and two_shot algorithms.
func (d *Comm) runSymmetric(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	ins := d.peerPtrs(p.inB, p.in, p.access.ReadsInput)
	outs := d.peerPtrs(p.outB, p.out, p.access.WritesOutput)
	nIn, nOut := p.in.NumElements(), p.out.NumElements()
	alias := overlaps(p.in, p.inB, p.out, p.outB)
	switch p.op {
	case ir.OpAllReduce:
		if p.Impl == ir.AlgoTwoShot {
			// Chunk c of the flat tensor, bounds rounded to 16 bytes so
			// every chunk moves as vectors; each element is still reduced
			// in rank order, as one_shot does.
			if p.twoShotBulk {
				return d.launchBulk2(cs, ch, p, p.inPtr, outs, true, s)
			}
			bounds := chunkBounds(nIn, D, 16/es)
			var widest int64
			for c := 0; c < D; c++ {
				widest = max(widest, bounds[c+1]-bounds[c])
			}
			lo, hi := bounds[r], bounds[r+1]
			sp := reduceSpec{n: hi - lo, gridN: widest}
			for q := 0; q < D; q++ {
				sp.src[q] = ins[q] + uint64(lo*es)
				sp.dst = append(sp.dst, outs[q]+uint64(lo*es))
			}
			if p.twoShotCE {
				return d.runTwoShotCE(cs, ch, p, sp, lo, s)
			}
			return d.runReduce(cs, ch, p, sp, s)
		}
		sp := reduceSpec{src: ins, dst: []uint64{p.outPtr}, n: nIn, gridN: nIn, tmp: alias}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpReduce:
		sp := reduceSpec{src: ins, gridN: nIn, tmp: alias}
		if r == p.root {
			sp.dst, sp.n = []uint64{p.outPtr}, nIn
		}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpReduceScatter:
		run, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
		sp := reduceSpec{ls: l, dst: []uint64{p.outPtr}, n: nOut, gridN: nOut, tmp: alias}
		for q := 0; q < D; q++ {
			sp.src[q] = ins[q] + uint64(int64(r)*run*es)
		}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpAllGather:
		run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
		sp := copySpec{ld: l, n: nIn}
		for q := 0; q < D; q++ {
			sp.src = append(sp.src, p.inPtr)
			sp.dst = append(sp.dst, outs[q]+uint64(int64(r)*run*es))
		}
		return d.runCopy(cs, ch, p, sp, nIn*int64(D), s)
	case ir.OpAllToAll:
		if p.a2aCE {
			return d.runAllToAllCE(cs, ch, p, s)
		}
		a, b := p.concat, p.axis
		runS, ls := BlockLayout(p.in.Shape, b, p.out.Shape[b])
		runD, ld := BlockLayout(p.out.Shape, a, p.in.Shape[a])
		blk := nIn / int64(D)
		sp := copySpec{ls: ls, ld: ld, n: blk}
		for q := 0; q < D; q++ {
			sp.src = append(sp.src, p.inPtr+uint64(int64(q)*runS*es))
			sp.dst = append(sp.dst, outs[q]+uint64(int64(r)*runD*es))
		}
		return d.runCopy(cs, ch, p, sp, nIn, s)
	case ir.OpBroadcast:
		sp := copySpec{src: []uint64{ins[p.root]}, dst: []uint64{p.outPtr}, n: nIn}
		return d.runCopy(cs, ch, p, sp, nIn, s)
	case ir.OpScatter:
		run, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
		sp := copySpec{src: []uint64{ins[p.root] + uint64(int64(r)*run*es)}, dst: []uint64{p.outPtr}, ls: l, n: nOut}
		return d.runCopy(cs, ch, p, sp, nOut, s)
	case ir.OpGather:
		run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
		sp := copySpec{ld: l, n: nIn}
		if r == p.root {
			for q := 0; q < D; q++ {
				sp.src = append(sp.src, ins[q])
				sp.dst = append(sp.dst, p.outPtr+uint64(int64(q)*run*es))
			}
		}
		return d.runCopy(cs, ch, p, sp, nIn*int64(D), s)
	}
	return fmt.Errorf("no %s algorithm for %s", p.Impl, p.op)
}

// runTwoShotCE is two_shot for large tensors with its second half on the
// copy engines: the reduce kernel writes chunk r only into this rank's
// output, then one cuMemcpy per peer pushes it into the peer's output,
// and a barrier kernel waits until every rank's pushes are done. The
// link carries the same bytes, but the copy engines write over NVLink
// faster than SM stores do.
func (d *Comm) runTwoShotCE(cs *CommState, ch *CommChannel, p *CollPlan, sp reduceSpec, lo int64, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	sp.dst = []uint64{p.outPtr + uint64(lo*p.es)}
	if err := d.runReduce(cs, ch, p, sp, s); err != nil {
		return err
	}
	if sp.n > 0 {
		mine := runtime.Tensor{Buf: p.outB, Offset: p.out.Offset + lo*p.es, DType: p.dt, Shape: []int64{sp.n}}
		for k := 1; k < D; k++ {
			peer, err := d.PeerBuffer(p.outB, (r+k)%D)
			if err != nil {
				return err
			}
			dst := mine
			dst.Buf = peer
			if err := d.Copy(dst, mine, s); err != nil {
				return err
			}
		}
	}
	return d.BarrierKernel(cs, ch, p.what, s)
}
