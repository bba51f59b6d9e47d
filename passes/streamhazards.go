package passes

import (
	"fmt"

	"github.com/hirlab/hir/ir"
)

// streamHazards is the pass that rejects an access, on one stream, of
// storage another stream wrote (or, for a write, read or wrote) with
// nothing ordering the two. A use of a value on another stream waits for
// the value's producer (the op that made it, or the last op that wrote
// into it as its destination: SEMANTICS.md, "Streams"), and `wait_stream`
// and the host's waits order whole streams; a read of the same storage
// through another name — the tensor a view was taken of, or another view
// of the same part made before the write — waits for none of these, so it
// reads the storage as it was, as it is being written, or after, depending
// on timing; nor does anything order a write after another stream's read
// or write of the same part. Every rank runs the same program, so this
// rank's streams are enough: the pass plays the program's ops in order
// (loops unrolled, up to raceCheckLimit ops; a larger program is left
// unchecked) with a vector clock per stream, and reports the first access
// that conflicts with an unordered one. Async collectives and transfers
// keep their own rules (a result is read after its `wait`;
// checkTransferRaces) and are not played here.
func streamHazards(p *ir.Program, _ *Context) error {
	if !hasOp(p.Body, ir.OpStream) {
		return nil // one stream: program order is the order
	}
	if _, ok := flatLen(p.Body, raceCheckLimit); !ok {
		return nil // too long to play: left unchecked
	}
	s := &hazardPlay{streams: map[*ir.Value]int{}, prod: map[*ir.Value]stamp{}, index: map[*ir.Value]int64{}, accesses: map[*ir.Value][][]streamAccess{},
		names: []string{"the default stream"}, values: []*ir.Value{nil}}
	s.clocks = [][]int{{0}}
	if !s.block(p.Body) || s.compared > hazardCompareLimit {
		return nil // too long to play: left unchecked
	}
	return s.errs.Err()
}

// hazardCompareLimit bounds the pairs of accesses the pass compares: many
// unordered accesses of disjoint parts of one tensor (a long loop over
// streams with no waits) would cost their square; past it the program is
// left unchecked, as one too long to play is.
const hazardCompareLimit = 1 << 22

// stamp is a point of one stream: after its n-th op, with what that op
// had seen of every stream (its vector clock).
type stamp struct {
	stream int
	clock  []int
}

// streamAccess is one op's read or write of storage: through which value,
// where in the storage, and when on which stream.
type streamAccess struct {
	op    *ir.Op
	x     *ir.Value
	root  *ir.Value
	path  viewPath
	at    stamp
	write bool
}

// viewPath is a chain of views from a storage (pathTo) with each select's
// index as the play knows it (-1: a value computed at run time).
type viewPath struct {
	steps []viewStep
	at    []int64
}

type hazardPlay struct {
	streams  map[*ir.Value]int // stream value -> stream number (0: default)
	names    []string          // by stream number, for messages
	values   []*ir.Value       // by stream number: the `stream` op's result (nil for the default)
	clocks   [][]int           // by stream: how many ops of each stream it has seen
	current  int
	prod     map[*ir.Value]stamp            // a value's producer (or last writer)
	accesses map[*ir.Value][][]streamAccess // by storage, then by stream, in stream order
	compared int                            // access pairs looked at, against hazardCompareLimit
	index    map[*ir.Value]int64            // loop indexes while unrolled
	played   int
	errs     ir.ErrorList
	failed   bool
}

// block plays b's ops; false when the program is too long to play.
func (s *hazardPlay) block(b *ir.Block) bool {
	for _, op := range b.Ops {
		if s.failed {
			return true
		}
		if op.Code == ir.OpFor {
			from, step := op.IntAttr("from", 0), op.IntAttr("step", 1)
			trips := ir.LoopTrips(from, op.IntAttr("to", 0), step)
			for k, i := uint64(0), from; k < trips; k, i = k+1, i+step {
				s.index[op.Body.Args[0]] = i
				if !s.block(op.Body) {
					return false
				}
			}
			continue
		}
		if s.played++; s.played > raceCheckLimit {
			return false
		}
		s.op(op)
	}
	return true
}

func (s *hazardPlay) op(op *ir.Op) {
	switch op.Code {
	case ir.OpStream:
		if _, ok := s.streams[op.Result()]; !ok {
			s.streams[op.Result()] = len(s.clocks)
			s.names = append(s.names, fmt.Sprintf("the stream %s", op.Result()))
			s.values = append(s.values, op.Result())
			s.clocks = append(s.clocks, make([]int, len(s.clocks)+1))
			for i := range s.clocks {
				s.clocks[i] = grow(s.clocks[i], len(s.clocks))
			}
		}
		return
	case ir.OpSetStream:
		s.current = 0
		if len(op.Operands) == 1 {
			s.current = s.streams[op.Operands[0]]
		}
		return
	case ir.OpPickStream:
		n := len(op.Operands) - 1
		i := s.index[op.Operands[n]]
		if x := op.Operands[n]; x.Lit != nil {
			i = x.Lit.Int
		}
		if k := op.PickedStream(i, n); k >= 0 && k < n {
			s.streams[op.Result()] = s.streams[op.Operands[k]]
		}
		return
	case ir.OpWaitStream:
		if len(op.Operands) == 0 { // the default stream's work so far
			s.merge(s.current, append([]int(nil), s.clocks[0]...))
		}
		for _, x := range op.Operands {
			s.merge(s.current, append([]int(nil), s.clocks[s.streams[x]]...))
		}
		return
	}
	if op.Code.Info().HostWait != "" {
		// the host waits for a stream (sync_stream, barrier, register,
		// deregister): what it issues next comes after that stream's work
		st := s.current
		if op.Code == ir.OpSyncStream && len(op.Operands) == 1 {
			st = s.streams[op.Operands[0]]
		}
		seen := append([]int(nil), s.clocks[st]...)
		for k := range s.clocks {
			s.merge(k, seen)
		}
	}
	if op.Async() || op.Code == ir.OpTransfer || op.Code == ir.OpWait || op.Code == ir.OpFree {
		return
	}
	cur := s.current
	// uses wait for their producers (as the evaluator's events do)
	for _, x := range op.Operands {
		if p, ok := s.prod[x]; ok && p.stream != cur {
			s.merge(cur, p.clock)
		}
	}
	dest := op.Code.Info().Destination(len(op.Operands))
	var reads []streamAccess
	if op.Code.Class() != ir.ClassView {
		for i, x := range op.Operands {
			if x.Lit != nil || x.Tensor() == nil || !op.InputOperand(i) {
				continue
			}
			root, path := s.pathTo(x)
			if s.unordered(op, x, root, path, cur, false) {
				return
			}
			reads = append(reads, streamAccess{op: op, x: x, root: root, path: path})
		}
	}
	var wrote *streamAccess
	if dest >= 0 && op.Operands[dest].Lit == nil {
		d := op.Operands[dest]
		root, path := s.pathTo(d)
		if s.unordered(op, d, root, path, cur, true) {
			return
		}
		wrote = &streamAccess{op: op, x: d, root: root, path: path, write: true}
	}
	s.clocks[cur][cur]++
	at := stamp{stream: cur, clock: append([]int(nil), s.clocks[cur]...)}
	for _, r := range op.Results {
		s.prod[r] = at
	}
	for _, a := range reads {
		s.record(a, at)
	}
	if wrote != nil {
		s.prod[wrote.x] = at // the evaluator makes the writer the destination's producer
		s.record(*wrote, at)
	}
}

// record keeps access a, made at, for the accesses after it.
func (s *hazardPlay) record(a streamAccess, at stamp) {
	a.at = at
	byStream := s.accesses[a.root]
	for len(byStream) <= at.stream {
		byStream = append(byStream, nil)
	}
	byStream[at.stream] = append(byStream[at.stream], a)
	s.accesses[a.root] = byStream
}

// unordered reports (and stops the play at) op's read (or, with write,
// its write) of x, at path in root, on stream cur, when an access of that
// storage on another stream that conflicts with it (a write before a
// read; a read or a write before a write) is not ordered before it.
func (s *hazardPlay) unordered(op *ir.Op, x, root *ir.Value, path viewPath, cur int, write bool) bool {
	for y, as := range s.accesses[root] {
		if y == cur {
			continue // one stream runs in program order
		}
		// newest first: once one is ordered before cur, so are the rest
		for i := len(as) - 1; i >= 0 && s.clocks[cur][y] < as[i].at.clock[y]; i-- {
			a := as[i]
			if s.compared++; s.compared > hazardCompareLimit {
				s.failed = true // left unchecked (streamHazards)
				return true
			}
			if !a.write && !write || !overlap(path, a.path) {
				continue
			}
			s.report(op, x, a, cur, write)
			return true
		}
	}
	return false
}

// report adds the error for op's access of x on stream cur, which access
// a on another stream conflicts with, and stops the play.
func (s *hazardPlay) report(op *ir.Op, x *ir.Value, a streamAccess, cur int, write bool) {
	wait := "`wait_stream` (no operand: the default stream's work)"
	if a.at.stream != 0 {
		wait = "`wait_stream " + s.values[a.at.stream].String() + "`"
	}
	switch {
	case !write:
		s.errs.Add(op.Pos, "%s reads %s on %s, but %s at %s wrote that storage on %s and nothing orders the read after it (a use waits only for its value's producer): read %s's result %s, or put %s on %s before the read",
			op.Code, x, s.names[cur], a.op.Code, a.op.Pos, s.names[a.at.stream], a.op.Code, a.op.Result(), wait, s.names[cur])
	case a.write:
		s.errs.Add(op.Pos, "%s writes %s on %s, but %s at %s wrote that storage on %s and nothing orders the two: which lands last depends on timing; put %s on %s before this write",
			op.Code, x, s.names[cur], a.op.Code, a.op.Pos, s.names[a.at.stream], wait, s.names[cur])
	default:
		s.errs.Add(op.Pos, "%s writes %s on %s while %s at %s may still be reading that storage (%s) on %s: nothing orders the write after the read; put %s on %s before the write",
			op.Code, x, s.names[cur], a.op.Code, a.op.Pos, a.x, s.names[a.at.stream], wait, s.names[cur])
	}
	s.failed = true
}

// pathTo is pathTo (streamrace.go) with the select indexes resolved.
func (s *hazardPlay) pathTo(x *ir.Value) (*ir.Value, viewPath) {
	root, steps := pathTo(x)
	p := viewPath{steps: steps, at: make([]int64, len(steps))}
	for i, st := range steps {
		p.at[i] = -1
		switch {
		case st.index == nil:
		case st.index.Lit != nil:
			p.at[i] = st.index.Lit.Int
		default:
			if v, ok := s.index[st.index]; ok {
				p.at[i] = v
			}
		}
	}
	return root, p
}

// overlap reports whether two view paths from one storage may touch a
// common element (pathsDisjoint, with indexes known while playing).
func overlap(a, b viewPath) bool {
	return !pathsDisjoint(a.steps, b.steps, func(k int) indexRelation {
		switch {
		case a.at[k] < 0 || b.at[k] < 0:
			return indexesMayMeet
		case a.at[k] == b.at[k]:
			return indexesEqual
		}
		return indexesDiffer
	})
}

// merge makes stream k have seen what clock has.
func (s *hazardPlay) merge(k int, clock []int) {
	c := s.clocks[k]
	for i, v := range clock {
		if i < len(c) && v > c[i] {
			c[i] = v
		}
	}
}

func grow(c []int, n int) []int {
	for len(c) < n {
		c = append(c, 0)
	}
	return c
}
