package passes

import (
	"slices"
	"strconv"

	"github.com/hirlab/hir/ir"
)

// checkPointToPoint is validate's part for send and recv: every rank runs
// the same program, so which sends meet which recvs is known before the
// run. The k-th send from rank a to rank b meets b's k-th recv from a; each
// needs its partner, with the same dtype and local element count, or one
// side would wait for a peer that never comes (or the pair would fail).
// It follows each rank through the program, loops unrolled, and gives up
// (accepting) past p2pCheckLimit events, where the run-time checks remain.
func checkPointToPoint(p *ir.Program, v *validator) {
	size := v.size
	if size < 1 || !hasP2P(p.Body) || len(v.errs) > 0 {
		return // a peer outside the mesh, a bad type: reported already
	}
	// Every rank walks the program alike, so rank 0's walk is recorded
	// (types, unrolled loops, budget checks) and replayed for the others
	// with their own peers.
	budget := p2pCheckLimit
	// the top level's sends and recvs: most programs' whole trace
	top := 0
	for _, op := range p.Body.Ops {
		if op.Code == ir.OpSend || op.Code == ir.OpRecv {
			top++
		}
	}
	trace := make([]p2pStep, 0, min(top, p2pCheckLimit))
	if !collectP2P(p.Body, 0, size, &budget, &trace) {
		return
	}
	// The events of each (sender, receiver) pair, as indexes into trace,
	// in the order the pairs are first met (rank by rank, each in program
	// order): pairs[slot[key]] for the dense key src*size+dst.
	type pairEvents struct {
		src, dst     int
		sends, recvs []int32
	}
	var pairs []pairEvents
	var slots []int32 // dense: slot+1 per key, 0 for none
	var slotMap map[int]int32
	if size*size <= 1<<16 {
		slots = make([]int32, size*size)
	} else {
		slotMap = map[int]int32{}
	}
	add := func(r, i int, e *p2pEvent, peer int) {
		src, dst := r, peer
		if !e.send {
			src, dst = peer, r
		}
		key := src*size + dst
		var slot int32
		if slots != nil {
			slot = slots[key] - 1
		} else if s, ok := slotMap[key]; ok {
			slot = s
		} else {
			slot = -1
		}
		if slot < 0 {
			slot = int32(len(pairs))
			pairs = append(pairs, pairEvents{src: src, dst: dst})
			if slots != nil {
				slots[key] = slot + 1
			} else {
				slotMap[key] = slot
			}
		}
		pe := &pairs[slot]
		if e.send {
			pe.sends = append(pe.sends, int32(i))
		} else {
			pe.recvs = append(pe.recvs, int32(i))
		}
	}
	// Each other rank spends one unit per event: when that overdraws the
	// budget, the replay would give up (accepting) whatever else it met.
	events := 0
	for i := range trace {
		if !trace[i].loop {
			events++
		}
	}
	if events > 0 && (size-1) > budget/events {
		return
	}
	if relativeShortcut && relativePairsAgree(trace, size) {
		return // what the replay would find: nothing to report
	}
	// Rank 0's events, then each other rank's replay of the trace (the
	// same events with its own peers, the same budget spent and checked in
	// the same order).
	for i := range trace {
		if !trace[i].loop {
			add(0, i, &trace[i].ev, trace[i].ev.peer)
		}
	}
	for r := 1; r < size; r++ {
		for i := range trace {
			st := &trace[i]
			if st.loop {
				if st.trips > uint64(budget) {
					return
				}
				continue
			}
			peer := ir.AttrValue{Relative: st.ev.peerRel, Int: st.ev.peerInt}.PeerFor(r, size) // st.ev.op.Peer(r, size)
			if budget--; budget < 0 || peer < 0 || peer >= size {
				return
			}
			add(r, i, &st.ev, peer)
		}
	}
	reported := map[*ir.Op]bool{}
	report := func(op *ir.Op, format string, args ...any) {
		if !reported[op] {
			reported[op] = true
			v.errs.Add(op.Pos, format, args...)
		}
	}
	for _, pe := range pairs {
		for i := 0; i < min(len(pe.sends), len(pe.recvs)); i++ {
			s, r := &trace[pe.sends[i]].ev, &trace[pe.recvs[i]].ev
			if s.dtype != r.dtype || s.elems != r.elems {
				report(r.op, "recv: on rank %d, receive #%d from rank %d wants %s of %d elements, but the send it meets (at %s) sends %s of %d; they must agree in dtype and local element count",
					pe.dst, i, pe.src, r.dtype, r.elems, s.op.Pos, s.dtype, s.elems)
			}
		}
		// The unmatched op's position leads the message; the peer's last
		// partner of this pair, if any, is named too, so both sides show.
		ns, nr := len(pe.sends), len(pe.recvs)
		switch {
		case ns > nr && nr == 0:
			e := &trace[pe.sends[0]].ev
			report(e.op, "send: rank %d sends to rank %d %s, but rank %d never receives from rank %d: send #0 would wait forever; add the matching `recv peer=...` on rank %d", pe.src, pe.dst, times(ns), pe.dst, pe.src, pe.dst)
		case ns > nr:
			e, last := &trace[pe.sends[nr]].ev, &trace[pe.recvs[nr-1]].ev
			report(e.op, "send: rank %d sends to rank %d %s, but rank %d receives from rank %d only %s, the last at %s: send #%d would wait forever; add the matching `recv peer=...` on rank %d", pe.src, pe.dst, times(ns), pe.dst, pe.src, times(nr), last.op.Pos, nr, pe.dst)
		case nr > ns && ns == 0:
			e := &trace[pe.recvs[0]].ev
			report(e.op, "recv: rank %d receives from rank %d %s, but rank %d never sends to rank %d: receive #0 would wait forever; add the matching `send peer=...` on rank %d", pe.dst, pe.src, times(nr), pe.src, pe.dst, pe.src)
		case nr > ns:
			e, last := &trace[pe.recvs[ns]].ev, &trace[pe.sends[ns-1]].ev
			report(e.op, "recv: rank %d receives from rank %d %s, but rank %d sends to rank %d only %s, the last at %s: receive #%d would wait forever; add the matching `send peer=...` on rank %d", pe.dst, pe.src, times(nr), pe.src, pe.dst, times(ns), last.op.Pos, ns, pe.src)
		}
	}
}

// times says how many times something happens, as a sentence would:
// once, twice, three times ... nine times, 10 times. Small counts are
// spelled out so that they read apart from the rank numbers next to them
// ("rank 0 sends to rank 1 three times").
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	if n >= 3 && n <= 9 {
		return [...]string{"three", "four", "five", "six", "seven", "eight", "nine"}[n-3] + " times"
	}
	return strconv.Itoa(n) + " times"
}

// p2pCheckLimit bounds the sends and recvs checkPointToPoint follows, over
// all ranks and loop iterations.
const p2pCheckLimit = 1 << 20

type p2pEvent struct {
	op      *ir.Op
	send    bool
	peer    int   // rank 0's
	peerRel bool  // op's peer attribute (Relative, Int), for the other
	peerInt int64 // ranks' peers
	dtype   ir.DType
	elems   int64
}

func hasP2P(b *ir.Block) bool {
	for _, op := range b.Ops {
		if op.Code == ir.OpSend || op.Code == ir.OpRecv {
			return true
		}
		if op.Body != nil && hasP2P(op.Body) {
			return true
		}
	}
	return false
}

// p2pStep is a step of a rank's walk that spends or checks the budget: an
// event, or (loop) the trip count of a for being entered.
type p2pStep struct {
	ev    p2pEvent
	loop  bool
	trips uint64
}

// collectP2P appends to trace each step of rank r's walk of b that spends
// or checks the budget (its sends and recvs, the loops it enters); false when the budget runs out
// or a type is unknown (another error is reported).
func collectP2P(b *ir.Block, r, size int, budget *int, trace *[]p2pStep) bool {
	for _, op := range b.Ops {
		switch op.Code {
		case ir.OpSend, ir.OpRecv:
			var t *ir.TensorType
			if op.Code == ir.OpSend {
				t = op.Operands[0].Tensor()
			} else if res := op.Result(); res != nil {
				t = res.Tensor()
			}
			if t == nil {
				return false
			}
			n, ok := localElems(t, size)
			if !ok {
				return false
			}
			peerAttr, _ := op.Attr("peer")
			peer := peerAttr.PeerFor(r, size)
			if *budget--; *budget < 0 || peer < 0 || peer >= size {
				return false // out of range: validate's peer check says so
			}
			*trace = append(*trace, p2pStep{ev: p2pEvent{op: op, send: op.Code == ir.OpSend, peer: peer, peerRel: peerAttr.Relative, peerInt: peerAttr.Int, dtype: t.DType, elems: n}})
		case ir.OpFor:
			if !hasP2P(op.Body) {
				continue
			}
			trips := ir.LoopTrips(op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1))
			*trace = append(*trace, p2pStep{loop: true, trips: trips})
			if trips > uint64(*budget) {
				return false
			}
			for i := uint64(0); i < trips; i++ {
				if !collectP2P(op.Body, r, size, budget, trace) {
					return false
				}
			}
		}
	}
	return true
}

// relativeShortcut lets checkPointToPoint accept on relativePairsAgree;
// a test turns it off to hold it to the replay.
var relativeShortcut = true

// localElems is ProductChecked of t.LocalShape(size) without making the
// shape; false where either fails.
func localElems(t *ir.TensorType, size int) (int64, bool) {
	if t.ShardError(size) != nil {
		return 0, false
	}
	var buf [8]int64
	shape := buf[:0]
	for _, d := range t.Dims {
		e := d.Extent
		if d.Parallel == ir.DIDx {
			e /= int64(size)
		}
		shape = append(shape, e)
	}
	return ir.ProductChecked(shape)
}

// relativePairsAgree reports whether every send of trace meets a recv of
// the same dtype and element count and every recv a send, when every peer
// is relative (false otherwise, and for a trace of many offsets). Then
// rank r's k-th send of offset d meets rank r+d's k-th recv of offset -d,
// alike for every r, so each offset is checked once rather than replayed
// on every rank; the replay is left to word the errors.
func relativePairsAgree(trace []p2pStep, size int) bool {
	n := int64(size)
	class := func(e *p2pEvent) int64 { // the offset d of the pairs e is in
		d := e.peerInt % n
		if !e.send {
			d = -d
		}
		return (d + n) % n
	}
	var classes []int64
	for i := range trace {
		e := &trace[i].ev
		if trace[i].loop {
			continue
		}
		if !e.peerRel {
			return false
		}
		if d := class(e); !slices.Contains(classes, d) {
			if len(classes) == 8 {
				return false
			}
			classes = append(classes, d)
		}
	}
	// next is the index of the first event at or after i of the kind and
	// offset d, len(trace) when none.
	next := func(i int, send bool, d int64) int {
		for ; i < len(trace); i++ {
			if e := &trace[i].ev; !trace[i].loop && e.send == send && class(e) == d {
				return i
			}
		}
		return i
	}
	for _, d := range classes {
		for s, r := next(0, true, d), next(0, false, d); ; s, r = next(s+1, true, d), next(r+1, false, d) {
			if s == len(trace) || r == len(trace) {
				if s != r {
					return false // more sends than recvs, or the other way
				}
				break
			}
			if a, b := &trace[s].ev, &trace[r].ev; a.dtype != b.dtype || a.elems != b.elems {
				return false
			}
		}
	}
	return true
}
