package passes

import (
	"strconv"

	"github.com/hirlab/hir/ir"
)

// streamParallel is the stream-parallel pass (named after nvFuser's): it
// lowers every loop `for %i = F to T [step S] streams N {` so that
// iteration k runs on stream k mod N. Before the loop it makes the streams
// (as many as the loop has iterations, at most N) and makes each wait for
// the stream current before the loop (the fork); the body starts by
// picking its stream (pick_stream) and setting it; after the loop it sets
// the stream current before the loop again and makes it wait for every
// loop stream (wait_stream), so what follows sees all the loop did.
//
// Between iterations no wait is needed: what one iteration computes is its
// own (SSA), a value from before the loop is waited for by each use on
// another stream (the evaluator's producer events), and what iterations
// share through storage is checked first (streamrace.go): a write another
// iteration could touch is rejected, naming both places.
func streamParallel(p *ir.Program, _ *Context) error {
	if p.Body == nil || !hasStreamsLoop(p.Body) {
		return nil
	}
	sp := &streamLowering{names: newNamer(p), order: map[*ir.Op]int{}}
	p.Walk(func(op *ir.Op) { sp.order[op] = len(sp.order) })
	sp.checkBlock(p.Body, nil)
	if len(sp.errs) == 0 {
		sp.lowerBlock(p.Body, streamState{known: true}, nil)
	}
	return sp.errs.Err()
}

func hasStreamsLoop(b *ir.Block) bool {
	for _, op := range b.Ops {
		if op.Code == ir.OpFor && (op.Streams() != 0 || hasStreamsLoop(op.Body)) {
			return true
		}
	}
	return false
}

type streamLowering struct {
	names namer
	order map[*ir.Op]int // program order of every op (a body after its op)
	errs  ir.ErrorList
}

// streamState is the current stream where the host is, as far as the text
// tells: v (nil: the default stream) when known.
type streamState struct {
	known bool
	v     *ir.Value
}

// checkBlock checks every loop with streams in b; encl is the loops
// around b, outermost first.
func (sp *streamLowering) checkBlock(b *ir.Block, encl []*ir.Op) {
	for _, op := range b.Ops {
		if op.Code != ir.OpFor {
			continue
		}
		if op.Streams() > 0 {
			sp.checkLoop(op, encl)
		}
		sp.checkBlock(op.Body, append(encl, op))
	}
}

// cannotMove says why an op cannot run in a loop whose iterations move
// between streams, or "".
func cannotMove(op *ir.Op) string {
	switch op.Code {
	case ir.OpSetStream:
		return "it would move the iteration's later ops off the stream the loop gives it"
	case ir.OpRegister, ir.OpTransfer, ir.OpDeregister:
		return "one-sided transfers are ordered with this rank's work by its host (register, deregister and barrier), which does not see the loop's streams"
	}
	return ""
}

func (sp *streamLowering) checkLoop(loop *ir.Op, encl []*ir.Op) {
	for _, e := range encl {
		if e.Streams() > 0 {
			sp.errs.Add(loop.Pos, "for: a loop with streams inside another loop with streams (the for at %s) is not supported; give streams to one of them", e.Pos)
			return
		}
	}
	bad := false
	loop.Body.Walk(func(op *ir.Op) {
		if op.Code == ir.OpFor && op.Streams() > 0 {
			return // reported at that loop
		}
		if why := cannotMove(op); why != "" {
			sp.errs.Add(op.Pos, "%s cannot run in a loop with streams (the for at %s): %s", op.Code, loop.Pos, why)
			bad = true
		}
	})
	if bad || loop.Streams() < 2 || tripsOf(loop) < 2 {
		return // one stream, or one iteration: nothing runs side by side
	}
	newLoopScope(loop).checkRaces(&sp.errs)
}

func tripsOf(loop *ir.Op) uint64 {
	return ir.LoopTrips(loop.IntAttr("from", 0), loop.IntAttr("to", 0), loop.IntAttr("step", 1))
}

// lowerBlock lowers the loops with streams in b, where the host enters b
// with current stream in; it returns the current stream at b's end.
func (sp *streamLowering) lowerBlock(b *ir.Block, in streamState, encl []*ir.Op) streamState {
	cur := in
	var out []*ir.Op
	for _, op := range b.Ops {
		switch {
		case op.Code == ir.OpSetStream:
			cur = streamState{known: true}
			if len(op.Operands) == 1 {
				cur.v = op.Operands[0]
			}
		case op.Code == ir.OpFor && op.Streams() > 0:
			out = sp.lowerLoop(op, cur, encl, out)
			continue // the current stream after it is cur again
		case op.Code == ir.OpFor:
			cur = sp.plainLoop(op, cur, encl)
		}
		out = append(out, op)
	}
	b.Ops = out
	return cur
}

// plainLoop lowers the loops with streams inside a loop without, and
// returns the current stream after it.
func (sp *streamLowering) plainLoop(loop *ir.Op, in streamState, encl []*ir.Op) streamState {
	entry := in
	if tripsOf(loop) > 1 && streamAfter(loop.Body, in) != in {
		entry = streamState{} // the second iteration starts where the first ended
	}
	sp.lowerBlock(loop.Body, entry, append(encl, loop))
	return loopExit(loop, in)
}

// streamAfter is the current stream after b, entered with in.
func streamAfter(b *ir.Block, in streamState) streamState {
	cur := in
	for _, op := range b.Ops {
		switch op.Code {
		case ir.OpSetStream:
			cur = streamState{known: true}
			if len(op.Operands) == 1 {
				cur.v = op.Operands[0]
			}
		case ir.OpFor:
			cur = loopExit(op, cur)
		}
	}
	return cur
}

// loopExit is the current stream after a loop entered with in: a loop
// with streams goes back to in; another, where its body leaves it.
func loopExit(loop *ir.Op, in streamState) streamState {
	trips := tripsOf(loop)
	if trips == 0 || loop.Streams() > 0 {
		return in
	}
	first := streamAfter(loop.Body, in)
	if trips == 1 || first == in || streamAfter(loop.Body, first) == first {
		return first
	}
	return streamState{}
}

// lowerLoop appends to out the lowered form of loop, entered with current
// stream in.
func (sp *streamLowering) lowerLoop(loop *ir.Op, in streamState, encl []*ir.Op, out []*ir.Op) []*ir.Op {
	n := loop.Streams()
	trips := tripsOf(loop)
	loop.Attrs = withoutAttr(loop.Attrs, "streams")
	if trips == 0 {
		sp.lowerBlock(loop.Body, in, append(encl, loop))
		return append(out, loop) // it never runs: nothing to put on streams
	}
	if !in.known {
		sp.errs.Add(loop.Pos, "for: the stream current before this loop with streams differs from one iteration of the loop at %s to the next (its body sets the stream), so the loop could not go back to it; set the stream (set_stream) before this loop", encl[len(encl)-1].Pos)
		return append(out, loop)
	}
	m := int(min(uint64(n), trips))
	index := loop.Body.Args[0]
	pos := loop.Pos
	streams := make([]*ir.Value, m)
	for k := range streams {
		op := &ir.Op{Code: ir.OpStream, Pos: pos}
		streams[k] = &ir.Value{Name: sp.names.fresh(index.Name, ".stream"+strconv.Itoa(k)), Type: &ir.StreamType{}, Def: op, Pos: pos}
		op.Results = []*ir.Value{streams[k]}
		out = append(out, op)
	}
	// The fork: each loop stream first waits for the stream current before
	// the loop, so the loop comes after everything before it, as the
	// program says. Not only data dependencies need it: an order between
	// ranks (a barrier, a collective, peers writing into this rank's
	// storage through a contiguous view) is invisible in this rank's
	// values, and an alloc's zeroing is a write no value names.
	for _, s := range streams {
		out = append(out, setStream(s, pos), &ir.Op{Code: ir.OpWaitStream, Operands: streamOperands(in.v), Pos: pos})
	}
	if m > 1 {
		pick := &ir.Op{Code: ir.OpPickStream, Operands: append(append([]*ir.Value(nil), streams...), index), Pos: pos}
		if from := loop.IntAttr("from", 0); from != 0 {
			pick.SetAttr("from", ir.AttrValue{Kind: ir.KindInt, Int: from})
		}
		if step := loop.IntAttr("step", 1); step != 1 {
			pick.SetAttr("step", ir.AttrValue{Kind: ir.KindInt, Int: step})
		}
		cur := &ir.Value{Name: sp.names.fresh(index.Name, ".stream"), Type: &ir.StreamType{}, Def: pick, Pos: pos}
		pick.Results = []*ir.Value{cur}
		loop.Body.Ops = append([]*ir.Op{pick, setStream(cur, pos)}, loop.Body.Ops...)
	}
	out = append(out, loop)
	return append(out, setStream(in.v, pos), &ir.Op{Code: ir.OpWaitStream, Operands: streams, Pos: pos})
}

func setStream(s *ir.Value, pos ir.Pos) *ir.Op {
	return &ir.Op{Code: ir.OpSetStream, Operands: streamOperands(s), Pos: pos}
}

// streamOperands is s as an operand list: none for the default stream.
func streamOperands(s *ir.Value) []*ir.Value {
	if s == nil {
		return nil
	}
	return []*ir.Value{s}
}

func withoutAttr(attrs []ir.Attr, key string) []ir.Attr {
	out := attrs[:0]
	for _, a := range attrs {
		if a.Key != key {
			out = append(out, a)
		}
	}
	return out
}
