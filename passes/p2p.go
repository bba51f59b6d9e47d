package passes

import (
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
	// events[r]: rank r's sends and recvs in program order
	events := make([][]p2pEvent, size)
	budget := p2pCheckLimit
	// Every rank walks the program alike, so rank 0's walk is recorded
	// (types, unrolled loops, budget checks) and replayed for the others
	// with their own peers.
	var trace []p2pStep
	if !collectP2P(p.Body, 0, size, &events[0], &budget, &trace) {
		return
	}
	for r := 1; r < size; r++ {
		if !replayP2P(trace, r, size, &events[r], &budget) {
			return
		}
	}
	type pair struct{ src, dst int }
	sends, recvs := map[pair][]p2pEvent{}, map[pair][]p2pEvent{}
	var order []pair
	for r := 0; r < size; r++ {
		for _, e := range events[r] {
			k := pair{r, e.peer}
			if !e.send {
				k = pair{e.peer, r}
			}
			if _, ok := sends[k]; !ok {
				if _, ok := recvs[k]; !ok {
					order = append(order, k)
				}
			}
			if e.send {
				sends[k] = append(sends[k], e)
			} else {
				recvs[k] = append(recvs[k], e)
			}
		}
	}
	reported := map[*ir.Op]bool{}
	report := func(op *ir.Op, format string, args ...any) {
		if !reported[op] {
			reported[op] = true
			v.errs.Add(op.Pos, format, args...)
		}
	}
	for _, k := range order {
		s, r := sends[k], recvs[k]
		for i := 0; i < min(len(s), len(r)); i++ {
			if s[i].dtype != r[i].dtype || s[i].elems != r[i].elems {
				report(r[i].op, "recv: on rank %d, receive #%d from rank %d wants %s of %d elements, but the send it meets (at %s) sends %s of %d; they must agree in dtype and local element count",
					k.dst, i, k.src, r[i].dtype, r[i].elems, s[i].op.Pos, s[i].dtype, s[i].elems)
			}
		}
		switch {
		case len(s) > len(r):
			e := s[len(r)]
			report(e.op, "send: rank %d sends to rank %d %d time(s), but rank %d receives from rank %d only %d time(s): send #%d would wait forever; add the matching `recv peer=...` on rank %d", k.src, k.dst, len(s), k.dst, k.src, len(r), len(r), k.dst)
		case len(r) > len(s):
			e := r[len(s)]
			report(e.op, "recv: rank %d receives from rank %d %d time(s), but rank %d sends to rank %d only %d time(s): receive #%d would wait forever; add the matching `send peer=...` on rank %d", k.dst, k.src, len(r), k.src, k.dst, len(s), len(s), k.src)
		}
	}
}

// p2pCheckLimit bounds the sends and recvs checkPointToPoint follows, over
// all ranks and loop iterations.
const p2pCheckLimit = 1 << 20

type p2pEvent struct {
	op    *ir.Op
	send  bool
	peer  int
	dtype ir.DType
	elems int64
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

// replayP2P is collectP2P for rank r from rank 0's trace: the same events
// with r's peers, the same budget spent and checked in the same order.
func replayP2P(trace []p2pStep, r, size int, out *[]p2pEvent, budget *int) bool {
	*out = make([]p2pEvent, 0, len(trace))
	for _, st := range trace {
		if st.loop {
			if st.trips > uint64(*budget) {
				return false
			}
			continue
		}
		peer := st.ev.op.Peer(r, size)
		if *budget--; *budget < 0 || peer < 0 || peer >= size {
			return false
		}
		e := st.ev
		e.peer = peer
		*out = append(*out, e)
	}
	return true
}

// collectP2P appends rank r's sends and recvs in b to out, and each step
// that spends or checks the budget to trace; false when the budget runs out
// or a type is unknown (another error is reported).
func collectP2P(b *ir.Block, r, size int, out *[]p2pEvent, budget *int, trace *[]p2pStep) bool {
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
			shape, err := t.LocalShape(size)
			if err != nil {
				return false
			}
			n, ok := ir.ProductChecked(shape)
			if !ok {
				return false
			}
			peer := op.Peer(r, size)
			if *budget--; *budget < 0 || peer < 0 || peer >= size {
				return false // out of range: validate's peer check says so
			}
			e := p2pEvent{op: op, send: op.Code == ir.OpSend, peer: peer, dtype: t.DType, elems: n}
			*out = append(*out, e)
			*trace = append(*trace, p2pStep{ev: e})
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
				if !collectP2P(op.Body, r, size, out, budget, trace) {
					return false
				}
			}
		}
	}
	return true
}
