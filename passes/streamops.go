package passes

import (
	"github.com/hirlab/hir/ir"
)

// What the passes know of pick_stream and wait_stream, the ops the
// stream-parallel pass emits: their type rules (typecheck) and their
// waits (the deadlock pass's play).

// streamOp types pick_stream (streams, then an integer index; a stream)
// and wait_stream (streams; no result).
func (c *checker) streamOp(op *ir.Op) ([]inferred, bool) {
	streams := op.Operands
	if op.Code == ir.OpPickStream && len(streams) > 0 {
		streams = streams[:len(streams)-1]
		idx := op.Operands[len(op.Operands)-1]
		switch t := idx.Type.(type) {
		case nil:
			if idx.Lit != nil && idx.Lit.IsFloat {
				c.errs.Add(idx.Pos, "pick_stream: the index must be an integer, not %s", idx)
				return nil, false
			}
		case *ir.ScalarType:
			if !t.DType.IsInt() {
				c.errs.Add(op.Pos, "pick_stream: the index %s must be an i64 scalar (a loop index), not %s", idx, t)
				return nil, false
			}
		default:
			c.errs.Add(op.Pos, "pick_stream: the index %s must be an i64 scalar (a loop index), not %s", idx, t)
			return nil, false
		}
	}
	for _, x := range streams {
		if _, ok := x.Type.(*ir.StreamType); !ok && x.Type != nil {
			c.errs.Add(op.Pos, "%s: %s is not a stream (its type is %s)", op.Code, x, x.Type)
			return nil, false
		}
	}
	if op.Code == ir.OpPickStream {
		return c.one(&ir.StreamType{}), true
	}
	return nil, true
}

// pickedStreams maps the place in the flattened program (flatten's
// order, loops unrolled) of every pick_stream to the operand it picks, for
// the deadlock pass: the choice depends on the loop index, which the
// flattened list does not hold.
func pickedStreams(b *ir.Block) map[int]int {
	picks := map[int]int{}
	n := 0
	index := map[*ir.Value]int64{}
	var walk func(b *ir.Block)
	walk = func(b *ir.Block) {
		for _, op := range b.Ops {
			if op.Code != ir.OpFor {
				if op.Code == ir.OpPickStream {
					x := op.Operands[len(op.Operands)-1]
					i := index[x]
					if x.Lit != nil {
						i = x.Lit.Int
					}
					picks[n] = op.PickedStream(i, len(op.Operands)-1)
				}
				n++
				continue
			}
			from, step := op.IntAttr("from", 0), op.IntAttr("step", 1)
			trips := tripsOf(op)
			for k, i := uint64(0), from; k < trips; k++ {
				if k > 0 {
					i += step
				}
				index[op.Body.Args[0]] = i
				walk(op.Body)
			}
		}
	}
	walk(b)
	return picks
}

// streamEnds are the points the streams of a wait_stream have reached:
// its operands', or the default stream's without one.
func (r *simRank) streamEnds(op *ir.Op) []streamPos {
	if len(op.Operands) == 0 {
		if r.current == r.def {
			return nil
		}
		return []streamPos{{r.def, len(r.def.items)}}
	}
	var ends []streamPos
	for _, x := range op.Operands {
		if st := r.bound[x]; st != nil && st != r.current {
			ends = append(ends, streamPos{st, len(st.items)})
		}
	}
	return ends
}
