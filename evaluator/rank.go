package evaluator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// rank is one rank's interpreter state; only that rank's goroutine uses it.
type rank struct {
	job  *Job
	dev  runtime.Device
	id   int
	size int

	inputs  []runtime.Tensor // input buffers by input index, kept across Runs
	pool    *pool
	handles map[handleKey]runtime.Buffer
	kernels []runtime.Kernel // by op id
	streams []runtime.Stream // by op id: made by `stream` ops, kept across Runs
	comm    runtime.Stream   // where async collectives run
	xfer    *transferState   // one-sided transfers (transfer.go), made at the first register

	stats      Stats
	opStats    []OpStat     // by op id (Count 0: never timed)
	runStats   []RunStat    // Options.Stats: each Run's split
	trace      []TraceEvent // this Run's ops, with Options.Trace
	traceState traceState   // Options.Trace's bookkeeping (trace.go)

	frame frame            // the Run's bindings, reused by the next Run
	args  []runtime.Tensor // compute's kernel arguments, reused

	outputsHeld []func() // budget of the last Run's outputs (releaseOutputs)
	inputsHeld  []func() // budget of this Run's input shards, until it has drained

	// progress is where the host is (progress.go): ops started in this
	// Run and the current op's id, in one word stored once per op and read
	// by Job.Progress; started is the count, the host's own copy.
	progress atomic.Uint64
	started  uint64

	outTs     []runtime.Tensor // outputTensors' slice, reused Run after Run
	dsts      [][]byte         // readTensors' list of host buffers, reused
	runs      int64            // Runs that succeeded
	lastOK    bool             // the last Run succeeded (its streams drained, every peer's too)
	graph     []graphStep      // graph mode: the captured program, in steps (graph.go)
	capturing *capturing       // graph mode: the capture in progress
	graphOuts []runtime.Tensor // the outputs the graph writes, by output index
}

// handleKey names a symmetric-memory handle: which allocation, which op
// asked, and which mapping (a peer's shard, or -1 for the contiguous view).
type handleKey struct {
	buf  uint64
	op   int // op id
	peer int
}

func newRank(j *Job, dev runtime.Device) *rank {
	n := len(j.plan.ops)
	r := &rank{
		job: j, dev: dev, id: dev.Rank(), size: dev.WorldSize(),
		inputs:  make([]runtime.Tensor, len(j.prog.Inputs)),
		pool:    newPool(dev),
		handles: map[handleKey]runtime.Buffer{},
		kernels: make([]runtime.Kernel, n),
		streams: make([]runtime.Stream, n),
		frame:   frame{vals: make([]slot, len(j.plan.values))},
	}
	r.startProgress()
	return r
}

// slot is what a value is bound to during a Run.
type slot struct {
	live   bool // bound in this Run (not freed, not out of its loop)
	t      runtime.Tensor
	owned  runtime.Buffer // the pooled buffer this value owns, if any
	stream runtime.Stream // for stream values
	index  int64          // for loop indexes
	done   runtime.Event  // for async results: completes when the value is ready

	// In programs with streams of their own: the stream that produced the
	// value and an event recorded there right after, so a use on another
	// stream waits for exactly that work (SSA makes the producer known).
	on    runtime.Stream
	ready runtime.Event
	// users are the other streams that used the value: its storage is free
	// for reuse only once they too have passed their uses.
	users []runtime.Stream
}

// frame is one Run's bindings and current stream.
type frame struct {
	vals    []slot // by value id (plan.go)
	current runtime.Stream
	labeler runtime.Labeler  // current, when it labels its work
	used    []runtime.Stream // streams the run touched, synchronised at the end
	events  []runtime.Event  // producer events, closed at the end of the run
	iter    int64            // the innermost loop's index, -1 outside loops (for traces)
}

func (r *rank) run(inputs map[string]*host.Array) (map[string]*host.Array, error) {
	f := &r.frame
	clear(f.vals)
	f.setCurrent(r.dev.DefaultStream())
	f.iter = -1
	f.used, f.events = f.used[:0], f.events[:0]
	r.resetTrace()
	r.startProgress()
	if r.xfer != nil {
		// Live registrations are this Run's: a Run that failed between
		// register and deregister must not leave one for the next.
		clear(r.xfer.bound)
	}
	f.used = append(f.used, f.current)
	r.releaseOutputs()
	var rs RunStat
	t0 := time.Now()
	err := r.bindInputs(f, inputs)
	rs.Inputs = time.Since(t0)
	var outs map[string]*host.Array
	var synced runtime.Stream // drained already: reading the outputs ends with its synchronisation
	if err == nil {
		switch {
		case r.graph != nil:
			if outs, err = r.replay(f); err == nil {
				synced = f.current
			}
		case r.job.opts.Graph && r.runs > 0:
			outs, err = r.capture(f)
		default:
			if err = r.block(f, r.job.plan.body); err == nil {
				t1 := time.Now()
				outs, err = r.readOutputs(f)
				rs.Outputs = time.Since(t1)
				if err == nil {
					synced = f.current
				}
			}
		}
	}
	rs.Ops = time.Since(t0) - rs.Inputs - rs.Outputs
	r.endProgress()
	// Whatever happened, let every stream drain so no work outlives the Run
	// (the one the output read synchronised last has nothing left: a
	// second synchronisation cost every eager Run ~2 µs on an H200).
	t2 := time.Now()
	for _, s := range f.used {
		if s == synced {
			continue
		}
		if serr := s.Synchronize(); serr != nil && err == nil {
			err = serr
		}
	}
	rs.Drain = time.Since(t2)
	for _, release := range r.inputsHeld {
		release()
	}
	clear(r.inputsHeld)
	r.inputsHeld = r.inputsHeld[:0]
	rs.Total = time.Since(t0)
	if r.job.opts.Stats {
		r.runStats = append(r.runStats, rs)
	}
	r.endTrace()
	r.releaseFrame(f)
	if err != nil {
		r.lastOK = false
		return nil, r.runError(nil, err)
	}
	r.runs++
	r.lastOK = true
	return outs, nil
}

// runError makes err a *RunError naming the op it came from: the op whose
// enqueued work failed (a runtime.WorkError: the failure surfaced later,
// at a sync), else op (nil when the error belongs to no op).
func (r *rank) runError(op *ir.Op, err error) error {
	var runErr *RunError
	if errors.As(err, &runErr) {
		return err
	}
	var we *runtime.WorkError
	if errors.As(err, &we) {
		if o, ok := we.Label.(*ir.Op); ok {
			op = o
		}
	}
	if op == nil {
		return &RunError{Rank: r.id, Err: err}
	}
	return &RunError{Rank: r.id, Op: op, Pos: op.Pos, Err: err}
}

// releaseFrame returns to the pool whatever the program did not free itself
// (a lowered program frees all but its outputs).
//
// They go back last-defined first, an order the same on every rank and
// Run: the pool hands out last in, first out, so the next Run gives every
// value the buffer it had (caches keyed by buffer keep hitting), and
// same-sized symmetric buffers stay matched across ranks. Only op results
// own buffers, and their value ids are their definition order (plan.go).
func (r *rank) releaseFrame(f *frame) {
	// Every stream of the run has been synchronised: no wait is pending.
	r.pool.synchronized()
	for _, ev := range f.events {
		r.pool.recycleEvent(ev)
	}
	clear(f.events)
	f.events = f.events[:0]
	for id := r.job.plan.nResult - 1; id >= 0; id-- {
		if s := &f.vals[id]; s.live && s.owned != nil {
			r.pool.put(s.owned, nil)
			s.owned = nil
		}
	}
}

func (r *rank) bindInputs(f *frame, inputs map[string]*host.Array) error {
	mesh := r.size
	uploaded := false
	// Peers may read a symmetric input from the first op on (a contiguous
	// view, a collective that loads remotely): a new one must land on
	// every rank before any rank goes on, and must not overwrite the old
	// while a peer still reads it (its last Run). So the ranks meet before
	// and after the uploads: on the device, with the host going on, once a
	// Run has succeeded (the first Run's host barrier also reports a peer
	// that never came); on the host otherwise. They meet so in every Run of
	// a program with a symmetric input, whether this rank gives one anew or
	// keeps them all: another rank may give one (each process passes its
	// own inputs), and the meetings must pair up.
	meet := r.job.symmetricInputs
	var onDevice runtime.StreamBarrierer
	if meet && r.lastOK {
		onDevice, _ = r.dev.(runtime.StreamBarrierer)
	}
	if onDevice != nil {
		if err := onDevice.StreamBarrier(f.current); err != nil {
			return fmt.Errorf("binding inputs: %w", err)
		}
	}
	for i, in := range r.job.prog.Inputs {
		t := in.Tensor()
		a := inputs[in.Name]
		if a == nil { // kept (Options.KeepInputs): on the device since an earlier Run
			f.vals[r.job.plan.inputs[i]] = slot{live: true, t: r.inputs[i]}
			continue
		}
		if axis := t.ShardAxis(); axis >= 0 {
			// the shard is a host copy, held until the upload is done: the
			// end of the Run, whose streams are drained then (binding
			// waits for the uploads only where the program needs it)
			release, err := r.reserveHost(r.job.plan.inputWhat[i], int64(len(a.Data))/int64(mesh))
			if err != nil {
				return &RunError{Rank: r.id, Pos: in.Pos, Err: fmt.Errorf("input %s: %w", in, err)}
			}
			r.inputsHeld = append(r.inputsHeld, release)
			if a, err = a.Shard(axis, r.id, mesh); err != nil {
				return &RunError{Rank: r.id, Pos: in.Pos, Err: fmt.Errorf("input %s: %w", in, err)}
			}
		}
		tensor := r.inputs[i]
		if tensor.Buf == nil {
			shape, err := t.LocalShape(mesh)
			if err != nil {
				return &RunError{Rank: r.id, Pos: in.Pos, Err: fmt.Errorf("input %s: %w", in, err)}
			}
			buf, err := r.dev.Alloc(bytesOf(t.DType, shape), t.Mem)
			if err != nil {
				return &RunError{Rank: r.id, Pos: in.Pos, Err: fmt.Errorf("input %s: %w", in, err)}
			}
			tensor = runtime.Tensor{Buf: buf, DType: t.DType, Shape: shape}
			r.inputs[i] = tensor
		}
		if err := r.dev.CopyFromHost(tensor, a.Data, f.current); err != nil {
			return &RunError{Rank: r.id, Pos: in.Pos, Err: fmt.Errorf("input %s: %w", in, err)}
		}
		uploaded = true
		f.vals[r.job.plan.inputs[i]] = slot{live: true, t: tensor}
	}
	switch {
	case onDevice != nil:
		if err := onDevice.StreamBarrier(f.current); err != nil {
			return fmt.Errorf("binding inputs: %w", err)
		}
	case meet:
		if err := r.dev.Barrier(f.current); err != nil {
			return fmt.Errorf("binding inputs: %w", err)
		}
	}
	// The uploads (and the meeting) are on the default stream. A program
	// on that stream alone, or a graph launched there, is ordered after
	// them; one that may first touch an input on a stream of its own is
	// not: wait here, so every stream sees the inputs from the first op
	// on. With every input kept there is nothing to wait for (the Run that
	// uploaded them drained every stream).
	if !uploaded || r.job.oneStream || r.graph != nil {
		return nil
	}
	if err := f.current.Synchronize(); err != nil {
		return fmt.Errorf("binding inputs: %w", err)
	}
	return nil
}

// reserveHost takes bytes of host memory from the runtime's budget where
// the runtime's memory is the host's (runtime.HostMemory).
func (r *rank) reserveHost(what string, bytes int64) (release func(), err error) {
	if r.job.hostMem == nil {
		return func() {}, nil
	}
	return r.job.hostMem.Reserve(what, bytes) // the RunError names the rank
}

// releaseOutputs gives back the budget of the outputs the last Run read
// back: they count until the next Run or Close.
func (r *rank) releaseOutputs() {
	for _, release := range r.outputsHeld {
		release()
	}
	r.outputsHeld = r.outputsHeld[:0]
}

func (r *rank) readOutputs(f *frame) (map[string]*host.Array, error) {
	ts, err := r.outputTensors(f)
	if err != nil {
		return nil, err
	}
	return r.readTensors(f, ts)
}

// outputTensors are the program's outputs as bound at the end of the body.
// Reading one is a use: the current stream waits for its producer, which
// may have run on another stream.
func (r *rank) outputTensors(f *frame) ([]runtime.Tensor, error) {
	ts := r.outTs[:0]
	ts = append(ts, make([]runtime.Tensor, len(r.job.prog.Outputs))...) // reuses outTs' array after the first Run
	r.outTs = ts
	for i := range ts {
		t, err := r.tensor(f, r.job.plan.outputs[i])
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// readTensors copies the outputs, ts by output index, to the host.
func (r *rank) readTensors(f *frame, ts []runtime.Tensor) (map[string]*host.Array, error) {
	outs := make(map[string]*host.Array, len(ts))
	reader, batch := r.dev.(runtime.HostReader)
	dsts := r.dsts[:0]
	defer func() { clear(dsts); r.dsts = dsts[:0] }() // keeps no output alive
	for i, v := range r.job.prog.Outputs {
		t := ts[i]
		release, err := r.reserveHost(r.job.plan.outputWhat[i], t.Bytes())
		if err != nil {
			return nil, &RunError{Rank: r.id, Pos: v.Pos, Err: err}
		}
		r.outputsHeld = append(r.outputsHeld, release)
		a := host.New(t.DType, t.Shape)
		outs[v.Name] = a
		if batch {
			dsts = append(dsts, a.Data)
			continue
		}
		if err := r.dev.CopyToHost(a.Data, t, f.current); err != nil {
			return nil, fmt.Errorf("output %s: %w", v, err)
		}
	}
	if batch {
		// An error here is mostly the stream's (an op's work failed), which
		// names its op, as the synchronisation below does.
		if err := reader.ReadToHost(dsts, ts, f.current); err != nil {
			return nil, err
		}
		return outs, nil
	}
	if err := f.current.Synchronize(); err != nil {
		return nil, err
	}
	return outs, nil
}

func (r *rank) block(f *frame, ops []*opPlan) error {
	opts := &r.job.opts
	timed := opts.Stats || opts.Trace
	track := opts.Progress
	for _, p := range ops {
		op := p.op
		if track { // where the host is, for Job.Progress
			r.started++
			r.progress.Store(r.started<<progressShift | uint64(min(p.id, progressNone)))
		}
		var start time.Time
		cur := f.current
		if timed {
			start = time.Now()
		}
		if f.labeler != nil {
			f.labeler.Label(op) // a failure of the work it enqueues names op
		}
		gpu := opts.Trace && r.gpuBefore(op, cur)
		err := r.op(f, p)
		if err == nil && r.job.multiStream {
			err = r.markProduced(f, p.res)
			if err == nil && p.dest >= 0 {
				r.rewrote(f, p)
			}
		}
		if err == nil && gpu {
			err = r.gpuAfter(f.current)
		}
		if err == nil && timed && !opts.TraceOverlap && waitForStats(op.Code) {
			err = f.current.Synchronize()
		}
		if err != nil {
			return r.runError(op, err)
		}
		if opts.Stats && op.Code != ir.OpFor {
			r.recordOp(p, time.Since(start))
		}
		if opts.Trace && op.Code != ir.OpFor {
			r.traceOp(f, p, cur, start, time.Now())
			if gpu {
				r.gpuTrace(len(r.trace) - 1)
			}
		}
	}
	return nil
}

// waitForStats says whether Stats waits for op's stream after it. Not for a
// loop (its body's ops are timed), nor for send and recv: each waits for its
// peer's half, which the peer may enqueue only after its own send or recv
// (a ring shift with the sends on a second stream), so waiting for them here
// could deadlock a program that runs fine without Stats. Their time is the
// time to enqueue them.
func waitForStats(code ir.Opcode) bool {
	return code != ir.OpFor && code != ir.OpSend && code != ir.OpRecv
}

// RunError is how Job.Run fails: what went wrong (Err, the runtime's error:
// a *runtime.TimeoutError, a *runtime.OutOfMemoryError, ...) on which rank,
// in which op at which place in the source. Find it with errors.As; it
// unwraps to Err, so errors.As reaches the runtime's typed errors through
// it:
//
//	var re *evaluator.RunError
//	if errors.As(err, &re) { ... re.Rank, re.Pos, re.Op.Code ... }
//
// Op is nil when the failure belongs to no op: binding the inputs, reading
// the outputs, or asynchronous work (a send, a collective) whose error
// surfaced only when the run waited for its streams at the end. Pos is then
// the input's or output's position, or zero.
type RunError struct {
	Rank int
	Op   *ir.Op
	Pos  ir.Pos
	Err  error
}

// Error is "file:line:col: rank R: op: cause", the position first as in
// the parser's and checker's messages (without one when Pos is zero). A
// cause that names "rank R: " again (the CPU runtime's errors start so,
// also under the evaluator's "input %x: ") drops the repeat.
func (e *RunError) Error() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String() + ": ")
	}
	fmt.Fprintf(&b, "rank %d: ", e.Rank)
	if e.Op != nil {
		b.WriteString(e.Op.Code.String() + ": ")
	}
	msg := "unknown error"
	if e.Err != nil {
		msg = dropRank(e.Err.Error(), e.Rank)
	}
	b.WriteString(msg)
	return b.String()
}

func (e *RunError) Unwrap() error { return e.Err }

// dropRank removes the first "rank R: " from msg where it starts msg or
// follows the evaluator's own "input %x: ", which RunError says already.
func dropRank(msg string, rank int) string {
	prefix := fmt.Sprintf("rank %d: ", rank)
	if rest, ok := strings.CutPrefix(msg, prefix); ok {
		return rest
	}
	if strings.HasPrefix(msg, "input %") {
		if head, tail, ok := strings.Cut(msg, ": "); ok {
			if rest, ok := strings.CutPrefix(tail, prefix); ok {
				return head + ": " + rest
			}
		}
	}
	return msg
}

func (r *rank) recordOp(p *opPlan, d time.Duration) {
	if r.opStats == nil {
		r.opStats = make([]OpStat, len(r.job.plan.ops))
	}
	s := &r.opStats[p.id]
	if s.Count == 0 {
		*s = OpStat{Op: p.op.Code.String(), Pos: p.op.Pos}
	}
	s.Count++
	s.Total += d
	if r.runs == 0 {
		s.First += d
		return
	}
	for int64(len(s.PerRun)) < r.runs {
		s.PerRun = append(s.PerRun, 0)
	}
	s.PerRun[r.runs-1] += d
}

func (r *rank) snapshotStats() Stats {
	s := r.stats
	if len(r.opStats) > 0 { // only with Stats
		s.Ops = sortedOpStats(r.opStats)
	}
	if len(r.runStats) > 0 {
		s.Runs = append([]RunStat(nil), r.runStats...)
	}
	if r.job.opts.Trace {
		s.Trace = append([]TraceEvent(nil), r.trace...)
	}
	return s
}

// ready returns v's binding; for an async result it is an error to use it
// before wait (the passes reject that statically; this guards Go-built
// programs).
func (r *rank) ready(f *frame, id int) (*slot, error) {
	s := &f.vals[id]
	if !s.live {
		return nil, fmt.Errorf("%s has no value here (freed, or defined in a loop body that has ended)", r.job.plan.values[id])
	}
	if s.done != nil {
		v := r.job.plan.values[id]
		return nil, fmt.Errorf("%s is the result of an async op and is used before `wait %s`", v, v)
	}
	return s, nil
}

func (r *rank) tensor(f *frame, id int) (runtime.Tensor, error) {
	s, err := r.ready(f, id)
	if err != nil {
		return runtime.Tensor{}, err
	}
	if s.t.Buf == nil {
		return runtime.Tensor{}, fmt.Errorf("%s is not a tensor", r.job.plan.values[id])
	}
	if s.ready != nil && s.on != f.current {
		if err := f.current.WaitEvent(s.ready); err != nil {
			return runtime.Tensor{}, err
		}
		if !slices.Contains(s.users, f.current) {
			s.users = append(s.users, f.current)
		}
	}
	return s.t, nil
}

// alloc binds value id (a tensor result) to a buffer from the pool,
// zero-filled when zero is set (alloc, and collectives that leave parts
// untouched). The buffer is the value's from here, so a failing fill still
// returns it to the pool at the end of the Run.
func (r *rank) alloc(f *frame, id int, zero bool) (*slot, error) {
	lt := &r.job.plan.local[id]
	if lt.t == nil {
		return nil, fmt.Errorf("%s is not a tensor", r.job.plan.values[id])
	}
	if lt.err != nil {
		return nil, lt.err
	}
	buf, err := r.pool.get(lt.bytes, lt.t.Mem, f.current)
	if err != nil {
		return nil, err
	}
	s := &f.vals[id]
	*s = slot{live: true, t: runtime.Tensor{Buf: buf, DType: lt.t.DType, Shape: lt.shape}, owned: buf}
	if zero {
		if err := r.dev.Zero(s.t, f.current); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func bytesOf(dt ir.DType, shape []int64) int64 { return ir.Product(shape) * int64(dt.Size()) }

func (r *rank) close() error {
	r.releaseOutputs()
	errs := []error{r.closeGraph(), r.closeTransfers(), r.closeGPUClock()}
	for _, s := range r.streams {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	clear(r.streams)
	if r.comm != nil {
		errs = append(errs, r.comm.Close())
	}
	errs = append(errs, r.pool.close())
	for _, t := range r.inputs {
		if t.Buf != nil {
			errs = append(errs, r.dev.Free(t.Buf))
		}
	}
	clear(r.inputs)
	r.handles = map[handleKey]runtime.Buffer{}
	return errors.Join(errs...)
}

// rewrote makes an op that wrote into its destination that value's
// producer as well as its result's: the value names storage the op just
// changed, so a use of it on another stream must wait for the write, not
// only for whatever made the value (a select, an alloc). An async op's
// result is ready at its wait, not here: its destination is left as it was.
func (r *rank) rewrote(f *frame, p *opPlan) {
	res := &f.vals[p.res[0]]
	if res.ready == nil || res.on != f.current {
		return
	}
	d := &f.vals[p.dest]
	if d.live {
		d.on, d.ready = res.on, res.ready
	}
}

// markProduced records, for each tensor result that is ready now, the
// current stream and an event right after the op that made it; a later use
// on another stream waits for that event (see tensor). Only programs that
// make streams pay for it.
func (r *rank) markProduced(f *frame, results []int) error {
	for _, res := range results {
		s := &f.vals[res]
		if !s.live || s.t.Buf == nil || s.done != nil {
			continue
		}
		ev, err := r.pool.takeEvent()
		if err != nil {
			return err
		}
		f.events = append(f.events, ev)
		if err := f.current.Record(ev); err != nil {
			return err
		}
		s.on, s.ready = f.current, ev
	}
	return nil
}
