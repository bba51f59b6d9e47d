package passes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hirlab/hir/ir"
)

// deadlock is the pass that rejects a program whose ranks would wait for
// each other forever. Every rank runs the same program, so how the ranks'
// hosts and streams wait on each other is known before the run: it plays
// the program on every rank at once — the host enqueueing work on streams
// in order, each stream running its work in order, a collective or barrier
// completing once every rank's stream has reached it, a send once the
// matching recv has (and the other way round), a use on another stream
// after its producer, `sync_stream`, `register` and `deregister` holding
// the host — and rejects a program in which some rank can never finish: a
// cycle of waits that would otherwise hang until the timeout. It models
// only waits that every runtime has, so what it rejects hangs everywhere;
// programs past DeadlockCheckLimit are left to the run-time timeout. It runs on
// a validated program (sends already paired with recvs).
func deadlock(p *ir.Program, _ *Context) error {
	size := p.Mesh.Size()
	if size < 1 || !waitsOnPeers(p.Body) {
		return nil
	}
	var flat []*ir.Op
	if !flatten(p.Body, &flat, DeadlockCheckLimit/size) {
		return nil
	}
	s := newSchedule(size, flat)
	if hasOp(p.Body, ir.OpPickStream) {
		s.picks = pickedStreams(p.Body)
	}
	s.run()
	var errs ir.ErrorList
	if msg, op := s.stuck(); op != nil {
		errs.Add(op.Pos, "%s: %s", op.Code, msg)
	}
	return errs.Err()
}

// DeadlockCheckLimit bounds the ops the deadlock pass plays, loop
// iterations times ranks: a larger program is not played, and only the
// run-time timeout catches its cycles of waits.
const DeadlockCheckLimit = 1 << 18

// waitsOnPeers reports whether b holds an op that waits for other ranks.
func waitsOnPeers(b *ir.Block) bool {
	for _, op := range b.Ops {
		switch {
		case op.Code.IsCollective(), op.Code.Info().Meets, op.Code == ir.OpSend, op.Code == ir.OpRecv, op.Code == ir.OpRegister:
			return true
		case op.Body != nil && op.Code == ir.OpFor && waitsOnPeers(op.Body):
			return true
		}
	}
	return false
}

// flatten appends b's ops to out with loops unrolled (a loop's own op is
// kept off the list); false past limit ops. It counts them first, so that
// a program past the limit costs no list and one within it one allocation.
func flatten(b *ir.Block, out *[]*ir.Op, limit int) bool {
	n, ok := flatLen(b, limit-len(*out))
	if !ok {
		return false
	}
	*out = slices.Grow(*out, n)
	return unroll(b, out, limit)
}

// flatLen is the number of ops flatten lists for b; false past limit.
func flatLen(b *ir.Block, limit int) (int, bool) {
	n := 0
	for _, op := range b.Ops {
		if op.Code != ir.OpFor {
			n++
		} else if trips := ir.LoopTrips(op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1)); trips > 0 {
			body, ok := flatLen(op.Body, limit)
			if !ok || (body > 0 && trips > uint64(limit/body)) {
				return 0, false
			}
			n += int(trips) * body
		}
		if n > limit {
			return 0, false
		}
	}
	return n, true
}

// unroll is flatten's appending.
func unroll(b *ir.Block, out *[]*ir.Op, limit int) bool {
	for _, op := range b.Ops {
		if op.Code != ir.OpFor {
			if len(*out) >= limit {
				return false
			}
			*out = append(*out, op)
			continue
		}
		trips := ir.LoopTrips(op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1))
		for i := uint64(0); i < trips; i++ {
			if !unroll(op.Body, out, limit) {
				return false
			}
		}
	}
	return true
}

// itemKind says what a piece of stream work waits for besides its stream.
type itemKind uint8

const (
	plainItem   itemKind = iota // nothing
	collItem                    // every rank's k-th collective
	barrierItem                 // every rank's k-th barrier
	sendItem                    // the peer's matching recv
	recvItem                    // the peer's matching send
)

// item is one op's work on one stream of one rank.
type item struct {
	op      *ir.Op
	kind    itemKind
	seq     int // k: which collective, barrier or send/recv of its pair
	peer    int // the other rank of a send or recv
	deps    []streamPos
	arrived bool // at its stream's head with its deps met (rendezvous items)
}

// simStream is a stream's work in order; done counts the finished items.
type simStream struct {
	name  string
	items []*item
	done  int
}

func (s *simStream) drained() bool { return s.done == len(s.items) }

// streamPos is a point in a stream: passed once done reaches n.
type streamPos struct {
	s *simStream
	n int
}

func (p streamPos) passed() bool { return p.s.done >= p.n }

type simRank struct {
	id       int
	pc       int
	def      *simStream
	comm     *simStream // async collectives and transfers
	current  *simStream
	streams  map[*ir.Op]*simStream
	bound    map[*ir.Value]*simStream // stream values
	produced map[*ir.Value]streamPos  // where a value is ready
	async    map[*ir.Value]streamPos  // an async result's completion
	xfers    map[*ir.Value]streamPos  // transfers posted, by registration handle
	sends    map[int]int              // sends enqueued, by destination
	recvs    map[int]int              // recvs enqueued, by source
	colls    int
	barriers int
	meets    int   // host meetings (register, deregister) passed
	blocked  *item // what the host waits for, when it waits for a stream
}

type schedule struct {
	size  int
	ops   []*ir.Op
	ranks []*simRank
	// arrivals count the ranks at each collective, barrier and host meeting
	colls, barriers, meets map[int]int
	// pending send and recv items by (src, dst, k)
	p2p map[[3]int][2]*item
	// picks: the operand each pick_stream of ops takes (pickedStreams)
	picks map[int]int
}

func newSchedule(size int, ops []*ir.Op) *schedule {
	s := &schedule{size: size, ops: ops, colls: map[int]int{}, barriers: map[int]int{}, meets: map[int]int{}, p2p: map[[3]int][2]*item{}}
	for r := 0; r < size; r++ {
		def := &simStream{name: "the default stream"}
		s.ranks = append(s.ranks, &simRank{id: r, def: def, current: def, comm: &simStream{name: "the stream of async collectives and transfers"},
			streams: map[*ir.Op]*simStream{}, bound: map[*ir.Value]*simStream{}, produced: map[*ir.Value]streamPos{},
			async: map[*ir.Value]streamPos{}, xfers: map[*ir.Value]streamPos{}, sends: map[int]int{}, recvs: map[int]int{}})
	}
	return s
}

// run plays the program until nothing moves.
func (s *schedule) run() {
	for moved := true; moved; {
		moved = false
		for _, r := range s.ranks {
			for s.hostStep(r) {
				moved = true
			}
		}
		for _, r := range s.ranks {
			for _, st := range r.allStreams() {
				for s.streamStep(r, st) {
					moved = true
				}
			}
		}
	}
}

func (r *simRank) allStreams() []*simStream {
	out := []*simStream{r.def, r.comm}
	for _, op := range sortedStreamOps(r.streams) {
		out = append(out, r.streams[op])
	}
	return out
}

// sortedStreamOps orders a rank's streams by their ops' positions, so the
// play (and its message) is the same every time.
func sortedStreamOps(m map[*ir.Op]*simStream) []*ir.Op {
	ops := make([]*ir.Op, 0, len(m))
	for op := range m {
		ops = append(ops, op)
	}
	for i := 1; i < len(ops); i++ {
		for j := i; j > 0 && posLess(ops[j].Pos, ops[j-1].Pos); j-- {
			ops[j], ops[j-1] = ops[j-1], ops[j]
		}
	}
	return ops
}

func posLess(a, b ir.Pos) bool {
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Col < b.Col
}

func (r *simRank) at() streamPos { return streamPos{r.current, len(r.current.items)} }

// enqueue puts op's work on st after what st holds; operands produced on
// another stream are waited for.
func (r *simRank) enqueue(st *simStream, op *ir.Op, kind itemKind, extra ...streamPos) *item {
	it := &item{op: op, kind: kind, deps: extra}
	for _, x := range op.Operands {
		if p, ok := r.produced[x]; ok && p.s != st {
			it.deps = append(it.deps, p)
		}
	}
	st.items = append(st.items, it)
	return it
}

// hostStep runs rank r's host one op further, if it can.
func (s *schedule) hostStep(r *simRank) bool {
	if r.pc > len(s.ops) {
		return false
	}
	if r.pc == len(s.ops) {
		// the end of a Run: the host waits for every stream
		for _, st := range r.allStreams() {
			if !st.drained() {
				r.blocked = st.items[st.done]
				return false
			}
		}
		r.blocked = nil
		r.pc++
		return true
	}
	op := s.ops[r.pc]
	switch {
	case op.Code.Info().Meets:
		// every rank's current stream meets here (barrier,
		// stream_barrier), in program order (the same order on every
		// rank, so one count pairs them)
		it := r.enqueue(r.current, op, barrierItem)
		it.seq = r.barriers
		r.barriers++
		r.pc++
		return true
	}
	switch op.Code {
	case ir.OpStream:
		st := r.streams[op]
		if st == nil {
			st = &simStream{name: fmt.Sprintf("the stream %s", op.Result())}
			r.streams[op] = st
		}
		r.bound[op.Result()] = st
	case ir.OpSetStream:
		r.current = r.def
		if len(op.Operands) == 1 && r.bound[op.Operands[0]] != nil {
			r.current = r.bound[op.Operands[0]]
		}
	case ir.OpPickStream:
		r.bound[op.Result()] = r.bound[op.Operands[s.picks[r.pc]]]
	case ir.OpWaitStream:
		// the current stream waits for the others' work so far
		r.enqueue(r.current, op, plainItem, r.streamEnds(op)...)
	case ir.OpSyncStream:
		st := r.current
		if len(op.Operands) == 1 && r.bound[op.Operands[0]] != nil {
			st = r.bound[op.Operands[0]]
		}
		if !st.drained() {
			r.blocked = st.items[st.done]
			return false
		}
	case ir.OpRegister, ir.OpDeregister:
		// register: the host waits for the current stream; deregister: for
		// this rank's transfers on the registration. Then every rank meets.
		wait := r.at()
		if op.Code == ir.OpDeregister {
			wait = r.xfers[op.Operands[0]]
		}
		if wait.s != nil && !wait.passed() {
			r.blocked = wait.s.items[wait.s.done]
			return false
		}
		r.blocked = nil
		if !s.meet(r, op) {
			return false
		}
	case ir.OpWait:
		// the current stream waits for the async collective or transfer
		var deps []streamPos
		p, ok := r.async[op.Operands[0]]
		if ok {
			deps = append(deps, p)
		}
		r.enqueue(r.current, op, plainItem, deps...)
		if ok && op.Operands[0].Tensor() != nil {
			r.produced[op.Operands[0]] = r.at()
		}
	case ir.OpTransfer:
		r.enqueue(r.comm, op, plainItem, r.at())
		r.xfers[op.Operands[0]] = streamPos{r.comm, len(r.comm.items)}
		r.async[op.Result()] = streamPos{r.comm, len(r.comm.items)}
	case ir.OpSend, ir.OpRecv:
		kind, peer := sendItem, op.Peer(r.id, s.size)
		n := r.sends
		if op.Code == ir.OpRecv {
			kind, n = recvItem, r.recvs
		}
		it := r.enqueue(r.current, op, kind)
		it.peer, it.seq = peer, n[peer]
		n[peer]++
	default:
		if op.Code.IsCollective() {
			st, extra := r.current, []streamPos(nil)
			if op.Async() {
				st, extra = r.comm, []streamPos{r.at()}
			}
			it := r.enqueue(st, op, collItem, extra...)
			it.seq = r.colls
			r.colls++
			if op.Async() {
				r.async[op.Result()] = streamPos{st, len(st.items)}
				break
			}
		} else {
			r.enqueue(r.current, op, plainItem)
		}
	}
	for _, res := range op.Results {
		if _, isAsync := r.async[res]; !isAsync && res.Tensor() != nil {
			r.produced[res] = r.at()
		}
	}
	r.pc++
	return true
}

// meet is a host meeting of every rank (register, deregister): true once
// all have come to this one.
func (s *schedule) meet(r *simRank, op *ir.Op) bool {
	k := r.meets
	if s.meets[k] < 0 {
		r.meets++
		r.blocked = nil
		return true // the meeting happened; this rank goes on
	}
	if !r.waitingAt(op) {
		s.meets[k]++
		r.markWaiting(op)
	}
	if s.meets[k] < s.size {
		return false
	}
	s.meets[k] = -1 // everyone came: all go on
	r.meets++
	r.blocked = nil
	return true
}

// markWaiting and waitingAt remember that a rank's host has arrived at a
// meeting (so it is counted once while it waits).
func (r *simRank) markWaiting(op *ir.Op) { r.blocked = &item{op: op, kind: plainItem, seq: -1} }
func (r *simRank) waitingAt(op *ir.Op) bool {
	return r.blocked != nil && r.blocked.op == op && r.blocked.seq == -1
}

// streamStep finishes the work at st's head, if it can.
func (s *schedule) streamStep(r *simRank, st *simStream) bool {
	if st.drained() {
		return false
	}
	it := st.items[st.done]
	for _, d := range it.deps {
		if !d.passed() {
			return false
		}
	}
	switch it.kind {
	case plainItem:
		st.done++
		return true
	case collItem, barrierItem:
		count := s.colls
		if it.kind == barrierItem {
			count = s.barriers
		}
		if !it.arrived {
			it.arrived = true
			count[it.seq]++
		}
		if count[it.seq] < s.size {
			return false
		}
		st.done++ // every rank is there: each finishes its own as it looks
		return true
	default:
		src, dst := r.id, it.peer
		if it.kind == recvItem {
			src, dst = it.peer, r.id
		}
		key := [3]int{src, dst, it.seq}
		pair := s.p2p[key]
		side := 0
		if it.kind == recvItem {
			side = 1
		}
		it.arrived = true
		pair[side] = it
		s.p2p[key] = pair
		if pair[1-side] == nil || !pair[1-side].arrived {
			return false
		}
		st.done++
		return true
	}
}

// stuck reports the first rank that cannot finish, as a message and the op
// to put it at; op is nil when every rank finishes.
func (s *schedule) stuck() (string, *ir.Op) {
	for _, r := range s.ranks {
		if r.pc > len(s.ops) {
			continue
		}
		var why strings.Builder
		var at *ir.Op
		if r.pc < len(s.ops) && r.blocked == nil {
			at = s.ops[r.pc]
		}
		it := r.blocked
		if it != nil && it.seq == -1 {
			// waiting at a host meeting: who has not come?
			at = it.op
			fmt.Fprintf(&why, "every rank must reach this %s together, but %s never does", it.op.Code, s.absent(it.op))
			return s.wrap(r, why.String()), at
		}
		if it == nil {
			return fmt.Sprintf("rank %d stops here and never goes on (the ranks wait for each other forever)", r.id), at
		}
		if at == nil {
			at = it.op
		}
		fmt.Fprintf(&why, "on rank %d %s", r.id, s.explain(r, it, 3))
		return s.wrap(r, why.String()), at
	}
	return "", nil
}

func (s *schedule) wrap(r *simRank, why string) string {
	return "the ranks wait for each other forever: " + why + "; reorder the ops, or put one side on a stream of its own (testdata/send_recv.hir shows a ring shift)"
}

// absent names the ranks whose hosts never reach the meeting op is.
func (s *schedule) absent(op *ir.Op) string {
	var who []string
	for _, q := range s.ranks {
		if !q.waitingAt(op) {
			who = append(who, fmt.Sprintf("rank %d (%s)", q.id, s.hostAt(q)))
		}
	}
	return strings.Join(who, ", ")
}

// hostAt says where rank q's host waits.
func (s *schedule) hostAt(q *simRank) string {
	switch {
	case q.blocked != nil && q.blocked.seq == -1:
		return fmt.Sprintf("its host waits at the %s at %s", q.blocked.op.Code, q.blocked.op.Pos)
	case q.blocked != nil && q.pc < len(s.ops):
		return fmt.Sprintf("its host waits, at the %s at %s, for the %s at %s", s.ops[q.pc].Code, s.ops[q.pc].Pos, q.blocked.op.Code, q.blocked.op.Pos)
	case q.blocked != nil:
		return fmt.Sprintf("its host waits, at the end, for the %s at %s", q.blocked.op.Code, q.blocked.op.Pos)
	case q.pc < len(s.ops):
		return fmt.Sprintf("its host is at the %s at %s", s.ops[q.pc].Code, s.ops[q.pc].Pos)
	}
	return "its host waits for its streams at the end"
}

// explain says what item it waits for, following the chain a few steps.
func (s *schedule) explain(r *simRank, it *item, depth int) string {
	what := fmt.Sprintf("the %s at %s", it.op.Code, it.op.Pos)
	st, idx := r.locate(it)
	if st != nil && idx > st.done {
		ahead := st.items[st.done]
		return what + fmt.Sprintf(" is queued behind the %s at %s on %s, which %s", ahead.op.Code, ahead.op.Pos, st.name, s.explainRest(r, ahead, depth-1))
	}
	return what + " " + s.explainRest(r, it, depth)
}

func (s *schedule) explainRest(r *simRank, it *item, depth int) string {
	for _, d := range it.deps {
		if !d.passed() {
			return fmt.Sprintf("waits for the %s at %s on %s", d.s.items[d.s.done].op.Code, d.s.items[d.s.done].op.Pos, d.s.name)
		}
	}
	switch it.kind {
	case sendItem, recvItem:
		q := s.ranks[it.peer]
		want := "recv"
		if it.kind == recvItem {
			want = "send"
		}
		p := s.partner(r, it)
		if p == nil {
			return fmt.Sprintf("waits for rank %d's matching %s, which rank %d never posts (%s)", q.id, want, q.id, s.hostAt(q))
		}
		msg := fmt.Sprintf("waits for rank %d's matching %s at %s", q.id, want, p.op.Pos)
		if depth <= 0 {
			return msg
		}
		st, idx := q.locate(p)
		if st != nil && idx > st.done {
			ahead := st.items[st.done]
			return msg + fmt.Sprintf(", queued on rank %d behind the %s at %s on %s", q.id, ahead.op.Code, ahead.op.Pos, st.name)
		}
		return msg
	case collItem, barrierItem:
		var missing []string
		for _, q := range s.ranks {
			if !q.hasArrived(it) {
				missing = append(missing, fmt.Sprint(q.id))
			}
		}
		return fmt.Sprintf("waits for rank(s) %s to reach it", strings.Join(missing, ", "))
	}
	return "cannot run"
}

// partner finds the matching send or recv item of it on the peer, if
// enqueued.
func (s *schedule) partner(r *simRank, it *item) *item {
	q := s.ranks[it.peer]
	want := recvItem
	if it.kind == recvItem {
		want = sendItem
	}
	for _, st := range q.allStreams() {
		for _, x := range st.items {
			if x.kind == want && x.peer == r.id && x.seq == it.seq {
				return x
			}
		}
	}
	return nil
}

// hasArrived reports whether rank q's stream has reached its own item of
// the same collective or barrier as it.
func (q *simRank) hasArrived(it *item) bool {
	for _, st := range q.allStreams() {
		for _, x := range st.items {
			if x.kind == it.kind && x.seq == it.seq {
				return x.arrived
			}
		}
	}
	return false
}

// locate finds the stream holding it and its index there.
func (r *simRank) locate(it *item) (*simStream, int) {
	for _, st := range r.allStreams() {
		for i, x := range st.items {
			if x == it {
				return st, i
			}
		}
	}
	return nil, 0
}
