package passes

import (
	"github.com/hirlab/hir/ir"
)

// checkTransferRaces is validate's part for races on registered tensors.
// Between register and deregister, peers' transfers read or write a rank's
// registered tensor while that rank runs on: every rank runs the same
// program, but at its own pace, so a peer's transfer posted at one point
// of the program and waited for at another may run while this rank is
// anywhere else, unless a point every rank must pass (a `barrier` or
// `stream_barrier`, a `register` or `deregister`) lies between them. A
// local read of the tensor during a peer's write, a local write during a
// peer's read or write, and two peers' writes are races: their result
// depends on timing
// (docs/SEMANTICS.md, "Point to point, one-sided, sync"). They are
// rejected, naming both places and the fix. Loops are unrolled (up to
// raceCheckLimit ops); a larger program is accepted unchecked.
func checkTransferRaces(p *ir.Program, v *validator) {
	if len(v.errs) > 0 || !hasOp(p.Body, ir.OpTransfer) {
		return
	}
	var flat []*ir.Op
	if !flatten(p.Body, &flat, raceCheckLimit) {
		return
	}
	meets := make([]int, 0, 8) // points every rank passes, ascending
	for i, op := range flat {
		if op.Code.Info().Meets || op.Code == ir.OpRegister || op.Code == ir.OpDeregister {
			meets = append(meets, i)
		}
	}
	separated := func(a, b access) bool {
		if a.end > b.start {
			a, b = b, a
		}
		for _, k := range meets {
			if a.end < k && k < b.start {
				return true
			}
		}
		return false
	}
	reported := map[*ir.Op]bool{}
	open := map[*ir.Value]int{} // registration handle -> its register's point
	for i, op := range flat {
		switch op.Code {
		case ir.OpRegister:
			open[op.Result()] = i
		case ir.OpDeregister:
			h := op.Operands[0]
			start, ok := open[h]
			if !ok {
				continue
			}
			delete(open, h)
			acc := registeredAccesses(flat, start, i, h)
			for x := range acc {
				for y := x + 1; y < len(acc); y++ {
					a, b := acc[x], acc[y]
					if a.remote || b.remote {
						if conflict(a, b) && !separated(a, b) {
							reportRace(v, reported, h, a, b)
						}
					}
				}
				if a := acc[x]; a.remote && a.write && a.several && !reported[a.op] {
					reported[a.op] = true
					v.errs.Add(a.op.Pos, "transfer: every rank writes rank %d's registered %s (peer=%d is one rank for all), so its writes race; write a relative peer (peer=+1), which gives each rank's tensor one writer", a.op.Peer(0, v.size), flat[start].Operands[0], a.op.Peer(0, v.size))
				}
			}
		}
	}
}

// raceCheckLimit bounds the ops checkTransferRaces plays (loops unrolled).
const raceCheckLimit = 1 << 16

// access is a touch of a registered tensor between program points start
// and end (a transfer's: its post and its wait).
type access struct {
	op         *ir.Op
	start, end int
	write      bool
	// remote: a peer's transfer touching this rank's tensor (the same
	// transfer op, run by the peer); several: by more than one peer at once
	// (an absolute peer: every rank targets the same one).
	remote, several bool
	peer            int64 // a relative peer's offset, for remote accesses
	relative        bool
}

// registeredAccesses lists the touches of the tensor registered as h
// between points start and end of flat: this rank's ops that read or write
// it (views aside: they touch nothing), and the peers' transfers on h.
func registeredAccesses(flat []*ir.Op, start, end int, h *ir.Value) []access {
	x := flat[start].Operands[0].Root()
	var acc []access
	for j := start + 1; j < end; j++ {
		op := flat[j]
		if op.Code.Class() == ir.ClassView || op.Code == ir.OpWait {
			continue
		}
		waitAt := j
		if op.Code == ir.OpTransfer {
			waitAt = waitOf(flat, j, end)
			if op.Operands[0] == h {
				peer, _ := op.Attr("peer")
				acc = append(acc, access{op: op, start: j, end: waitAt, write: op.WordAttr("dir", "") == "write",
					remote: true, several: !peer.Relative, peer: peer.Int, relative: peer.Relative})
			}
		}
		for k, y := range op.Operands {
			if y.Lit != nil || y.Tensor() == nil || y.Root() != x {
				continue
			}
			write := writesInto(op, k)
			if op.Code == ir.OpTransfer && k == 1 {
				write = op.WordAttr("dir", "") == "read" // a read fills the local tensor
			}
			acc = append(acc, access{op: op, start: j, end: waitAt, write: write})
		}
	}
	return acc
}

// waitOf is the point of the wait for the transfer at j (its end when it
// is not waited for before end).
func waitOf(flat []*ir.Op, j, end int) int {
	t := flat[j].Result()
	for i := j + 1; i < end; i++ {
		if flat[i].Code == ir.OpWait && flat[i].Operands[0] == t {
			return i
		}
	}
	return end
}

// conflict reports whether a and b may touch the same rank's tensor at
// once in a way that races (some write, not both this rank's own).
func conflict(a, b access) bool {
	if !a.write && !b.write {
		return false
	}
	if a.remote && b.remote && a.relative && b.relative && a.peer == b.peer {
		// the same peer, in its own program order: a race only if the
		// windows overlap
		return !(a.end < b.start || b.end < a.start)
	}
	return true
}

func reportRace(v *validator, reported map[*ir.Op]bool, h *ir.Value, a, b access) {
	if a.start > b.start {
		a, b = b, a
	}
	if reported[b.op] { // one report per op, at the later of the two
		return
	}
	reported[b.op] = true
	v.errs.Add(b.op.Pos, "%s: %s (registered by %s) may be touched by two ranks at once: here %s, and at %s %s; nothing makes one wait for the other, so put a `barrier` between them",
		b.op.Code, h.Def.Operands[0], h, touch(b), a.op.Pos.LineCol(), touch(a))
}

// touch says what an access does to the registered tensor.
func touch(x access) string {
	switch {
	case x.remote && x.write:
		return "a peer's transfer (dir=write) writes it"
	case x.remote:
		return "a peer's transfer (dir=read) reads it"
	case x.write:
		return "this rank writes it"
	}
	return "this rank reads it"
}

// hasOp reports whether b holds an op of code c, in loop bodies too.
func hasOp(b *ir.Block, c ir.Opcode) bool {
	for _, op := range b.Ops {
		if op.Code == c || (op.Body != nil && op.Code == ir.OpFor && hasOp(op.Body, c)) {
			return true
		}
	}
	return false
}
