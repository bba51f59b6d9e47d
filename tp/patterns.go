package tp

import (
	"fmt"

	"github.com/hirlab/hir/ir"
)

// AllGatherMatmul appends all_gather(x) × w: x is [M/DIDx, K] (each rank
// holds M/mesh rows), w this rank's [K, N] weight block; the result is
// this rank's [M, N]. PeerRing reads the peers' rows through the
// symmetric contiguous view, so x must be symmetric there.
func AllGatherMatmul(b *ir.Builder, x, w *ir.Value, o Options) (*ir.Value, error) {
	const pattern = "AllGatherMatmul"
	mesh, m, k, n, err := o.check(b, pattern, x, w, true)
	if err != nil {
		return nil, err
	}
	dt, rows := x.Tensor().DType, m/mesh
	switch o.Decomposition {
	case Unpipelined:
		g := o.collective(b, ir.OpAllGather, x).Type(tensor(dt, ir.Symmetric, m, k)).Value()
		return b.Op(ir.OpMatmul, g, w).Value(), nil
	case Chunked, ChunkedAsync:
		c, err := o.chunks(pattern, rows)
		if err != nil {
			return nil, err
		}
		ch := rows / c
		// [M/DIDx, K] as [mesh/DIDx, chunks, rows of a chunk, K]: select
		// axis 1 takes one chunk of every rank's block.
		x4 := reshape(b, x, mesh, c, ch, k)
		out := b.AllocUninit(ir.Tensor(dt, mesh, c, ch, n))
		gather := func(i *ir.Value, async bool) *ir.Value {
			ob := o.collective(b, ir.OpAllGather, sel(b, x4, i, 1, false))
			if async {
				ob.Bool("async", true)
			}
			return ob.Type(tensor(dt, ir.Symmetric, mesh, ch, k)).Value()
		}
		// each rank's rows of the piece, multiplied straight into their
		// place in out (a strided view: cuBLAS takes it as it lies)
		multiply := func(i, g *ir.Value) {
			b.Op(ir.OpMatmul, g, w, sel(b, out, i, 1, false))
		}
		if o.Decomposition == Chunked {
			o.loop(b, "c", c, func(i *ir.Value) { multiply(i, gather(i, false)) })
			return reshape(b, out, m, n), nil
		}
		// every piece's gather posted first: they queue on the
		// communication stream in order
		gs := make([]*ir.Value, c)
		for i := range gs {
			gs[i] = gather(ir.Int(int64(i)), true)
		}
		for i, g := range gs {
			b.Op(ir.OpWait, g)
			multiply(ir.Int(int64(i)), g)
		}
		return reshape(b, out, m, n), nil
	case PeerRing:
		if x.Tensor().Mem != ir.Symmetric {
			return nil, fmt.Errorf("tp.%s: %s reads the peers' rows through the contiguous view, so %s must be symmetric; it is %s", pattern, PeerRing, x, x.Tensor())
		}
		view := b.Op(ir.OpSymmetricContiguousView, reshape(b, x, mesh, rows, k)).Value()
		out := b.AllocUninit(ir.Tensor(dt, mesh, rows, n))
		o.loop(b, "s", mesh, func(s *ir.Value) {
			// step s: the rows of peer rank+s, copied here, multiplied
			// into their place in out
			local := b.Op(ir.OpCopy, sel(b, view, s, 0, true)).Value()
			b.Op(ir.OpMatmul, local, w, sel(b, out, s, 0, true))
		})
		return reshape(b, out, m, n), nil
	case LocalFirst:
		if x.Tensor().Mem != ir.Symmetric {
			return nil, fmt.Errorf("tp.%s: %s reads the peers' rows through the contiguous view, so %s must be symmetric; it is %s", pattern, LocalFirst, x, x.Tensor())
		}
		c, err := o.pieces(pattern, rows)
		if err != nil {
			return nil, err
		}
		ch := rows / c
		view := b.Op(ir.OpSymmetricContiguousView, reshape(b, x, mesh, rows, k)).Value()
		out := b.AllocUninit(ir.Tensor(dt, mesh, rows, n))
		// The peers' rows, rank+1 first, a piece at a time, copied on
		// streams of the decomposition's own (the copy engines: the SMs
		// stay the matmuls'), the pieces dealt round the streams; every
		// matmul below waits for its own copy only (a value read on
		// another stream waits for its producer there).
		fetch := o.sideStreams(b, mesh)
		rowsOf := make([][]*ir.Value, mesh)
		for s := int64(1); s < mesh; s++ {
			peer := split(b, sel(b, view, ir.Int(s), 0, true), c, ch, k)
			rowsOf[s] = make([]*ir.Value, c)
			for j := range c {
				b.Op(ir.OpSetStream, fetch[((s-1)*c+j)%int64(len(fetch))])
				rowsOf[s][j] = b.Op(ir.OpCopy, peer[j]).Value()
			}
		}
		if len(fetch) > 0 {
			b.Op(ir.OpSetStream)
		}
		// this rank's rows where they lie (its own shard, seen through
		// the view: no copy), in one matmul, while the peers' move
		b.Op(ir.OpMatmul, sel(b, view, ir.Int(0), 0, true), w, sel(b, out, ir.Int(0), 0, true))
		for s := int64(1); s < mesh; s++ {
			to := split(b, sel(b, out, ir.Int(s), 0, true), c, ch, n)
			for j := range c {
				b.Op(ir.OpMatmul, rowsOf[s][j], w, to[j])
			}
		}
		return reshape(b, out, m, n), nil
	}
	if !o.Decomposition.Has(AGMatmul) {
		return nil, fmt.Errorf("tp.%s: %s is matmul + reduce_scatter's (the peers' products pushed while this rank's own is made); all_gather + matmul has no %s", pattern, o.Decomposition, o.Decomposition)
	}
	return nil, fmt.Errorf("tp.%s: no decomposition %s", pattern, o.Decomposition)
}

// MatmulReduceScatter appends reduce_scatter(a × w) by rows: a is this
// rank's [M, K] block, w its [K, N] weight block; the result is the sum
// over ranks of their products, [M/DIDx, N] (each rank holds its M/mesh
// rows). PeerRing writes each product block into its owner's slot through
// the symmetric contiguous view and meets the peers twice (barrier) per
// call: before writing, so no peer still reads the slots, and after.
func MatmulReduceScatter(b *ir.Builder, a, w *ir.Value, o Options) (*ir.Value, error) {
	const pattern = "MatmulReduceScatter"
	mesh, m, k, n, err := o.check(b, pattern, a, w, false)
	if err != nil {
		return nil, err
	}
	dt, rows := a.Tensor().DType, m/mesh
	switch o.Decomposition {
	case Unpipelined:
		p := b.Op(ir.OpMatmul, a, w).Value()
		return o.collective(b, ir.OpReduceScatter, p).Int("axis", 0).Type(tensor(dt, ir.Symmetric, m, n).Sharded(0)).Value(), nil
	case Chunked, ChunkedAsync:
		c, err := o.chunks(pattern, rows)
		if err != nil {
			return nil, err
		}
		ch := rows / c
		out := b.AllocUninit(ir.Tensor(dt, m, n).Sharded(0))
		out4 := reshape(b, out, mesh, c, ch, n) // [mesh/DIDx, chunks, ch, N]
		a4 := reshape(b, a, mesh, c, ch, k)
		// chunk i of every rank's block, multiplied and reduce-scattered
		// straight into piece i of this rank's rows (the collective's
		// output operand: no copy after it)
		scatter := func(i *ir.Value, async bool) *ir.Value {
			p := b.Op(ir.OpMatmul, sel(b, a4, i, 1, false), w).Value()
			ob := b.Op(ir.OpReduceScatter, p, sel(b, out4, i, 1, false)).Int("axis", 0)
			if o.Algo != ir.AlgoAuto {
				ob.Word("algo", o.Algo.String())
			}
			if async {
				ob.Bool("async", true)
			}
			return ob.Value()
		}
		if o.Decomposition == Chunked {
			o.loop(b, "c", c, func(i *ir.Value) { scatter(i, false) })
			return out, nil
		}
		// each piece's reduce_scatter is posted as soon as its product is
		// made, and moves while the next piece is multiplied
		rs := make([]*ir.Value, c)
		for i := range rs {
			rs[i] = scatter(ir.Int(int64(i)), true)
		}
		for _, r := range rs {
			b.Op(ir.OpWait, r)
		}
		return out, nil
	case PeerRing:
		// slots[owner][source]: what rank source computed for owner's rows
		slots := b.AllocUninit(tensor(dt, ir.Symmetric, mesh, mesh, rows, n).Sharded(0))
		view := b.Op(ir.OpSymmetricContiguousView, slots).Value()
		a3 := reshape(b, a, mesh, rows, k)
		b.Op(ir.OpBarrier)
		o.loop(b, "s", mesh, func(s *ir.Value) {
			// step s: the block of rank+s, multiplied straight into its
			// slot for this rank in that rank's memory (the matmul's
			// stores go over the link; no copy after it)
			owner := sel(b, view, s, 0, true)
			b.Op(ir.OpMatmul, sel(b, a3, s, 0, true), w, sel(b, owner, ir.Int(0), 0, true))
		})
		b.Op(ir.OpBarrier)
		sum := b.Op(ir.OpSum, slots).Ints("axes", 1).Value()
		return reshape(b, sum, m, n), nil
	case PeersFirst:
		c, err := o.pieces(pattern, rows)
		if err != nil {
			return nil, err
		}
		ch := rows / c
		// slots[owner][source], as PeerRing's
		slots := b.AllocUninit(tensor(dt, ir.Symmetric, mesh, mesh, rows, n).Sharded(0))
		view := b.Op(ir.OpSymmetricContiguousView, slots).Value()
		a3 := reshape(b, a, mesh, rows, k)
		// rank+s's slot for this rank's product, in rank+s's memory
		slot := func(s int64) *ir.Value {
			return sel(b, sel(b, view, ir.Int(s), 0, true), ir.Int(0), 0, true)
		}
		// No rank still sums the Run before's slots before anyone
		// writes: a meeting on the device.
		b.Op(ir.OpStreamBarrier)
		push := o.sideStreams(b, mesh)
		for s := int64(1); s < mesh; s++ {
			// the product for rank+s, then its push on the copy engines
			// (waiting for the product only), the pieces of rows dealt
			// round the push streams, while the next product is made
			p := split(b, b.Op(ir.OpMatmul, sel(b, a3, ir.Int(s), 0, true), w).Value(), c, ch, n)
			to := split(b, slot(s), c, ch, n)
			for j := range c {
				b.Op(ir.OpSetStream, push[((s-1)*c+j)%int64(len(push))])
				b.Op(ir.OpCopy, p[j], to[j])
			}
			b.Op(ir.OpSetStream)
		}
		b.Op(ir.OpMatmul, sel(b, a3, ir.Int(0), 0, true), w, slot(0))
		for _, st := range push {
			b.Op(ir.OpWaitStream, st)
		}
		// every rank's pushes have landed
		b.Op(ir.OpStreamBarrier)
		sum := b.Op(ir.OpSum, slots).Ints("axes", 1).Value()
		return reshape(b, sum, m, n), nil
	case RingAccumulate:
		if mesh == 1 {
			return b.Op(ir.OpMatmul, a, w).Value(), nil
		}
		c, err := o.chunks(pattern, rows)
		if err != nil {
			return nil, err
		}
		ch := rows / c
		// slots[rank][q]: the partial this rank adds into at step q+1,
		// pushed by the rank before it
		slots := b.AllocUninit(tensor(dt, ir.Symmetric, mesh, mesh-1, rows, n).Sharded(0))
		view := b.Op(ir.OpSymmetricContiguousView, slots).Value()
		own, next := sel(b, view, ir.Int(0), 0, true), sel(b, view, ir.Int(1), 0, true)
		piece := func(blocks *ir.Value, q int64) []*ir.Value { // slot q's pieces of rows
			return split(b, sel(b, blocks, ir.Int(q), 0, false), c, ch, n)
		}
		a3 := reshape(b, a, mesh, rows, k)
		// this rank's rows for the owner s+1 ranks behind it, in pieces
		rowsFor := func(s int64) []*ir.Value {
			return split(b, sel(b, a3, ir.Int(mesh-1-s), 0, true), c, ch, k)
		}
		np := o.Streams
		if np == 0 {
			np = int(c) // one per piece: a piece's accumulation waits for its own push only
		}
		push := make([]*ir.Value, np)
		for i := range push {
			push[i] = b.Op(ir.OpStream).Value()
		}
		send := func(j int64, from, to *ir.Value) {
			b.Op(ir.OpSetStream, push[j%int64(len(push))])
			b.Op(ir.OpCopy, from, to)
			b.Op(ir.OpSetStream)
		}
		// No rank still reads the Run before's slots before anyone writes.
		b.Op(ir.OpStreamBarrier)
		// step 0: each piece's product starts its chain
		xs, to := rowsFor(0), piece(next, 0)
		for j := range c {
			send(j, b.Op(ir.OpMatmul, xs[j], w).Value(), to[j])
		}
		for s := int64(1); s < mesh; s++ {
			xs, mine := rowsFor(s), piece(own, s-1)
			var to []*ir.Value
			if s < mesh-1 {
				to = piece(next, s)
			}
			for j := range c {
				// every rank's push of this piece at step s-1 has landed
				b.Op(ir.OpWaitStream, push[j%int64(len(push))])
				b.Op(ir.OpStreamBarrier)
				// the push reads the matmul's result (not the slot's view),
				// so it waits for the matmul on its stream
				sum := b.Op(ir.OpMatmul, xs[j], w, mine[j]).Bool("accumulate", true).Value()
				if to != nil {
					send(j, sum, to[j])
				}
			}
		}
		for _, st := range push {
			b.Op(ir.OpWaitStream, st)
		}
		last := sel(b, slots, ir.Int(mesh-2), 1, false) // [mesh/DIDx, rows, n]
		return reshape(b, last, m, n), nil
	}
	if !o.Decomposition.Has(MatmulRS) {
		return nil, fmt.Errorf("tp.%s: %s is all_gather + matmul's (the peers' rows fetched while this rank's own are multiplied); matmul + reduce_scatter has no %s", pattern, o.Decomposition, o.Decomposition)
	}
	return nil, fmt.Errorf("tp.%s: no decomposition %s", pattern, o.Decomposition)
}
