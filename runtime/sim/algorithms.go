package sim

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// The collective algorithms. Each runs on one rank's stream after the
// ranks met (so every rank's earlier work on its stream, which wrote the
// inputs, is done). Reads and writes of peers' memory go through PeerBuffer
// and ContiguousView; ordering between ranks is by signals (m.signal,
// m.wait, m.barrier) as a GPU kernel orders through signal pads. An
// algorithm that reads peers' inputs ends with a barrier so no rank changes
// its input while a peer still reads it; it writes its own output after
// that barrier, so an output that aliases the input is safe.

// simAlgo is how the sim runs one algorithm of a collective.
type simAlgo struct {
	run func(*collJob, *member) error
	// slot is the bytes one sender needs in a receiver's private staging
	// buffer (collJob.stagingSlot), for an algorithm that moves data through
	// staging buffers rather than symmetric memory; nil: it stages nothing.
	// It must depend only on what the ranks agree on, so every rank
	// computes the same.
	slot func(*collJob) int64
}

type algoKey struct {
	op   ir.Opcode
	algo ir.Algo
}

// algorithms is what the sim runs for each row of the symmetric-heap table
// (ir.SymmetricRules; TestSimRunsEveryRule holds the two equal). auto runs
// one_shot, whose needs the auto row promises. nccl touches no symmetric
// memory, so it runs over private staging buffers: a staged ring for
// all_reduce, reduce_scatter and all_gather, staged point-to-point copies
// for the others. Ring all_reduce and reduce_scatter touch neither tensor
// remotely, so they are the staged ring too.
var algorithms = map[algoKey]simAlgo{
	{ir.OpAllGather, ir.AlgoAuto}:       {run: (*collJob).allGatherOneShot},
	{ir.OpAllGather, ir.AlgoOneShot}:    {run: (*collJob).allGatherOneShot},
	{ir.OpAllGather, ir.AlgoRing}:       {run: (*collJob).allGatherRing},
	{ir.OpAllGather, ir.AlgoCopyEngine}: {run: (*collJob).allGatherCopyEngine},
	{ir.OpAllGather, ir.AlgoNCCL}:       {run: (*collJob).allGatherStagedRing, slot: (*collJob).inputSlot},
	{ir.OpAllGather, ir.AlgoLL}:         {run: (*collJob).allGatherLL, slot: (*collJob).inputSlot},

	{ir.OpReduceScatter, ir.AlgoAuto}:       {run: (*collJob).reduceScatterOneShot},
	{ir.OpReduceScatter, ir.AlgoOneShot}:    {run: (*collJob).reduceScatterOneShot},
	{ir.OpReduceScatter, ir.AlgoRing}:       {run: (*collJob).reduceScatterRing, slot: (*collJob).outputSlot},
	{ir.OpReduceScatter, ir.AlgoCopyEngine}: {run: (*collJob).reduceScatterCopyEngine},
	{ir.OpReduceScatter, ir.AlgoNCCL}:       {run: (*collJob).reduceScatterRing, slot: (*collJob).outputSlot},
	{ir.OpReduceScatter, ir.AlgoLL}:         {run: (*collJob).reduceScatterLL, slot: (*collJob).outputSlot},

	{ir.OpAllReduce, ir.AlgoAuto}:    {run: (*collJob).allReduceOneShot},
	{ir.OpAllReduce, ir.AlgoOneShot}: {run: (*collJob).allReduceOneShot},
	{ir.OpAllReduce, ir.AlgoTwoShot}: {run: (*collJob).allReduceTwoShot},
	{ir.OpAllReduce, ir.AlgoRing}:    {run: (*collJob).allReduceRing, slot: (*collJob).chunkSlot},
	{ir.OpAllReduce, ir.AlgoNCCL}:    {run: (*collJob).allReduceRing, slot: (*collJob).chunkSlot},
	{ir.OpAllReduce, ir.AlgoLL}:      {run: (*collJob).allReduceLL, slot: (*collJob).inputSlot},

	{ir.OpAllToAll, ir.AlgoAuto}:    {run: (*collJob).allToAllOneShot},
	{ir.OpAllToAll, ir.AlgoOneShot}: {run: (*collJob).allToAllOneShot},
	{ir.OpAllToAll, ir.AlgoNCCL}:    {run: (*collJob).allToAllStaged, slot: (*collJob).blockSlot},
	{ir.OpAllToAll, ir.AlgoLL}:      {run: (*collJob).allToAllStaged, slot: (*collJob).blockSlot},

	{ir.OpBroadcast, ir.AlgoAuto}:    {run: (*collJob).broadcastOneShot},
	{ir.OpBroadcast, ir.AlgoOneShot}: {run: (*collJob).broadcastOneShot},
	{ir.OpBroadcast, ir.AlgoNCCL}:    {run: (*collJob).broadcastStaged, slot: (*collJob).inputSlot},
	{ir.OpBroadcast, ir.AlgoLL}:      {run: (*collJob).broadcastStaged, slot: (*collJob).inputSlot},

	{ir.OpReduce, ir.AlgoAuto}:    {run: (*collJob).reduceOneShot},
	{ir.OpReduce, ir.AlgoOneShot}: {run: (*collJob).reduceOneShot},
	{ir.OpReduce, ir.AlgoNCCL}:    {run: (*collJob).reduceStaged, slot: (*collJob).inputSlot},

	{ir.OpGather, ir.AlgoAuto}:    {run: (*collJob).gatherOneShot},
	{ir.OpGather, ir.AlgoOneShot}: {run: (*collJob).gatherOneShot},
	{ir.OpGather, ir.AlgoNCCL}:    {run: (*collJob).gatherStaged, slot: (*collJob).inputSlot},

	{ir.OpScatter, ir.AlgoAuto}:    {run: (*collJob).scatterOneShot},
	{ir.OpScatter, ir.AlgoOneShot}: {run: (*collJob).scatterOneShot},
	{ir.OpScatter, ir.AlgoNCCL}:    {run: (*collJob).scatterStaged, slot: (*collJob).outputSlot},
}

// Staging slots (simAlgo.slot): what one sender puts in a receiver's slot.

// inputSlot: one whole input (staged all_gather, broadcast, reduce, gather).
func (j *collJob) inputSlot() int64 { return j.in.N * j.in.ESize() }

// outputSlot: one output's worth (reduce_scatter's ring, staged scatter).
func (j *collJob) outputSlot() int64 { return j.out.N * j.in.ESize() }

// blockSlot: the input's block for one rank (staged all_to_all).
func (j *collJob) blockSlot() int64 { return j.in.N / int64(j.d.rt.size) * j.in.ESize() }

// chunkSlot: the largest of the D flat chunks of the input (all_reduce's
// ring, chunkBounds).
func (j *collJob) chunkSlot() int64 {
	D := int64(j.d.rt.size)
	return (j.in.N + D - 1) / D * j.in.ESize()
}

// peer is v as it lies in peer's shard of its symmetric buffer.
//
// It reaches the peer's shard buffer directly rather than through
// PeerBuffer, whose views are registered and cached per (rank, peer) until
// the allocation is freed: a collective in which every rank reads every
// peer would leave D² views behind, quadratic in the mesh.
func (j *collJob) peer(v *view, p int) (*view, error) {
	a := v.buf.sym
	if a == nil {
		return nil, fmt.Errorf("%s: buffer %d is %v memory; only symmetric buffers can be reached on peers", j.what, v.buf.id, v.buf.mem)
	}
	if p < 0 || p >= len(a.shards) {
		return nil, fmt.Errorf("%s: peer %d out of range [0, %d)", j.what, p, len(a.shards))
	}
	sh := a.shards[p]
	if sh.freed.Load() {
		return nil, fmt.Errorf("%s: rank %d freed symmetric alloc #%d before the collective read it", j.what, p, a.seq)
	}
	return v.on(sh, 0), nil
}

// reduceFromPeers reduces elements [lo, hi) of v (sliced by sel) over every
// rank's copy, in rank order 0..D-1.
func (j *collJob) reduceFromPeers(v *view, sel func(*view) *compute.View, lo, hi int64) (compute.Acc, error) {
	var total compute.Acc
	for p := 0; p < j.d.rt.size; p++ {
		pv, err := j.peer(v, p)
		if err != nil {
			return compute.Acc{}, err
		}
		x := compute.Load(sel(pv), lo, hi)
		if p == 0 {
			total = x
		} else {
			j.red.Combine(total, x)
		}
	}
	j.red.Finalize(total)
	return total, nil
}

func whole(v *view) *compute.View { return &v.View }

// block is block p (of extent k) along axis.
func block(v *view, axis int, p int, k int64) *compute.View {
	b := v.Slice(axis, int64(p)*k, k)
	return &b
}

func mod(a, n int) int { return ((a % n) + n) % n }

// --- all_reduce ---

// allReduceOneShot: every rank reads every peer's whole input and reduces.
func (j *collJob) allReduceOneShot(m *member) error {
	total, err := j.reduceFromPeers(j.in, whole, 0, j.in.N)
	if err != nil {
		return err
	}
	if err := m.barrier(); err != nil {
		return err
	}
	compute.Store(&j.out.View, 0, total)
	return nil
}

// allReduceTwoShot: rank r reduces chunk r from every peer's input
// (reduce-scatter), then writes it into every peer's output (all-gather).
func (j *collJob) allReduceTwoShot(m *member) error {
	r := j.d.rank
	b := compute.ChunkBounds(j.in.N, j.d.rt.size)
	if b[r] == b[r+1] {
		return m.barrier() // an empty chunk (fewer elements than ranks): nothing to read or write
	}
	total, err := j.reduceFromPeers(j.in, whole, b[r], b[r+1])
	if err != nil {
		return err
	}
	for p := 0; p < j.d.rt.size; p++ {
		pv, err := j.peer(j.out, p)
		if err != nil {
			return err
		}
		compute.Store(&pv.View, b[r], total)
	}
	return m.barrier()
}

// allReduceRing: a ring over private staging buffers on the packed input:
// D-1 reduce-scatter steps, then D-1 all-gather steps.
func (j *collJob) allReduceRing(m *member) error {
	work := j.in.Packed(0, j.in.N)
	b := compute.ChunkBounds(j.in.N, j.d.rt.size)
	if err := j.ringReduceScatter(m, work, b); err != nil {
		return err
	}
	if err := j.ringAllGather(m, work, b); err != nil {
		return err
	}
	j.out.Unpack(0, work)
	return m.finish()
}

// ringReduceScatter: at step s rank r sends its partial of chunk r-s-1 to
// its right neighbour's staging slot and folds the left neighbour's partial
// of chunk r-s-2 into its own, so chunk c is reduced in ring order c+1, c+2,
// …, c and ends on rank c. Partials are stored in the dtype at every hop,
// as a ring's staging buffers hold them.
func (j *collJob) ringReduceScatter(m *member, work []byte, b []int64) error {
	D, r := j.d.rt.size, j.d.rank
	dt, es := j.in.DT, j.in.ESize()
	right, left := mod(r+1, D), mod(r-1, D)
	chunk := func(c int) []byte { return work[b[c]*es : b[c+1]*es] }
	for s := 0; s < D-1; s++ {
		send, recv := mod(r-s-1, D), mod(r-s-2, D)
		if err := m.send(right, chunk(send)); err != nil {
			return err
		}
		mine := chunk(recv)
		err := m.recv(left, int64(len(mine)), func(staged []byte) error {
			partial := compute.Load(compute.Flat(dt, staged), 0, b[recv+1]-b[recv])
			j.red.Combine(partial, compute.Load(compute.Flat(dt, mine), 0, b[recv+1]-b[recv]))
			compute.Store(compute.Flat(dt, mine), 0, partial)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if j.reduceOp == ir.ReduceAvg {
		own := compute.Flat(dt, chunk(r))
		a := compute.Load(own, 0, own.N)
		j.red.Finalize(a)
		compute.Store(own, 0, a)
	}
	return nil
}

// ringAllGather: rank r starts with chunk r final; at step s it forwards
// chunk r-s to the right and receives chunk r-s-1 from the left.
func (j *collJob) ringAllGather(m *member, work []byte, b []int64) error {
	D, r := j.d.rt.size, j.d.rank
	es := j.in.ESize()
	right, left := mod(r+1, D), mod(r-1, D)
	chunk := func(c int) []byte { return work[b[c]*es : b[c+1]*es] }
	for s := 0; s < D-1; s++ {
		send, recv := mod(r-s, D), mod(r-s-1, D)
		if err := m.send(right, chunk(send)); err != nil {
			return err
		}
		dst := chunk(recv)
		if err := m.recv(left, int64(len(dst)), func(staged []byte) error { copy(dst, staged); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// --- reduce_scatter ---

// reduceScatterOneShot: rank r reads chunk r (along the axis) of every
// peer's input and reduces.
func (j *collJob) reduceScatterOneShot(m *member) error {
	r, k := j.d.rank, j.out.Shape[j.axis]
	total, err := j.reduceFromPeers(j.in, func(v *view) *compute.View { return block(v, j.axis, r, k) }, 0, j.out.N)
	if err != nil {
		return err
	}
	if err := m.barrier(); err != nil {
		return err
	}
	compute.Store(&j.out.View, 0, total)
	return nil
}

// reduceScatterCopyEngine: rank r fetches block r of every rank's input
// through the contiguous view of the input's symmetric buffer (the copy
// engines' pulls, on the GPU into staging of the rank's own), meets the
// peers (no rank changes an input a peer still reads), and reduces the
// fetched blocks in rank order, as one_shot does: the same result.
func (j *collJob) reduceScatterCopyEngine(m *member) error {
	r, k := j.d.rank, j.out.Shape[j.axis]
	cv, err := j.d.ContiguousView(j.in.buf)
	if err != nil {
		return fmt.Errorf("%s: %v", j.what, err)
	}
	shard := j.in.buf.Size()
	var total compute.Acc
	for p := 0; p < j.d.rt.size; p++ {
		x := compute.Load(block(j.in.on(cv.(*buffer), int64(p)*shard), j.axis, r, k), 0, j.out.N)
		if p == 0 {
			total = x
		} else {
			j.red.Combine(total, x)
		}
	}
	j.red.Finalize(total)
	if err := m.barrier(); err != nil {
		return err
	}
	compute.Store(&j.out.View, 0, total)
	return nil
}

// reduceScatterRing: the ring's reduce-scatter half over the input's chunks
// along the axis, packed one after another.
func (j *collJob) reduceScatterRing(m *member) error {
	D, r, k := j.d.rt.size, j.d.rank, j.out.Shape[j.axis]
	var work []byte
	for c := 0; c < D; c++ {
		work = append(work, block(j.in, j.axis, c, k).Packed(0, j.out.N)...)
	}
	b := make([]int64, D+1)
	for c := range b {
		b[c] = int64(c) * j.out.N
	}
	if err := j.ringReduceScatter(m, work, b); err != nil {
		return err
	}
	es := j.in.ESize()
	j.out.Unpack(0, work[b[r]*es:b[r+1]*es])
	return m.finish()
}

// --- ll: every rank sends each peer its piece through the peer's
// private staging (the GPU's kernel stores each 8 bytes with flags beside
// them, so the data carries its own readiness); the receiver combines the
// pieces in rank order. all_to_all and broadcast move exactly what their
// staged versions move (allToAllStaged, broadcastStaged).

// allReduceLL: every rank sends its whole input to every peer and reduces
// the D inputs in rank order, as one_shot does.
func (j *collJob) allReduceLL(m *member) error {
	return j.reduceLL(m, func(int) *compute.View { return &j.in.View })
}

// reduceScatterLL: every rank sends block p of its input to rank p and
// reduces the D blocks it receives in rank order, as one_shot does.
func (j *collJob) reduceScatterLL(m *member) error {
	k := j.out.Shape[j.axis]
	return j.reduceLL(m, func(p int) *compute.View { return block(j.in, j.axis, p, k) })
}

// reduceLL sends piece(p) to each peer p, then folds this rank's own piece
// and what each peer sent into one total in rank order 0..D-1.
func (j *collJob) reduceLL(m *member, piece func(p int) *compute.View) error {
	D, r := j.d.rt.size, j.d.rank
	n := j.out.N
	for p := 0; p < D; p++ {
		if p != r {
			if err := m.send(p, piece(p).Packed(0, n)); err != nil {
				return err
			}
		}
	}
	var total compute.Acc
	for q := 0; q < D; q++ {
		var x compute.Acc
		if q == r {
			x = compute.Load(piece(r), 0, n)
		} else if err := m.recv(q, n*j.in.ESize(), func(staged []byte) error {
			x = compute.Load(compute.Flat(j.in.DT, staged), 0, n)
			return nil
		}); err != nil {
			return err
		}
		if q == 0 {
			total = x
		} else {
			j.red.Combine(total, x)
		}
	}
	j.red.Finalize(total)
	compute.Store(&j.out.View, 0, total)
	return m.finish()
}

// allGatherLL: every rank sends its input to every peer and places what
// rank q sent in block q of its output.
func (j *collJob) allGatherLL(m *member) error {
	D, r, k := j.d.rt.size, j.d.rank, j.in.Shape[j.axis]
	data := j.in.Packed(0, j.in.N)
	for p := 0; p < D; p++ {
		if p != r {
			if err := m.send(p, data); err != nil {
				return err
			}
		}
	}
	block(j.out, j.axis, r, k).Unpack(0, data)
	for q := 0; q < D; q++ {
		if q == r {
			continue
		}
		dst := block(j.out, j.axis, q, k)
		if err := m.recv(q, j.in.N*j.in.ESize(), func(staged []byte) error { dst.Unpack(0, staged); return nil }); err != nil {
			return err
		}
	}
	return m.finish()
}

// --- all_gather ---

// allGatherOneShot: rank r writes its input into block r of every peer's
// output; the closing barrier makes all writes visible before anyone goes on.
func (j *collJob) allGatherOneShot(m *member) error {
	r, k := j.d.rank, j.in.Shape[j.axis]
	for p := 0; p < j.d.rt.size; p++ {
		pv, err := j.peer(j.out, p)
		if err != nil {
			return err
		}
		compute.Copy(block(pv, j.axis, r, k), &j.in.View)
	}
	return m.barrier()
}

// allGatherRing: blocks travel around the ring: rank r writes its block
// into its right neighbour's output, then forwards each block it receives
// from the left until every block has gone round; each write is followed by
// a signal to the neighbour.
func (j *collJob) allGatherRing(m *member) error {
	D, r, k := j.d.rt.size, j.d.rank, j.in.Shape[j.axis]
	compute.Copy(block(j.out, j.axis, r, k), &j.in.View)
	if D == 1 {
		return nil
	}
	right, left := mod(r+1, D), mod(r-1, D)
	rightOut, err := j.peer(j.out, right)
	if err != nil {
		return err
	}
	compute.Copy(block(rightOut, j.axis, r, k), &j.in.View)
	m.signal(right, chData)
	for s := 1; s < D-1; s++ {
		if err := m.wait(chData, left); err != nil {
			return err
		}
		c := mod(r-s, D)
		compute.Copy(block(rightOut, j.axis, c, k), block(j.out, j.axis, c, k))
		m.signal(right, chData)
	}
	return m.wait(chData, left) // the last block
}

// allGatherCopyEngine: rank r maps every shard of the input's symmetric
// buffer as one range and copies each rank's place in it into its output.
func (j *collJob) allGatherCopyEngine(m *member) error {
	k := j.in.Shape[j.axis]
	cv, err := j.d.ContiguousView(j.in.buf)
	if err != nil {
		return fmt.Errorf("%s: %v", j.what, err)
	}
	shard := j.in.buf.Size()
	for p := 0; p < j.d.rt.size; p++ {
		compute.Copy(block(j.out, j.axis, p, k), &j.in.on(cv.(*buffer), int64(p)*shard).View)
	}
	return m.barrier()
}

// allGatherStagedRing: the ring's all-gather half over staging buffers.
func (j *collJob) allGatherStagedRing(m *member) error {
	D, r, k := j.d.rt.size, j.d.rank, j.in.Shape[j.axis]
	es := j.in.ESize()
	work := make([]byte, int64(D)*j.in.N*es)
	copy(work[int64(r)*j.in.N*es:], j.in.Packed(0, j.in.N))
	b := make([]int64, D+1)
	for c := range b {
		b[c] = int64(c) * j.in.N
	}
	if err := j.ringAllGather(m, work, b); err != nil {
		return err
	}
	for c := 0; c < D; c++ {
		block(j.out, j.axis, c, k).Unpack(0, work[b[c]*es:b[c+1]*es])
	}
	return m.finish()
}

// --- all_to_all ---

// allToAllOneShot: each pair of ranks is served by the lower of the two:
// rank r writes its block for p into p's output (a remote store) and reads
// p's block for r from p's input (a remote load), for every p >= r.
func (j *collJob) allToAllOneShot(m *member) error {
	r, a, b := j.d.rank, j.concat, j.axis
	ka, kb := j.in.Shape[a], j.out.Shape[b]
	for p := r; p < j.d.rt.size; p++ {
		if p == r {
			compute.Copy(block(j.out, a, r, ka), block(j.in, b, r, kb))
			continue
		}
		pOut, err := j.peer(j.out, p)
		if err != nil {
			return err
		}
		pIn, err := j.peer(j.in, p)
		if err != nil {
			return err
		}
		compute.Copy(block(pOut, a, r, ka), block(j.in, b, p, kb))
		compute.Copy(block(j.out, a, p, ka), block(pIn, b, r, kb))
	}
	return m.barrier()
}

// allToAllStaged: every rank stages its block for each peer in that peer's
// staging buffer, then unpacks what the peers staged for it.
func (j *collJob) allToAllStaged(m *member) error {
	r, a, b := j.d.rank, j.concat, j.axis
	ka, kb := j.in.Shape[a], j.out.Shape[b]
	blockElems := j.in.N / int64(j.d.rt.size)
	for p := 0; p < j.d.rt.size; p++ {
		if p != r {
			if err := m.send(p, block(j.in, b, p, kb).Packed(0, blockElems)); err != nil {
				return err
			}
		}
	}
	compute.Copy(block(j.out, a, r, ka), block(j.in, b, r, kb))
	for p := 0; p < j.d.rt.size; p++ {
		if p == r {
			continue
		}
		dst := block(j.out, a, p, ka)
		if err := m.recv(p, blockElems*j.in.ESize(), func(staged []byte) error { dst.Unpack(0, staged); return nil }); err != nil {
			return err
		}
	}
	return m.finish()
}

// --- broadcast, reduce, gather, scatter ---

// broadcastOneShot: every rank reads the root's input; barrier; writes its
// output.
func (j *collJob) broadcastOneShot(m *member) error {
	return j.fromRootOneShot(m, func(root *view) *compute.View { return &root.View })
}

// scatterOneShot: every rank reads its block of the root's input; barrier;
// writes its output.
func (j *collJob) scatterOneShot(m *member) error {
	return j.fromRootOneShot(m, func(root *view) *compute.View { return block(root, j.axis, j.d.rank, j.out.Shape[j.axis]) })
}

// fromRootOneShot reads part of the root's input (all of it, or this rank's
// block), waits for every rank to have read, and writes it to the output.
func (j *collJob) fromRootOneShot(m *member, part func(root *view) *compute.View) error {
	src, err := j.peer(j.in, j.root)
	if err != nil {
		return err
	}
	data := part(src).Packed(0, j.out.N)
	if err := m.barrier(); err != nil {
		return err
	}
	j.out.Unpack(0, data)
	return nil
}

// reduceOneShot: the root reads every rank's input and reduces in rank
// order; barrier. Other ranks' outputs are left untouched.
func (j *collJob) reduceOneShot(m *member) error {
	if j.d.rank != j.root {
		return m.barrier()
	}
	return j.allReduceOneShot(m) // the root does what every rank of an all_reduce does
}

// gatherOneShot: the root reads every rank's input into block p of its
// output; barrier. Other ranks' outputs are left untouched.
func (j *collJob) gatherOneShot(m *member) error {
	if j.d.rank != j.root {
		return m.barrier()
	}
	k := j.in.Shape[j.axis]
	for p := 0; p < j.d.rt.size; p++ {
		pv, err := j.peer(j.in, p)
		if err != nil {
			return err
		}
		compute.Copy(block(j.out, j.axis, p, k), &pv.View)
	}
	return m.barrier()
}

// broadcastStaged: the root sends its input to every rank's staging buffer.
func (j *collJob) broadcastStaged(m *member) error {
	return j.fromRootStaged(m, func(int) *compute.View { return &j.in.View })
}

// scatterStaged: the root sends block p of its input to rank p's staging
// buffer.
func (j *collJob) scatterStaged(m *member) error {
	return j.fromRootStaged(m, func(p int) *compute.View { return block(j.in, j.axis, p, j.out.Shape[j.axis]) })
}

// fromRootStaged: the root sends part(p) of its input to each rank p
// through p's staging buffer and copies its own part; the others unpack
// what they receive.
func (j *collJob) fromRootStaged(m *member, part func(p int) *compute.View) error {
	r, root := j.d.rank, j.root
	if r == root {
		for p := 0; p < j.d.rt.size; p++ {
			if p != root {
				if err := m.send(p, part(p).Packed(0, j.out.N)); err != nil {
					return err
				}
			}
		}
		compute.Copy(&j.out.View, part(root))
		return m.finish()
	}
	return m.recv(root, j.out.N*j.in.ESize(), func(staged []byte) error { j.out.Unpack(0, staged); return nil })
}

// reduceStaged: every rank sends its input to the root's staging buffer;
// the root reduces them in rank order.
func (j *collJob) reduceStaged(m *member) error {
	var total compute.Acc
	err := j.toRootStaged(m, func(p int, v *compute.View) {
		x := compute.Load(v, 0, v.N)
		if p == 0 {
			total = x
		} else {
			j.red.Combine(total, x)
		}
	})
	if err != nil || j.d.rank != j.root {
		return err
	}
	j.red.Finalize(total)
	compute.Store(&j.out.View, 0, total)
	return nil
}

// gatherStaged: every rank sends its input to the root's staging buffer;
// the root places rank p's in block p of its output.
func (j *collJob) gatherStaged(m *member) error {
	return j.toRootStaged(m, func(p int, v *compute.View) { compute.Copy(block(j.out, j.axis, p, j.in.Shape[j.axis]), v) })
}

// toRootStaged: ranks other than the root send their input to the root's
// staging buffer; the root hands use each rank's input (its own in place),
// in rank order.
func (j *collJob) toRootStaged(m *member, use func(p int, v *compute.View)) error {
	r, root := j.d.rank, j.root
	if r != root {
		if err := m.send(root, j.in.Packed(0, j.in.N)); err != nil {
			return err
		}
		return m.finish()
	}
	for p := 0; p < j.d.rt.size; p++ {
		if p == root {
			use(p, &j.in.View)
			continue
		}
		err := m.recv(p, j.in.N*j.in.ESize(), func(staged []byte) error {
			v := compute.Flat(j.in.DT, staged)
			v.Shape, v.Strides = j.in.Shape, runtime.ContiguousStrides(j.in.Shape)
			use(p, v)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
