package ir

// Stream-parallel loops: `for %i = FROM to TO streams N {` runs its
// iterations on N streams in turn (the stream-parallel pass lowers it with
// pick_stream and wait_stream).

// Streams is a for loop's streams attribute: how many streams its
// iterations rotate over, 0 when it has none (they run on the current
// stream).
func (op *Op) Streams() int64 {
	if op.Code != OpFor {
		return 0
	}
	return op.IntAttr("streams", 0)
}

// PickedStream is which of n streams a pick_stream takes for index i: the
// iteration number (i-from)/step of a loop `from=F step=S`, rounded down,
// modulo n (always in [0, n)). Exact for every int64 i and from.
func (op *Op) PickedStream(i int64, n int) int {
	if n <= 0 {
		return 0
	}
	from, step := op.IntAttr("from", 0), op.IntAttr("step", 1)
	if step <= 0 {
		step = 1 // Verify rejects it; never divide by zero
	}
	s, m := uint64(step), uint64(n)
	if i >= from {
		// i-from as unsigned is exact even where int64 would overflow.
		return int((uint64(i) - uint64(from)) / s % m)
	}
	// i before from: iteration -ceil(d/step), taken modulo n.
	d := uint64(from) - uint64(i)
	back := (d/s + min(d%s, 1)) % m
	return int((m - back) % m)
}

// streamsAttr checks a for loop's streams attribute.
func (v *verifier) streamsAttr(op *Op) {
	for _, a := range op.Attrs {
		if a.Key == "streams" && a.Value.Kind == KindInt && a.Value.Int < 1 {
			pos := a.Pos
			if !pos.IsValid() {
				pos = op.Pos
			}
			v.errs.Add(pos, "for: streams must be at least 1, got %d (the number of streams the iterations rotate over)", a.Value.Int)
		}
	}
}
