package coll

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// algo=ll: the low-latency protocol (kernels/collective.cu, "LL"): every
// rank stores the piece it sends each peer, 8 bytes with two flags per
// 16-byte line, into the peer's LL staging, and the peer polls for the
// flags; one launch, no barrier before or after. all_reduce one_shot of
// small tensors runs the same kernel (collPlan.ll). hir_ll_<dt>_<op>
// reduces (all_reduce, reduce_scatter), hir_ll_copy moves (all_gather,
// all_to_all, broadcast).

// llStage is every rank's LL staging of channel ch (symmetric: made,
// collectively, on the channel's first LL launch).
func (d *Comm) llStage(ch *CommChannel) ([maxRanks]uint64, error) {
	var out [maxRanks]uint64
	if ch.ll == nil {
		b, err := d.AllocSymmetric(int64(2 * d.Opts.WorldSize * llSeg))
		if err != nil {
			return out, fmt.Errorf("LL staging: %w", err)
		}
		ch.ll = b
		for _, m := range b.Sym.Maps {
			ch.llPtrs = append(ch.llPtrs, m.Ptr)
		}
	}
	copy(out[:], ch.llPtrs)
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
	stage, err := d.llStage(ch)
	if err != nil {
		return err
	}
	inPlace := p.op == ir.OpAllReduce && p.inPtr == p.outPtr
	if inPlace || !overlaps(p.in, p.inB, p.out, p.outB) {
		return d.launchLL(cs, ch, p, p.inPtr, stage, s)
	}
	n := p.in.Bytes()
	return d.Staged(int(max(n, 16)), s, func(tmp uint64) error {
		dst := runtime.Tensor{Buf: d.tempBuffer(tmp, n), DType: p.dt, Shape: p.in.Shape}
		if err := d.Copy(dst, p.in, s); err != nil {
			return err
		}
		return d.launchLL(cs, ch, p, tmp, stage, s)
	})
}

// launchLL launches p's LL kernel reading the input at in.
func (d *Comm) launchLL(cs *CommState, ch *CommChannel, p *CollPlan, in uint64, stage [maxRanks]uint64, s *gpu.Stream) error {
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.Seg = llSeg
	var name string
	var lines int64
	switch p.op {
	case ir.OpAllReduce, ir.OpReduceScatter:
		// Each peer gets E elements per line; block p of the input for
		// reduce_scatter (layout ls in elements), the whole input for
		// all_reduce.
		n := p.out.NumElements()
		perLine := 8 / es
		lines = (n + perLine - 1) / perLine
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
		name = LlKernelName(p.dt, p.reduce)
		if p.op == ir.OpAllReduce && d.llTwoShot(p.in.Bytes()) {
			// Two hops: chunk c of the lines is reduced on rank c.
			for c := 0; c <= D; c++ {
				a.Chunk[c] = lines * int64(c) / int64(D)
			}
			name = Ll2KernelName(p.dt, p.reduce)
			lines = (lines + int64(D) - 1) / int64(D) // the widest chunk sizes the grid
		}
	default:
		// hir_ll_copy, in bytes: every peer gets a piece of the same size
		// (bytes), and at least one line each way (a line of no data
		// where there is nothing to send).
		var bytes int64
		switch p.op {
		case ir.OpAllGather:
			run, l := BlockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
			bytes = p.in.Bytes()
			a.Ld = lay{l.Run * es, l.Pitch * es}
			for q := 0; q < D; q++ {
				a.Src[q], a.Dst[q] = in, p.outPtr+uint64(int64(q)*run*es)
			}
		case ir.OpAllToAll:
			runS, ls := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
			runD, ld := BlockLayout(p.out.Shape, p.concat, p.in.Shape[p.concat])
			bytes = p.in.Bytes() / int64(D)
			a.Ls, a.Ld = lay{ls.Run * es, ls.Pitch * es}, lay{ld.Run * es, ld.Pitch * es}
			for q := 0; q < D; q++ {
				a.Src[q], a.Dst[q] = in+uint64(int64(q)*runS*es), p.outPtr+uint64(int64(q)*runD*es)
			}
		case ir.OpBroadcast:
			// The root sends its input to every peer; the others send
			// every peer a line of no data (Src 0), and keep the root's.
			bytes = p.in.Bytes()
			if r == p.root {
				for q := 0; q < D; q++ {
					a.Src[q] = in
				}
				a.Dst[r] = p.outPtr
			} else {
				a.Dst[p.root] = p.outPtr
			}
		default:
			return fmt.Errorf("no ll algorithm for %s", p.op)
		}
		lines = (bytes + 7) / 8
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
	}
	// The grid depends only on what every rank agrees on (the lines of a
	// piece), never on this rank's alignment.
	grid := uint32(max(1, min((lines+llThreads-1)/llThreads, int64(max(cs.Blocks, 1)))))
	f, err := d.commFunction(&cs.mods, name)
	if err != nil {
		return err
	}
	cs.Mu.Lock()
	ch.take(&a, 1, p.what) // the staging slot alternates on the device (take_count)
	cs.Mu.Unlock()
	return d.launchArgs(f, grid, llThreads, s, &a)
}

// llTwoShot says whether an LL all_reduce of n bytes runs in two hops
// (Tuning.LLTwoShotMin): on two ranks one hop moves the same bytes.
func (d *Comm) llTwoShot(n int64) bool {
	return d.Opts.WorldSize > 2 && d.Tune.LLTwoShotMin >= 0 && n > d.Tune.LLTwoShotMin
}
