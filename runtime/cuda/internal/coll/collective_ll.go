package coll

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

// algo=ll: the low-latency protocol (kernels/collective.cu, "LL"): every
// rank stores the piece it sends each peer, 8 bytes with two flags per
// 16-byte line, into the peer's LL staging, and the peer polls for the
// flags; one launch, no barrier before or after. all_reduce one_shot of
// small tensors runs the same kernel (collPlan.ll). hir_ll_<dt>_<op>
// reduces (all_reduce, reduce_scatter), hir_ll_copy moves (all_gather,
// all_to_all, broadcast).

// llStage is every rank's LL staging of channel ch, bulkStage its bulk
// staging (symmetric: made, collectively, on the channel's first launch
// that needs it).
func (d *Comm) llStage(ch *CommChannel) ([maxRanks]uint64, error) {
	return d.channelStage(&ch.ll, &ch.llPtrs, int64(2*d.Opts.WorldSize*llSeg), "LL staging")
}

func (d *Comm) ll128Stage(ch *CommChannel) ([maxRanks]uint64, error) {
	return d.channelStage(&ch.ll128, &ch.ll128Ptrs, int64(2*d.Opts.WorldSize*llSeg), "LL128 staging")
}

func (d *Comm) bulkStage(ch *CommChannel) ([maxRanks]uint64, error) {
	return d.channelStage(&ch.bulk, &ch.bulkPtrs, int64(2*d.Opts.WorldSize*bulkSeg), "LL bulk staging")
}

func (d *Comm) channelStage(b **gpu.Buffer, ptrs *[]uint64, size int64, what string) ([maxRanks]uint64, error) {
	var out [maxRanks]uint64
	if *b == nil {
		nb, err := d.AllocSymmetric(size)
		if err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		*b = nb
		for _, m := range nb.Sym.Maps {
			*ptrs = append(*ptrs, m.Ptr)
		}
	}
	copy(out[:], *ptrs)
	return out, nil
}

// llFast says whether a piece at base with layout l (in bytes) allows
// whole 8-byte accesses.
func llFast(base uint64, l lay) bool {
	return base%8 == 0 && (l.Run == 0 || l.Run%8 == 0 && l.Pitch%8 == 0)
}

// runLL runs p through the LL kernels. An output that overlaps the input
// (other than all_reduce's in place, which the kernel handles: each
// thread reads its lines before it writes them) reads a stream-ordered
// copy of the input instead.
func (d *Comm) runLL(cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	inPlace := p.op == ir.OpAllReduce && p.inPtr == p.outPtr
	if inPlace || !overlaps(p.in, p.inB, p.out, p.outB) {
		return d.launchLL(cs, ch, p, p.inPtr, s)
	}
	n := p.in.Bytes()
	return d.Staged(int(max(n, 16)), s, func(tmp uint64) error {
		dst := runtime.Tensor{Buf: d.tempBuffer(tmp, n), DType: p.dt, Shape: p.in.Shape}
		if err := d.Copy(dst, p.in, s); err != nil {
			return err
		}
		return d.launchLL(cs, ch, p, tmp, s)
	})
}

// launchLL launches p's LL kernel reading the input at in: LL lines for
// small pieces, LL128 lines for mid-size ones, bulk for large ones
// (p.proto, llProtocol's).
func (d *Comm) launchLL(cs *CommState, ch *CommChannel, p *CollPlan, in uint64, s *gpu.Stream) error {
	if p.proto == protoBulk {
		return d.launchBulk(cs, ch, p, in, s)
	}
	wide := p.proto == protoLL128
	stage, err := d.llStage(ch)
	if wide {
		stage, err = d.ll128Stage(ch)
	}
	if err != nil {
		return err
	}
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.Seg = llSeg
	// A line carries lineData bytes; an LL thread moves a line, an LL128
	// quarter warp (8 threads) does.
	lineData, lineThreads := int64(8), int64(1)
	if wide {
		lineData, lineThreads = ll128Data, 8
	}
	var name string
	var lines int64
	switch p.op {
	case ir.OpAllReduce, ir.OpReduceScatter:
		// Each peer gets lineData/es elements per line; block p of the
		// input for reduce_scatter (layout ls in elements), the whole
		// input for all_reduce.
		n := p.out.NumElements()
		perLine := 8 / es // elements per 8-byte unit: the fast path's alignment
		lines = (n*es + lineData - 1) / lineData
		fast := true
		if p.op == ir.OpReduceScatter {
			run, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
			a.Ls = l
			for q := 0; q < D; q++ {
				a.Src[q] = in + uint64(int64(q)*run*es)
			}
			fast = l.Run == 0 || l.Run%perLine == 0 && l.Pitch%perLine == 0
		} else {
			for q := 0; q < D; q++ {
				a.Src[q] = in
			}
		}
		for q := 0; q < D; q++ {
			fast = fast && a.Src[q]%8 == 0
		}
		if fast {
			a.Xtra = llFastSrc
		}
		a.Dst[0] = p.outPtr
		a.N, a.TailEnd = lines, n
		name = kernels.LlKernelName(p.dt, p.reduce)
		if wide {
			name = kernels.Ll128KernelName(p.dt, p.reduce)
		} else if p.op == ir.OpReduceScatter && lines <= llSpreadMaxLines {
			// Its sends are shared out over (peer, line) pairs, as
			// hir_ll_copy's: a block per peer for a small piece.
			a.Xtra |= llSpread
			lines *= int64(D - 1)
		}
		if p.op == ir.OpAllReduce && d.llTwoShot(p.in.Bytes()) {
			// Two hops: chunk c of the lines is reduced on rank c.
			for c := 0; c <= D; c++ {
				a.Chunk[c] = lines * int64(c) / int64(D)
			}
			name = kernels.Ll2KernelName(p.dt, p.reduce)
			if wide {
				name = kernels.Ll128x2KernelName(p.dt, p.reduce)
			}
			lines = (lines + int64(D) - 1) / int64(D) // the widest chunk sizes the grid
		}
	default:
		// hir_ll_copy, in bytes: every peer gets a piece of the same size
		// (bytes), and at least one line each way (a line of no data
		// where there is nothing to send).
		bytes, err := copyPieces(p, D, r, in, &a)
		if err != nil {
			return err
		}
		lines = (bytes + lineData - 1) / lineData
		for q := 0; q < D; q++ {
			send, recv := lines, lines
			if p.op == ir.OpBroadcast {
				send, recv = 1, 1
				if r == p.root {
					send = lines
				}
				if q == p.root {
					recv = lines
				}
			}
			a.Chunk[q] = send | recv<<32
		}
		fs, fd := true, true
		for q := 0; q < D; q++ {
			fs = fs && (a.Src[q] == 0 || llFast(a.Src[q], a.Ls))
			fd = fd && (a.Dst[q] == 0 || llFast(a.Dst[q], a.Ld))
		}
		if fs {
			a.Xtra |= llFastSrc
		}
		if fd {
			a.Xtra |= llFastDst
		}
		a.TailEnd = bytes
		name = "hir_ll_copy"
		if wide {
			name = "hir_ll128_copy"
		}
		lines *= int64(D - 1) // its threads share out (peer, line) pairs
	}
	// The grid depends only on what every rank agrees on (the lines of a
	// piece), never on this rank's alignment.
	threads := lines * lineThreads
	grid := uint32(max(1, min((threads+llThreads-1)/llThreads, int64(max(cs.Blocks, 1)))))
	f, err := d.commFunction(&cs.mods, name)
	if err != nil {
		return err
	}
	cs.Mu.Lock()
	ch.take(&a, 1, p.what) // the staging slot alternates on the device (take_count)
	cs.Mu.Unlock()
	return d.launchArgs(f, grid, llThreads, s, &a)
}

// llSpreadMaxLines is the largest piece (in LL lines: 32 KiB) whose
// reduce_scatter spreads its sends over (peer, line) pairs. Measured on 4
// H200s in a graph (bf16, reduce_scatter's input): 8 KiB 4.94 -> 4.34 µs,
// 128 KiB 5.01 -> 4.75; past it spreading lost (256 KiB 5.32 -> 5.67, 1 MiB
// 9.45 -> 9.97).
const llSpreadMaxLines = 4096

// llTwoShot says whether an LL all_reduce of n bytes runs in two hops
// (Tuning.LLTwoShotMin): on two ranks one hop moves the same bytes.
func (d *Comm) llTwoShot(n int64) bool {
	return d.Opts.WorldSize > 2 && d.Tune.LLTwoShotMin >= 0 && n > d.Tune.LLTwoShotMin
}

// llProto is how an ll launch moves its pieces (kernels/collective.cu).
type llProto int8

const (
	protoLines llProto = iota // LL lines: 8 bytes of data and two flags in 16
	protoLL128                // LL128 lines: 120 bytes of data and a flag in 128
	protoBulk                 // plain data, a flag per block and peer
)

// llProtocol is p's ll protocol by the size of a piece (a chunk, for the
// two-hop all_reduce): LL lines up to Tuning.LL128Min, LL128 lines up to
// Tuning.LLBulkMin, bulk past it or past what the lines can stage.
func (d *Comm) llProtocol(p *CollPlan) llProto {
	D := int64(d.Opts.WorldSize)
	piece := ir.LLPieceBytes(p.op, p.in.Bytes(), p.out.Bytes(), int(D))
	// Lines of either kind a piece may take, per (slot, sender) region.
	capLines, cap128 := int64(LlCapBytes)/8, int64(ll128Cap)/ll128Data
	lines, lines128 := (piece+7)/8, (piece+ll128Data-1)/ll128Data
	if p.op == ir.OpAllReduce && d.llTwoShot(p.in.Bytes()) {
		// The widest chunk of lines; a hop takes half a region.
		lines, lines128 = (lines+D-1)/D, (lines128+D-1)/D
		capLines, cap128 = capLines/2, cap128/2
		piece = (piece + D - 1) / D
	}
	bulkMin := d.Tune.LLBulkMin
	if bulkMin == 0 {
		bulkMin = llBulkMinByWorld(int(D))
	}
	switch {
	case piece > bulkMin:
		return protoBulk
	case d.Tune.LL128Min >= 0 && piece > d.Tune.LL128Min:
		if lines128 > cap128 {
			return protoBulk
		}
		return protoLL128
	case lines > capLines:
		return protoBulk
	}
	return protoLines
}

// llBulkMinByWorld is Tuning.LLBulkMin's default: LL128 lines carry
// pieces up to 1 MiB on two ranks, 512 KiB on more, bulk the larger ones.
// Measured on 2 and 4 H200s in a graph (docs/bench/h200-ll128-ab.txt):
// on two ranks 1 MiB pieces moved faster as LL128 lines than in bulk
// (all_gather of 2 MiB 8.67 against 10.52-11.21 µs, all_to_all 8.43
// against 10.39-10.92), on four within bulk's spread or slower
// (all_to_all of 4 MiB 22.14 against 19.24-19.41), where 512 KiB pieces
// still gained (all_gather of 2 MiB 12.87 against 14.82).
func llBulkMinByWorld(world int) int64 {
	if world <= 2 {
		return 1 << 20
	}
	return 512 << 10
}

// unitWidth is the widest access (16, 8, 4, 2 or 1 bytes) that base and
// layout l (in bytes) allow.
func unitWidth(base uint64, l lay) int64 {
	w := int64(16)
	for w > 1 && (base%uint64(w) != 0 || l.Run%w != 0 || l.Pitch%w != 0) {
		w /= 2
	}
	return w
}

// bulkGrid is a bulk launch's grid for pieces of piece bytes: a block per
// Tuning.BulkPortion bytes, at most the agreed block count.
func (d *Comm) bulkGrid(cs *CommState, piece int64) uint32 {
	return uint32(max(1, min((piece+d.Tune.BulkPortion-1)/d.Tune.BulkPortion, int64(max(cs.Blocks, 1)))))
}

// bulkDirect says whether the bulk all_reduce's second hop stores
// straight into the peers' outputs: where they are symmetric.
func bulkDirect(p *CollPlan) bool { return p.outB.Kind == gpu.KindSym }

// launchBulk launches p's LL pieces in bulk (kernels/collective.cu,
// "bulk"), reading the input at in: hir_bulk2 for the two-hop all_reduce
// (its second hop through the peers' staging), hir_bulk for
// reduce_scatter and the one-hop all_reduce, hir_bulk_copy for the rest.
func (d *Comm) launchBulk(cs *CommState, ch *CommChannel, p *CollPlan, in uint64, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	if p.op == ir.OpAllReduce && d.llTwoShot(p.in.Bytes()) {
		// Hop two straight into the peers' outputs where those are
		// symmetric (bulkDirect), else through their staging.
		var outs [maxRanks]uint64
		outs[r] = p.outPtr
		if bulkDirect(p) {
			outs = d.peerPtrs(p.outB, p.out, true)
		}
		return d.launchBulk2(cs, ch, p, in, outs, bulkDirect(p), s)
	}
	stage, err := d.bulkStage(ch)
	if err != nil {
		return err
	}
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.Seg = bulkSeg
	var name string
	var piece int64 // bytes
	switch p.op {
	case ir.OpAllReduce, ir.OpReduceScatter:
		n := p.out.NumElements()
		piece = n * es
		if p.op == ir.OpReduceScatter {
			run, l := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
			a.Ls = lay{l.Run * es, l.Pitch * es}
			for q := 0; q < D; q++ {
				a.Src[q] = in + uint64(int64(q)*run*es)
			}
		} else {
			for q := 0; q < D; q++ {
				a.Src[q] = in
			}
		}
		a.Dst[0] = p.outPtr
		a.TailEnd = n
		if p.outPtr%16 == 0 {
			a.Xtra = bulkVec
		}
		name = kernels.BulkKernelName(p.dt, p.reduce)
	default:
		// The same pieces as LL lines' (launchLL), in bytes.
		if piece, err = copyPieces(p, D, r, in, &a); err != nil {
			return err
		}
		a.TailEnd = piece
		name = "hir_bulk_copy"
	}
	ws, wd := int64(16), int64(16)
	for q := 0; q < D; q++ {
		if a.Src[q] != 0 {
			ws = min(ws, unitWidth(a.Src[q], a.Ls))
		}
		if name == "hir_bulk_copy" && a.Dst[q] != 0 {
			wd = min(wd, unitWidth(a.Dst[q], a.Ld))
		}
	}
	a.Xtra |= int32(ws | wd<<8)
	return d.launchBulkArgs(cs, ch, p, name, d.bulkGrid(cs, piece), 2, &a, s)
}

// launchBulk2 launches the two-hop all_reduce in bulk (hir_bulk2),
// reading the input at in: with direct, hop two stores into outs (every
// rank's output, symmetric), else only outs[rank] is used and hop two
// goes through the peers' staging (a chunk then fills at most half a
// staging region).
func (d *Comm) launchBulk2(cs *CommState, ch *CommChannel, p *CollPlan, in uint64, outs [maxRanks]uint64, direct bool, s *gpu.Stream) error {
	D := d.Opts.WorldSize
	es := p.es
	stage, err := d.bulkStage(ch)
	if err != nil {
		return err
	}
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.Seg = bulkSeg
	a.Src[0] = in
	n := p.in.NumElements()
	a.Chunk = chunkBounds(n, D, 16/es)
	var widest int64
	for c := 0; c < D; c++ {
		widest = max(widest, (a.Chunk[c+1]-a.Chunk[c])*es)
	}
	// Rounds of a staging region's worth of every chunk (half of it
	// where hop two goes through the staging: one round only).
	perRound := int64(bulkSeg)
	if !direct {
		perRound /= 2
	}
	rounds := (widest + perRound - 1) / perRound
	if !direct && rounds > 1 {
		return fmt.Errorf("internal error: a bulk all_reduce chunk of %d bytes passes its %d bytes of staging", widest, perRound)
	}
	a.NSeg = max(rounds, 1)
	vec := true
	wd := int64(16)
	for q := 0; q < D; q++ {
		if direct || q == d.Opts.Rank {
			a.Dst[q] = outs[q]
			vec = vec && outs[q]%16 == 0
			wd = min(wd, unitWidth(outs[q], lay{}))
		}
	}
	if direct {
		a.Mode |= modeDirect
	}
	a.Xtra = int32(unitWidth(in, lay{}) | wd<<8)
	if vec {
		a.Xtra |= bulkVec
	}
	return d.launchBulkArgs(cs, ch, p, kernels.Bulk2KernelName(p.dt, p.reduce), d.bulkGrid(cs, min(widest, perRound)), uint64(2*a.NSeg), &a, s)
}

// launchBulkArgs takes the launch's nsig signal values (bulk2 raises two
// per round) and launches kernel name.
func (d *Comm) launchBulkArgs(cs *CommState, ch *CommChannel, p *CollPlan, name string, grid uint32, nsig uint64, a *CollArgs, s *gpu.Stream) error {
	f, err := d.commFunction(&cs.mods, name)
	if err != nil {
		return err
	}
	cs.Mu.Lock()
	ch.take(a, nsig, p.what)
	cs.Mu.Unlock()
	return d.launchArgs(f, grid, collThreads, s, a)
}

// copyPieces sets a's pieces for the copying collectives of the LL
// protocol (lines and bulk alike), reading the input at in: src[q] the
// piece sent to q (0: none), dst[q] where q's piece goes (0: dropped),
// the layouts in bytes; it returns a piece's bytes. The root of a
// broadcast sends its input to every peer; the others send nothing but
// keep the root's.
func copyPieces(p *CollPlan, D, r int, in uint64, a *CollArgs) (int64, error) {
	es := p.es
	switch p.op {
	case ir.OpAllGather:
		run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
		a.Ld = lay{l.Run * es, l.Pitch * es}
		for q := 0; q < D; q++ {
			a.Src[q], a.Dst[q] = in, p.outPtr+uint64(int64(q)*run*es)
		}
		return p.in.Bytes(), nil
	case ir.OpAllToAll:
		runS, ls := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
		runD, ld := BlockLayout(p.out.Shape, p.concat, p.in.Shape[p.concat])
		a.Ls, a.Ld = lay{ls.Run * es, ls.Pitch * es}, lay{ld.Run * es, ld.Pitch * es}
		for q := 0; q < D; q++ {
			a.Src[q], a.Dst[q] = in+uint64(int64(q)*runS*es), p.outPtr+uint64(int64(q)*runD*es)
		}
		return p.in.Bytes() / int64(D), nil
	case ir.OpBroadcast:
		if r == p.root {
			for q := 0; q < D; q++ {
				a.Src[q] = in
			}
			a.Dst[r] = p.outPtr
		} else {
			a.Dst[p.root] = p.outPtr
		}
		return p.in.Bytes(), nil
	}
	return 0, fmt.Errorf("no ll algorithm for %s", p.op)
}
