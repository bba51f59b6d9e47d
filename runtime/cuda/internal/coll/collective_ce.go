package coll

import (
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/runtime"
)

// copy_engine: all_gather through cuMemcpy between barriers.

// runCopyEngine: all_gather through the copy engines: a barrier (every
// input is ready, every output free), one cuMemcpy per rank, a barrier
// (nobody changes its input while a peer reads it, every push has landed
// before anyone reads its output). Where the output is symmetric each
// rank pushes its shard into every peer's output; else it pulls every
// peer's shard through the contiguous view. The copy of this rank's own
// shard runs on a second stream, forked after the first barrier and
// joined before the second, so it overlaps the copies over NVLink
// instead of adding to them.
func (d *Comm) runCopyEngine(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	view, err := d.ContiguousView(p.inB)
	if err != nil {
		return err
	}
	if err := d.ceSide(ch); err != nil {
		return err
	}
	if err := d.BarrierKernel(cs, ch, p.what, s); err != nil {
		return err
	}
	D, r := d.Opts.WorldSize, d.Opts.Rank
	run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
	// copyBlock copies rank q's shard into block q of rank to's output:
	// this rank pulls (to == r, from the view) or pushes (q == r, into
	// to's output through this rank's mapping of it).
	copyBlock := func(q, to int, on *gpu.Stream) error {
		src := runtime.Tensor{Buf: view, Offset: int64(q)*p.inB.Bytes + p.in.Offset, DType: p.dt, Shape: p.in.Shape}
		var out runtime.Buffer = p.outB
		if to != r {
			var err error
			if out, err = d.PeerBuffer(p.outB, to); err != nil {
				return err
			}
		}
		dst := runtime.Tensor{Buf: out, Offset: p.out.Offset + int64(q)*run*p.es, DType: p.dt, Shape: p.in.Shape}
		if l.Run != 0 {
			dst.Strides = runtime.ContiguousStrides(p.out.Shape)
		}
		return d.Copy(dst, src, on)
	}
	return d.ceRound(cs, ch, p, s, func(on *gpu.Stream) error { return copyBlock(r, r, on) }, func(k int) error {
		q := (r + k) % D
		if p.cePush {
			return copyBlock(r, q, s)
		}
		return copyBlock(q, r, s)
	})
}

// ceRound is the body both copy-engine collectives share, after their
// first barrier: own (this rank's local block) on ch's side stream,
// forked from s, overlapping peer(k) for k = 1..D-1 on s; joined, then
// the closing barrier (every push has landed before anyone reads its
// output, nobody reuses its input while a peer reads it).
func (d *Comm) ceRound(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream, own func(on *gpu.Stream) error, peer func(k int) error) error {
	if err := s.Record(ch.evFork); err != nil {
		return err
	}
	if err := ch.side.WaitEvent(ch.evFork); err != nil {
		return err
	}
	if err := own(ch.side); err != nil {
		return err
	}
	if err := ch.side.Record(ch.evJoin); err != nil {
		return err
	}
	for k := 1; k < d.Opts.WorldSize; k++ {
		if err := peer(k); err != nil {
			return err
		}
	}
	if err := s.WaitEvent(ch.evJoin); err != nil {
		return err
	}
	return d.BarrierKernel(cs, ch, p.what, s)
}

// runAllToAllCE is one_shot's all_to_all for large tensors whose blocks
// are contiguous (collPlan.a2aCE): the same pushes into the peers'
// symmetric outputs as the copy kernel, made by the copy engines, which
// write over NVLink faster than SM stores at these sizes (see
// Tuning.AllToAllCEMin). Block q of this rank's input goes to block r of
// rank q's output.
func (d *Comm) runAllToAllCE(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	if err := d.ceSide(ch); err != nil {
		return err
	}
	if err := d.BarrierKernel(cs, ch, p.what, s); err != nil {
		return err
	}
	D, r := d.Opts.WorldSize, d.Opts.Rank
	blk := p.in.Bytes() / int64(D)
	push := func(q int, on *gpu.Stream) error {
		var out runtime.Buffer = p.outB
		if q != r {
			var err error
			if out, err = d.PeerBuffer(p.outB, q); err != nil {
				return err
			}
		}
		n := []int64{blk / p.es}
		src := runtime.Tensor{Buf: p.inB, Offset: p.in.Offset + int64(q)*blk, DType: p.dt, Shape: n}
		dst := runtime.Tensor{Buf: out, Offset: p.out.Offset + int64(r)*blk, DType: p.dt, Shape: n}
		return d.Copy(dst, src, on)
	}
	return d.ceRound(cs, ch, p, s, func(on *gpu.Stream) error { return push(r, on) }, func(k int) error {
		return push((r+k)%D, s)
	})
}

// ceSide makes ch's second stream, its fork and join events and the
// chunked reduce_scatter's events on first use (local: nothing here is
// collective).
func (d *Comm) ceSide(ch *CommChannel) error {
	if ch.side != nil {
		return nil
	}
	side, err := d.OpenStream(false)
	if err != nil {
		return err
	}
	var evs [2 + len(ch.evChunk)]*gpu.Event
	for i := range evs {
		e, err := d.NewOrderEvent()
		if err != nil {
			side.Destroy()
			for _, made := range evs[:i] {
				made.Destroy()
			}
			return err
		}
		evs[i] = e
	}
	ch.side, ch.evFork, ch.evJoin = side, evs[0], evs[1]
	copy(ch.evChunk[:], evs[2:])
	return nil
}

// runReduceScatterCE is reduce_scatter through the copy engines: a
// barrier (every input ready), one copy per peer pulling block r of its
// input (through this rank's mapping of it) into a stream-ordered
// temporary, then the reduce kernel over local memory only, in rank order
// as one_shot sums; the reduce kernel's own barriers close the call (no
// rank writes an output that aliases its input while a peer still pulls
// from it). While the blocks move the SMs stay free for the compute a
// pipelined program overlaps with it (docs/OVERLAP.md); the reduction is
// one pass over local memory. A block that is not contiguous (the axis
// is not outermost) moves through the strided-copy kernel, this rank's own
// too, so that every source of the reduce has one layout.
func (d *Comm) runReduceScatterCE(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	ins := d.peerPtrs(p.inB, p.in, true)
	run, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
	nOut := p.out.NumElements()
	blk := uint64(nOut*es+15) &^ 15 // each pulled block 16-byte aligned: the vector reduce
	strided := l.Run != 0
	pulled := D - 1
	if strided {
		pulled = D
	}
	if err := d.BarrierKernel(cs, ch, p.what, s); err != nil {
		return err
	}
	alias := overlaps(p.in, p.inB, p.out, p.outB)
	if chunk := d.Tune.RSCEChunk / es; chunk > 0 && !strided && !alias && nOut > chunk {
		return d.reduceScatterCEChunks(cs, ch, p, s, ins, run, chunk)
	}
	sp := reduceSpec{dst: []uint64{p.outPtr}, n: nOut, gridN: nOut, tmp: alias}
	return d.Staged(int(max(blk*uint64(pulled), 16)), s, func(tmp uint64) error {
		slot := tmp
		for k := 0; k < D; k++ {
			q := (r + k) % D // ranks start at different peers: no shard serves two pulls at once
			src := ins[q] + uint64(int64(r)*run*es)
			if q == r && !strided {
				sp.src[q] = src
				continue
			}
			if err := d.pullBlock(slot, src, strided, p, s); err != nil {
				return err
			}
			sp.src[q] = slot
			slot += blk
		}
		return d.runReduce(cs, ch, p, sp, s)
	})
}

// pullBlock copies reduce_scatter's block at src (block r of a rank's
// input) to dst, packed: one cuMemcpyAsync where the block is contiguous,
// else the strided-copy kernel.
func (d *Comm) pullBlock(dst, src uint64, strided bool, p *CollPlan, s *gpu.Stream) error {
	n := p.out.NumElements() * p.es
	if n == 0 {
		return nil
	}
	if !strided {
		return d.copyBytes(dst, src, n, s)
	}
	t := runtime.Tensor{DType: p.dt, Shape: p.out.Shape}
	return d.WithCtx(func() error {
		return d.StridedCopy(dst, runtime.ContiguousStrides(p.out.Shape), src, runtime.ContiguousStrides(p.in.Shape), t, s)
	})
}

// reduceScatterCEChunks is runReduceScatterCE on a contiguous block that
// does not alias the output, in chunks of chunk elements: ch's side
// stream pulls chunk c of every peer's block into one of two staging slots
// while the collective's stream reduces chunk c-1 out of the other, so
// the reduction hides under the copies. Each chunk's reduce meets the
// peers (the reduce kernel's barriers: every rank runs the same chunks);
// the first barrier (the caller's) said every input is ready, and no
// output is written over an input here.
func (d *Comm) reduceScatterCEChunks(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream, ins [maxRanks]uint64, run, chunk int64) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	nOut := p.out.NumElements()
	if err := d.ceSide(ch); err != nil {
		return err
	}
	pulled, reduced := ch.evChunk[:2], ch.evChunk[2:]
	slotBytes := uint64(chunk*es) * uint64(D-1) // one chunk of every peer's block
	return d.Staged(int(2*slotBytes), s, func(tmp uint64) error {
		if err := s.Record(ch.evFork); err != nil {
			return err
		}
		if err := ch.side.WaitEvent(ch.evFork); err != nil {
			return err
		}
		for c, lo := 0, int64(0); lo < nOut; c, lo = c+1, lo+chunk {
			n := min(chunk, nOut-lo)
			k := c % 2
			slot := tmp + uint64(k)*slotBytes
			if c >= 2 { // the slot's last chunk is reduced
				if err := ch.side.WaitEvent(reduced[k]); err != nil {
					return err
				}
			}
			sp := reduceSpec{dst: []uint64{p.outPtr + uint64(lo*es)}, n: n, gridN: n}
			for j := 1; j < D; j++ {
				q := (r + j) % D
				src := ins[q] + uint64((int64(r)*run+lo)*es)
				dst := slot + uint64(j-1)*uint64(chunk*es)
				if err := d.copyBytes(dst, src, n*es, ch.side); err != nil {
					return err
				}
				sp.src[q] = dst
			}
			sp.src[r] = ins[r] + uint64((int64(r)*run+lo)*es)
			if err := ch.side.Record(pulled[k]); err != nil {
				return err
			}
			if err := s.WaitEvent(pulled[k]); err != nil {
				return err
			}
			if err := d.runReduce(cs, ch, p, sp, s); err != nil {
				return err
			}
			if err := s.Record(reduced[k]); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyBytes copies n bytes from src to dst on s, on the copy engines
// (either may be a peer's address through this rank's mapping).
func (d *Comm) copyBytes(dst, src uint64, n int64, s *gpu.Stream) error {
	return d.WithCtx(func() error { return d.Drv.MemcpyAsync.Call4(uintptr(dst), uintptr(src), uintptr(n), s.H) })
}
