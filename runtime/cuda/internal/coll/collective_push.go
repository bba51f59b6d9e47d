package coll

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// Pushes with a reduce that follows the data: reduce_scatter copy_engine
// and two_shot all_reduce on large tensors (CollPlan.push).
//
// Every rank's copy engines push chunk c of peer q's block of the input
// into q's staging (the channel's push staging, one region per sender
// and slot), one stream per peer so the links to every peer are busy at
// once; a one-block kernel after each copy puts the flag "slot s holds
// its u-th chunk" into q's pad and, before a slot is filled again, waits
// for q's ack. The collective's stream reduces chunk c of this rank's
// block as soon as every peer's chunk c has landed (a one-block kernel
// waits for the flags, then the reduce runs on the whole grid: on 32
// blocks it was slower than the copies), then acks the slot; so the
// reduction runs under the copies of the chunks after it, and only the
// last chunk's reduce adds to the copies' time. Pushes write over NVLink
// faster than pulls read (COLLECTIVES.md), and no barrier closes the
// call: the last step on each push stream waits for the peer's final
// acks. all_reduce (two_shot) also pushes each reduced chunk into every
// peer's output on the same streams, a chunk behind the reduce, and the
// last ack waits until every peer's pushes into this rank's output have
// landed. The words of the protocol are use counts within the call, zero
// again at its end (kernels/collective.cu, "copy-engine pushes").

// maxPushSlots bounds Tuning.PushSlots, the staging slots per (receiver,
// sender).
const maxPushSlots = 8

// pushStaging is a channel's push staging per rank (its own: a ring or LL
// call that follows on the channel must not write where a peer's last
// chunk still waits for its reduce).
const pushStaging = 128 << 20

// pushChunks is how many chunks a block is cut into by default (the last
// chunk's reduce is what the copies do not hide), and pushMinChunk the
// least chunk (smaller copies run below the link's rate).
const (
	pushChunks   = 16
	pushMinChunk = 2 << 20
)

// pushJob is one call's pushes, in elements of the input.
type pushJob struct {
	off, n [maxRanks]int64 // rank q's block: offset and length, in the input (and, gathering, the output)
	in     uint64          // this rank's input
	out    uint64          // where this rank's reduced block goes
	outs   [maxRanks]uint64
	gather bool // all_reduce: push the reduced block into outs[q] + off[r] too
}

// pushes says whether p runs as pushes with a reduce: reduce_scatter
// copy_engine and two_shot all_reduce gathering on the copy engines,
// with contiguous blocks, the output overlapping the input at most in
// place (all_reduce: the same bytes; reduce_scatter: not at all).
func (d *Comm) pushes(p *CollPlan) bool {
	if d.Opts.WorldSize < 2 {
		return false
	}
	switch {
	case p.op == ir.OpReduceScatter && p.Impl == ir.AlgoCopyEngine:
		if _, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis]); l.Run != 0 {
			return false
		}
		// No overlap at all: whether it is this rank's own block differs
		// between ranks, and the pushes must agree.
		return !overlaps(p.in, p.inB, p.out, p.outB)
	case p.op == ir.OpAllReduce && p.twoShotCE:
		return !overlaps(p.in, p.inB, p.out, p.outB) || p.inB == p.outB && p.out.Offset == p.in.Offset
	}
	return false
}

// pushChunk is p's chunk in bytes (a multiple of 16): Tuning.PushChunk,
// else a pushChunks-th of the widest block, at least pushMinChunk; never
// more than a staging region holds nor than the widest block needs.
func (d *Comm) pushChunk(p *CollPlan) int64 {
	D := int64(d.Opts.WorldSize)
	widest := p.out.Bytes() // reduce_scatter: every block is the output's size
	if p.op == ir.OpAllReduce {
		widest = (p.in.Bytes()+D-1)/D + 16
	}
	c := d.Tune.PushChunk
	if c == 0 {
		c = max(pushMinChunk, widest/pushChunks)
	}
	region := pushStaging / (D * int64(d.Tune.PushSlots))
	return max(16, min(c, region, widest+15)&^15)
}

// reduceScatterPush is reduce_scatter's job: block q is the q-th
// output-sized run of the input.
func reduceScatterPush(p *CollPlan, D int) *pushJob {
	j := &pushJob{in: p.inPtr, out: p.outPtr}
	n := p.out.NumElements()
	for q := range j.n[:D] {
		j.off[q], j.n[q] = int64(q)*n, n
	}
	return j
}

// twoShotPush is two_shot all_reduce's job: block q is two_shot's chunk
// q (bounds), reduced into this rank's output and gathered into every
// peer's.
func twoShotPush(p *CollPlan, bounds [maxRanks + 1]int64, D, r int) *pushJob {
	j := &pushJob{in: p.inPtr, gather: true}
	for q := range j.n[:D] {
		j.off[q], j.n[q] = bounds[q], bounds[q+1]-bounds[q]
		j.outs[q] = p.outB.Sym.Maps[q].Ptr + uint64(p.out.Offset)
	}
	j.out = p.outPtr + uint64(j.off[r]*p.es)
	return j
}

// runPush runs j on stream s: the opening barrier (every rank is in the
// call, so no earlier collective still uses the staging or the outputs),
// then the chunks, as the comment at the top says.
func (d *Comm) runPush(cs *CommState, ch *CommChannel, p *CollPlan, j *pushJob, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	stage, err := d.symStage(&ch.pushStage, pushStaging, "push staging")
	if err != nil {
		return err
	}
	if err := d.pushStreams(ch); err != nil {
		return err
	}
	push := ch.push
	S := int64(d.Tune.PushSlots)
	C := p.pushChunk / es
	region := uint64(p.pushChunk)
	var widest int64
	for q := 0; q < D; q++ {
		widest = max(widest, j.n[q])
	}
	K := max(1, (widest+C-1)/C)
	span := func(q int, c int64) (lo, n int64) { return c * C, max(0, min(C, j.n[q]-c*C)) }
	use := func(c int64) int64 { return c/S + 1 }
	step := func(k int, put, slot int64, wait *[maxPushSlots]int64, done int64, last bool) error {
		a := d.baseArgs(cs, ch, 0)
		a.Peer, a.N, a.Seg, a.NSeg, a.NTask = int32((r+k)%D), put, slot, done, int32(S)
		if wait != nil {
			copy(a.Chunk[:], wait[:])
		}
		if last {
			a.Mode = modeCEReset
		}
		return d.launchColl(cs, "hir_ce_step", 1, &a, push[k])
	}
	gather := func(k int, c int64) error {
		if err := push[k].WaitEvent(ch.reduced[c%2]); err != nil {
			return err
		}
		lo, n := span(r, c)
		if n == 0 {
			return nil
		}
		at := uint64((j.off[r] + lo) * es)
		return d.copyBytes(j.outs[(r+k)%D]+at, j.outs[r]+at, n*es, push[k])
	}

	if err := d.BarrierKernel(cs, ch, p.what, s); err != nil {
		return err
	}
	if err := s.Record(ch.evFork); err != nil {
		return err
	}
	for k := 1; k < D; k++ {
		if err := push[k].WaitEvent(ch.evFork); err != nil {
			return err
		}
	}
	// ack puts use(c) into every peer's ack of chunk c's slot (c >= 0)
	// and waits for chunk next's flags (next < K), on s.
	ack := func(c, next int64) error {
		a := d.baseArgs(cs, ch, 0)
		a.NTask = int32(S)
		if c >= 0 {
			a.Seg, a.N = c%S, use(c)
		}
		if next < K {
			a.Chunk[0], a.Chunk[1] = use(next), next%S
		} else {
			a.Mode = modeCEReset
			if j.gather {
				a.NSeg = 1
			}
		}
		return d.launchColl(cs, "hir_ce_ack", 1, &a, s)
	}
	for c := int64(0); c < K; c++ {
		slot := c % S
		for k := 1; k < D; k++ {
			q := (r + k) % D
			if lo, n := span(q, c); n > 0 {
				dst := stage[q] + uint64(int64(r)*S+slot)*region
				if err := d.copyBytes(dst, j.in+uint64((j.off[q]+lo)*es), n*es, push[k]); err != nil {
					return err
				}
			}
			// The flag for this copy; then wait until the slot the next
			// chunk fills was acked for its use before.
			var wait [maxPushSlots]int64
			if next := c + 1; next >= S && next < K {
				wait[next%S] = use(next) - 1
			}
			if err := step(k, use(c), slot, &wait, 0, false); err != nil {
				return err
			}
			if j.gather && c > 0 {
				if err := gather(k, c-1); err != nil {
					return err
				}
			}
		}
		if err := ack(c-1, c); err != nil {
			return err
		}
		lo, n := span(r, c)
		sp := reduceSpec{dst: []uint64{j.out + uint64(lo*es)}, n: n, gridN: C, pushed: true}
		for q := 0; q < D; q++ {
			sp.src[q] = stage[r] + uint64(int64(q)*S+slot)*region
		}
		sp.src[r] = j.in + uint64((j.off[r]+lo)*es)
		if err := d.runReduce(cs, ch, p, sp, s); err != nil {
			return err
		}
		if j.gather {
			if err := s.Record(ch.reduced[c%2]); err != nil {
				return err
			}
		}
	}
	if err := ack(K-1, K); err != nil {
		return err
	}
	// Each push stream: the last gather, then wait for the peer's final
	// ack of every slot (and clear them), and join.
	var final [maxPushSlots]int64
	for slot := int64(0); slot < min(K, S); slot++ {
		final[slot] = (K-1-slot)/S + 1
	}
	var done int64
	if j.gather {
		done = 1
	}
	for k := 1; k < D; k++ {
		if j.gather {
			if err := gather(k, K-1); err != nil {
				return err
			}
		}
		if err := step(k, 0, 0, &final, done, true); err != nil {
			return err
		}
		if err := push[k].Record(ch.pushJoin[k]); err != nil {
			return err
		}
		if err := s.WaitEvent(ch.pushJoin[k]); err != nil {
			return err
		}
	}
	return nil
}

// pushStreams makes ch's push streams (one per peer offset), their join
// events, the reduced-chunk events and the fork event on first use (local:
// nothing here is collective).
func (d *Comm) pushStreams(ch *CommChannel) error {
	if err := d.ceSide(ch); err != nil {
		return err
	}
	if ch.reduced[1] != nil {
		return nil
	}
	for k := 1; k < d.Opts.WorldSize; k++ {
		if ch.push[k] == nil {
			st, err := d.OpenStream(false)
			if err != nil {
				return err
			}
			ch.push[k] = st
		}
		if ch.pushJoin[k] == nil {
			e, err := d.NewOrderEvent()
			if err != nil {
				return err
			}
			ch.pushJoin[k] = e
		}
	}
	for i := range ch.reduced {
		if ch.reduced[i] == nil {
			e, err := d.NewOrderEvent()
			if err != nil {
				return err
			}
			ch.reduced[i] = e
		}
	}
	return nil
}
