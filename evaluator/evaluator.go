// Package evaluator runs a lowered hir program on the ranks a runtime hosts.
// Each rank interprets the program op by op, enqueueing work on its
// device's streams. A rank keeps, across Runs, its input buffers, a pool of
// freed buffers (reused in the same order every Run, so a second Run sees
// the same allocations), a cache of symmetric-memory handles keyed by
// (allocation, operation) and a cache of compiled kernels.
package evaluator

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// Options tunes a job.
type Options struct {
	// Timeout bounds waits for peers; zero means the runtime's default.
	Timeout time.Duration
	// Stats makes every op wait for its stream so the time per op is the
	// op's own (it serialises the program: use it to profile, not to bench).
	// send and recv are not waited for (see waitForStats).
	Stats bool
	// Trace records every op of each Run as a TraceEvent (Stats.Trace),
	// timed as Stats times ops (it serialises the program as Stats does).
	Trace bool
	// TraceOverlap, with Trace, does not wait for each op: the program
	// runs as untraced (streams overlap), an op's host slice is the time
	// to enqueue it, and its GPU times come from events recorded around it
	// and read once the Run has drained (a timeline of a pipelined Run).
	// Without Stats only.
	TraceOverlap bool
	// Graph runs the program as one graph per rank (docs/GRAPHS.md): the
	// first Run is eager (the warm-up), the second captures every device
	// call of the rank into a graph and launches it, later Runs only upload
	// the inputs, launch the graph and read the outputs. An op that waits
	// on the host (ir.GraphSplits: register, deregister, barrier,
	// sync_stream) splits the graph: it runs on the host between two
	// graphs, at capture and at every replay. NewJob rejects a loop too
	// long to unroll (ir.CaptureBlockers), a runtime that cannot capture,
	// and Stats or Trace (they time ops one by one).
	Graph bool
	// KeepInputs lets a Run leave out inputs an earlier successful Run
	// gave: each keeps, on the device, the value last uploaded, so weights
	// that do not change are uploaded once (as a CUDA graph's static
	// inputs are). An input the program may write in place (a copy or
	// collective into it, a recv or transfer into it, a registration that
	// lets peers write it) cannot be kept and must be given every Run.
	KeepInputs bool
	// Progress makes each rank's host publish where it is, for
	// Job.Progress (progress.go): one atomic store per op.
	Progress bool
}

// TraceEvent is one op of one Run on one rank, for a timeline. Times are
// integer nanoseconds on the job's clock: the wall clock at NewJob (since
// the Unix epoch) plus the monotonic time since, so one process's events
// are exact and ordered, and ranks in other processes of one machine share
// the scale. Dur is how long the op took on the host, the wait for its
// stream included (Trace serialises ops, as Stats does), so one rank's
// slices never overlap: one ends (Start+Dur) before the next starts. With
// Options.TraceOverlap, Dur is the time to enqueue the op, and only the
// GPU times say when its work ran.
type TraceEvent struct {
	Op    string `json:"op"`
	Pos   string `json:"pos"`
	Start int64  `json:"start_ns"`
	Dur   int64  `json:"dur_ns"`
	// Iter is the loop index of the innermost enclosing `for`, or -1.
	Iter int64 `json:"iter"`
	// Stream is the stream the op's work went to (TraceDefaultStream,
	// TraceCommStream for async collectives and transfers, or
	// TraceFirstStream plus the op id of the `stream` op that made it);
	// StreamName says which, for a timeline's track.
	Stream     int    `json:"stream"`
	StreamName string `json:"stream_name"`
	// OpID numbers the op in the program (the same on every rank) and
	// Occurrence counts its executions in this Run from 0: a collective's
	// (OpID, Occurrence) is one call, the same on every rank.
	OpID       int   `json:"op_id"`
	Occurrence int64 `json:"occurrence"`
	// Collective marks ops every rank joins: collectives and barrier.
	Collective bool `json:"collective,omitempty"`
	// Async marks async collectives and transfers, whose work goes on
	// after the op. Done is when the run saw it complete: the end of the
	// `wait` for its result (timed with the wait's stream synchronised),
	// or the end of the Run for one no `wait` saw.
	Async bool  `json:"async,omitempty"`
	Done  int64 `json:"done_ns,omitempty"`
	// GPUStart and GPUDur are when the op's work ran on its stream, from
	// events recorded around it (on a runtime that times events,
	// runtime.EventTimer; zero otherwise, and for ops with no stream work,
	// async ones, send and recv). GPUStart is on the job's clock, placed by
	// a reference event the Run records first and waits for; GPUDur is the
	// events' own difference (cuda: the GPU's clock, about 0.5 µs steps).
	GPUStart int64 `json:"gpu_start_ns,omitempty"`
	GPUDur   int64 `json:"gpu_dur_ns,omitempty"`
}

// Job is a program bound to a runtime: one rank state per hosted rank.
type Job struct {
	errs  []error // Run's per-rank errors, reused (Runs do not overlap)
	prog  *ir.Program
	rt    runtime.Runtime
	opts  Options
	ranks []*rank
	// symmetricInputs: Run ends input binding with a barrier, so peers see
	// every rank's symmetric inputs from the first op.
	symmetricInputs bool
	// multiStream: the program makes streams of its own, so values carry
	// producer events and a use on another stream waits for its producer.
	multiStream bool
	// oneStream: every op runs on the default stream (no streams of the
	// program's own, no async collectives, no transfers), so stream order
	// alone puts the program after its inputs' uploads.
	oneStream bool
	// plan numbers the program's values and ops densely (plan.go).
	plan *plan
	// hostMem, where the runtime's memory is the host's, budgets the host
	// copies of input shards and outputs.
	hostMem runtime.HostMemory
	// epoch is NewJob's time, the origin of TraceEvent times (epochNs on
	// the wall clock).
	epoch   time.Time
	epochNs int64
	// writers: by input index, an op that may write the input in place
	// (KeepInputs cannot keep it); given: which inputs a successful Run
	// has uploaded, so a later Run may leave them out.
	writers []*ir.Op
	given   []bool
}

// Result holds what one Run produced on every hosted rank.
type Result struct {
	Ranks []RankResult
}

// RankResult is one rank's outputs (local shards) and counters.
type RankResult struct {
	Rank    int
	Outputs map[string]*host.Array
	Stats   Stats
}

// Stats counts cache hits and time per op on one rank, over the job's life.
type Stats struct {
	HandleHits, HandleMisses int64
	KernelHits, KernelMisses int64
	Ops                      []OpStat
	// Trace holds the last Run's ops in order, when Options.Trace is set.
	Trace []TraceEvent `json:",omitempty"`
	// In graph mode: the nodes of the rank's graphs (kernels, copies,
	// collectives, event edges), how many graphs the program is split into
	// (one more than the ops run on the host between them) and how many
	// times the program was replayed.
	GraphNodes   int   `json:",omitempty"`
	Graphs       int   `json:",omitempty"`
	GraphReplays int64 `json:",omitempty"`
	// Runs is where each Run's time went on this rank, in order, when
	// Options.Stats is set: the first Run pays the set-up (compiling,
	// symmetric handles, cuBLAS's start), so it is kept apart.
	Runs []RunStat `json:",omitempty"`
}

// RunStat splits one Run's time on one rank: binding (and uploading) the
// inputs, the program's ops, reading the outputs back, and draining the
// streams at the end; Total is the whole Run (the rest is bookkeeping).
// In graph mode the ops and the output read are one replay (Ops).
type RunStat struct {
	Inputs, Ops, Outputs, Drain, Total time.Duration
}

// OpStat is the time spent in one op of the program, summed over its runs.
// First is its part in the job's first Run; PerRun its time in each later
// Run (summed over its executions in that Run), for a minimum and a
// median that leave the first Run's set-up out.
type OpStat struct {
	Op     string
	Pos    ir.Pos
	Count  int64
	Total  time.Duration
	First  time.Duration
	PerRun []time.Duration `json:",omitempty"`
}

// NewJob binds prog (already lowered by passes.Lower) to the ranks rt hosts.
// A nil prog or rt is an error.
func NewJob(prog *ir.Program, rt runtime.Runtime, opts Options) (*Job, error) {
	if prog == nil {
		return nil, errors.New("evaluator.NewJob: the program is nil")
	}
	if rt == nil {
		return nil, errors.New("evaluator.NewJob: the runtime is nil (open one with runtime.Open)")
	}
	if prog.Mesh.Size() != rt.WorldSize() {
		return nil, fmt.Errorf("the program's mesh has %d ranks but the %s runtime was opened for %d", prog.Mesh.Size(), rt.Name(), rt.WorldSize())
	}
	if err := checkTyped(prog); err != nil {
		return nil, err
	}
	if opts.TraceOverlap && (!opts.Trace || opts.Stats) {
		return nil, errors.New("TraceOverlap is a way of tracing without Stats: set Trace, not Stats")
	}
	if opts.Graph {
		if err := checkGraphMode(prog, rt, opts); err != nil {
			return nil, err
		}
	}
	j := &Job{prog: prog, rt: rt, opts: opts, plan: newPlan(prog, rt.WorldSize(), opts.Trace)}
	j.epoch = time.Now()
	j.epochNs = j.epoch.UnixNano()
	j.hostMem, _ = rt.(runtime.HostMemory)
	j.writers, j.given = inputWriters(prog), make([]bool, len(prog.Inputs))
	for _, in := range prog.Inputs {
		if t := in.Tensor(); t != nil && t.Mem == ir.Symmetric {
			j.symmetricInputs = true
		}
	}
	j.oneStream = true
	// The collectives the runtime's own kernels run (not NCCL), and the
	// dtypes those that reduce reduce.
	var collectives bool
	var reduced []ir.DType
	prog.Walk(func(op *ir.Op) {
		if op.Code == ir.OpStream {
			j.multiStream = true
		}
		if op.Code.IsCollective() && op.Algo() != ir.AlgoNCCL {
			collectives = true
			if t := op.Operands[0].Tensor(); op.Code.Info().Reduces && t != nil && !slices.Contains(reduced, t.DType) {
				reduced = append(reduced, t.DType)
			}
		}
		if op.Code == ir.OpStream || op.Async() || op.Code.Info().Class == ir.ClassOneSided {
			j.oneStream = false
		}
	})
	for _, r := range rt.Ranks() {
		dev, err := rt.Device(r)
		if err != nil {
			return nil, err
		}
		if w, ok := dev.(runtime.CollectiveWarmer); ok && collectives {
			w.WarmCollectives(reduced) // in the background: their kernels compile while the job starts
		}
		r := newRank(j, dev)
		r.pool.deterministic = opts.Graph
		r.pool.streamOrdered = j.oneStream
		j.ranks = append(j.ranks, r)
	}
	return j, nil
}

// checkTyped makes sure type inference ran: the evaluator relies on every
// value's type.
func checkTyped(prog *ir.Program) error {
	var errs ir.ErrorList
	prog.Walk(func(op *ir.Op) {
		for _, r := range op.Results {
			if r.Type == nil {
				errs.Add(op.Pos, "%s: %s has no type; run the passes (passes.Lower) before evaluating", op.Code, r)
			}
		}
	})
	return errs.Err()
}

// Run runs the program once on every hosted rank, concurrently. inputs
// holds the logical tensors; each rank gets its shard. Run may be called
// again and again; buffers, handles and kernels are reused.
func (j *Job) Run(inputs map[string]*host.Array) (*Result, error) {
	if err := j.checkInputs(inputs); err != nil {
		return nil, err
	}
	res := &Result{Ranks: make([]RankResult, len(j.ranks))}
	errs := j.errs[:0]
	errs = append(errs, make([]error, len(j.ranks))...) // j.errs' array after the first Run
	j.errs = errs
	if len(j.ranks) == 1 {
		// One hosted rank (a process of a multi-process job, or a world of
		// one): run it on this goroutine. A goroutine per Run started on a
		// small stack and grew it every time (a third of a one-op Run's
		// time on the CPU runtime went to copying stacks).
		r := j.ranks[0]
		out, err := r.run(inputs)
		res.Ranks[0] = RankResult{Rank: r.id, Outputs: out, Stats: r.snapshotStats()}
		errs[0] = err
		return j.finishRun(res, errs, inputs)
	}
	var wg sync.WaitGroup
	for i, r := range j.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := r.run(inputs)
			res.Ranks[i] = RankResult{Rank: r.id, Outputs: out, Stats: r.snapshotStats()}
			errs[i] = err
		}()
	}
	wg.Wait()
	return j.finishRun(res, errs, inputs)
}

// finishRun reports the ranks' errors or, after a Run that succeeded,
// notes which inputs it was given (KeepInputs).
func (j *Job) finishRun(res *Result, errs []error, inputs map[string]*host.Array) (*Result, error) {
	if err := joinRankErrors(j.ranks, errs); err != nil {
		return nil, err
	}
	for i, in := range j.prog.Inputs {
		if _, ok := inputs[in.Name]; ok {
			j.given[i] = true
		}
	}
	return res, nil
}

// joinRankErrors reports the first failing rank's error, a *RunError; when
// others failed too (often only because a peer stopped answering) it says
// which.
func joinRankErrors(ranks []*rank, errs []error) error {
	var first error
	var others []int
	for i, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			var re *RunError
			if errors.As(err, &re) {
				first = err
			} else {
				first = &RunError{Rank: ranks[i].id, Err: err}
			}
			continue
		}
		others = append(others, ranks[i].id)
	}
	if first != nil && len(others) > 0 {
		return fmt.Errorf("%w (%s failed too)", first, rankWords(others))
	}
	return first
}

func (j *Job) checkInputs(inputs map[string]*host.Array) error {
	var missing []string
	for i, in := range j.prog.Inputs {
		t := in.Tensor()
		a, ok := inputs[in.Name]
		if !ok {
			if !j.opts.KeepInputs || !j.given[i] || j.writers[i] != nil {
				missing = append(missing, j.keptInputError(i))
			}
			continue
		}
		if a.DType != t.DType || !slices.Equal(a.Shape, t.Shape()) {
			return fmt.Errorf("%s: input %s is declared %s but was given %s%v", in.Pos, in, t, a.DType, a.Shape)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing input%s: %v", plural(len(missing)), missing)
	}
	for name := range inputs {
		if j.prog.Input(name) == nil {
			return fmt.Errorf("the program has no input %%%s", name)
		}
	}
	return nil
}

// Close releases every buffer, handle, stream and kernel the job holds.
func (j *Job) Close() error {
	var errs []error
	for _, r := range j.ranks {
		errs = append(errs, r.close())
	}
	return errors.Join(errs...)
}

// Logical assembles output name from every rank's result: sharded outputs
// are joined along their DIDx axis, replicated ones are rank 0's.
func (r *Result) Logical(prog *ir.Program, name string) (*host.Array, error) {
	var v *ir.Value
	for _, out := range prog.Outputs {
		if out.Name == name {
			v = out
		}
	}
	if v == nil {
		return nil, fmt.Errorf("the program has no output %%%s", name)
	}
	t := v.Tensor()
	if t == nil {
		return nil, fmt.Errorf("output %s is not a tensor", v)
	}
	axis := t.ShardAxis()
	if axis < 0 {
		for _, rr := range r.Ranks {
			if rr.Rank == 0 {
				return rr.Outputs[name], nil
			}
		}
		return nil, fmt.Errorf("output %s: rank 0 is not hosted by this process", v)
	}
	if len(r.Ranks) != prog.Mesh.Size() {
		return nil, fmt.Errorf("output %s is sharded over %d ranks but this process hosts %d", v, prog.Mesh.Size(), len(r.Ranks))
	}
	shards := make([]*host.Array, len(r.Ranks))
	for _, rr := range r.Ranks {
		shards[rr.Rank] = rr.Outputs[name]
	}
	return host.Unshard(shards, axis)
}

// rankWords writes "rank 1" or "ranks 1, 3".
func rankWords(ranks []int) string {
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = fmt.Sprint(r)
	}
	return "rank" + plural(len(ranks)) + " " + strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// sortedOpStats orders op statistics by total time, largest first.
func sortedOpStats(ops []OpStat) []OpStat {
	out := make([]OpStat, 0, len(ops))
	for _, s := range ops {
		if s.Count > 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Pos.Line < out[j].Pos.Line
	})
	return out
}
