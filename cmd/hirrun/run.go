package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/launch"
)

type runOptions struct {
	backend  string
	nproc    int
	inputs   specList
	outputs  specList
	expects  specList // --expect: references to compare outputs with
	rtol     tolFlag
	atol     tolFlag
	stats    bool
	trace    string // --trace FILE: a Chrome/Perfetto timeline
	overlap  bool   // --trace-overlap: trace without serialising (evaluator.Options.TraceOverlap)
	timeout  time.Duration
	repeat   int
	explain  bool
	graph    bool   // --graph: one graph per rank (evaluator.Options.Graph)
	progress string // --progress auto|always|never: the progress line on stderr
	startup  startup
}

// processStart is when this process's Go code began (package
// initialisation): what --stats counts the start-up from.
var processStart = time.Now()

// startup is where a process's time went before its first Run, for
// --stats: to the program read and checked (Ready, from processStart),
// making the inputs (Inputs, within Ready), opening the runtime (Open:
// devices, contexts, the peers' rendezvous, symmetric set-up) and binding
// the job (Job).
type startup struct {
	Ready, Inputs, Open, Job time.Duration
}

// jobOptions are the evaluator's options for o. The hosts always publish
// where they are: the progress line and the stall reports read it.
func (o *runOptions) jobOptions() evaluator.Options {
	return evaluator.Options{Timeout: o.timeout, Stats: o.stats, Trace: o.trace != "", TraceOverlap: o.overlap, Graph: o.graph, Progress: true, KeepInputs: true}
}

// runRepeats runs job o.repeat times. --repeat gives the same inputs every
// time, so only the first Run uploads them all; later Runs upload only
// those the program may write in place, the others staying on the device
// (evaluator.Options.KeepInputs).
func runRepeats(job *evaluator.Job, inputs map[string]*host.Array, o *runOptions, wa *watch) (*evaluator.Result, error) {
	later := map[string]*host.Array{}
	for name, a := range inputs {
		if !job.KeepsInput(name) {
			later[name] = a
		}
	}
	var res *evaluator.Result
	for i := 0; i < o.repeat; i++ {
		wa.runStarted(i + 1)
		in := inputs
		if i > 0 {
			in = later
		}
		r, err := job.Run(in)
		if err != nil {
			if o.repeat > 1 {
				err = fmt.Errorf("run %d of %d: %w", i+1, o.repeat, err)
			}
			return nil, err
		}
		res = r
	}
	return res, nil
}

// specList collects a repeatable NAME=VALUE flag.
type specList []string

func (l *specList) String() string     { return strings.Join(*l, " ") }
func (l *specList) Set(s string) error { *l = append(*l, s); return nil }

var runCommand = &command{
	name:    "run",
	args:    "[flags] prog.hir",
	summary: "run a program and print every rank's outputs",
	help: `Parses, checks and lowers the program, runs it on a backend with the mesh it
declares, and prints each rank's outputs (its local shards):

  rank 0: %y = f32[2, 3] = [[1, 2, 3], [4, 5, 6]]

The program file may be - to read it from standard input (named <stdin> in
messages; not with --backend cuda, whose ranks each read the file). A
program with no output runs with a warning on stderr, since nothing it
computes is printed or kept; the exit status is not changed by it.

Every program input needs a value: random values from a seed
(--input NAME=random:seed=N; floats uniform in [-1, 1), integers in [-8, 8),
bools 0/1; the same on every platform; NAME=random alone is seeded with the
input's position among the program's inputs: 0 for the first, 1 for the
second, and so on, so a run is reproducible and no two inputs given as
random alone hold the same values), an NPY file holding the whole logical
tensor (--input NAME=FILE.npy), or an NPZ archive (--input FILE.npz, as
np.savez writes it) or a safetensors file (--input FILE.safetensors, as
safetensors.torch.save_file writes it) that gives every input one of its
arrays is named after (arrays named after an output are skipped, any other
name is an error). NPY data may be C- or Fortran-ordered; a bf16 input may
be given as <f4 (rounded to nearest even) or as raw bf16 bits: <u2, <i2, or
<V2 (what np.save writes for ml_dtypes.bfloat16), or as a BF16 tensor.

--output NAME=FILE.npy saves an output's logical tensor, assembled from the
ranks' shards (bf16 is saved as <f4); --output FILE.npz or FILE.safetensors
(bf16 saved as BF16) saves every output in one archive, under its name. The
paths are checked before the run: the directory exists and is writable, no
two outputs go to the same file.

--expect NAME=REF.npy compares an output's logical tensor with a reference
after the (last) run, as numpy.allclose does: |out - ref| <= atol +
rtol*|ref|, NaN matching NaN and an infinity the same infinity; --expect
REF.npz or REF.safetensors compares every output one of its arrays is
named after (arrays named after an input are skipped). The reference must
have the output's dtype (a bf16 output's may be <f4 or raw bits) and
logical shape, which is checked before the run. --rtol and --atol apply to every comparison; by
default they depend on the output's dtype: f64 1e-7 and 1e-7, f32 1.3e-6 and
1e-5, f16 1e-3 and 1e-5, bf16 1.6e-2 and 1e-5, integers and bool exact. A
line per comparison gives the number of mismatches, the first one's index
and values, and the largest absolute and relative errors; any mismatch
makes the exit status 1, once every comparison is printed. The files and
their conventions: docs/DATA-FILES.md.

--backend cuda runs one process per rank, one GPU each: hirrun starts the
mesh's ranks itself (--nproc, if given, must equal the mesh size), or is one
rank of a job that torchrun or srun started (RANK, WORLD_SIZE, ...). Rank 0
gathers every rank's results and prints them exactly as above, in rank
order; a rank that fails stops the job with its error. --backend sim runs
every rank in this one process; under torchrun, srun or mpirun (RANK,
SLURM_PROCID, OMPI_COMM_WORLD_RANK, ...) rank 0's hirrun runs them all and
the others exit at once, each saying so on stderr.

--trace FILE.json writes a timeline of the last run (one row per rank, one
slice per op, with its source position) for chrome://tracing or
ui.perfetto.dev; like --stats, it waits for each op, so the program runs
serialised. With --trace-overlap it waits for none: the program runs as
untraced, streams overlapping, each op's host slice is the time to enqueue
it, and a GPU track per stream (cuda's events, or the CPU runtime's) shows
when its work ran: a pipelined run's timeline. --stats prints each rank's
cache counters and time per op on stderr, after the outputs.

A run that takes more than 2 s draws a progress line on stderr when stderr
is a terminal (--progress auto; always draws it anyway, never not at all),
redrawn 4 times a second: the ops each rank's host has done and the op the
slowest one is in, with its position. A rank that waits for its peers for
5 s (a collective, send/recv, barrier) says so once, on stderr, naming the
op and the ranks it waits for:

  rank 1 has waited 5s at prog.hir:12:3 (all_reduce) for ranks 0, 3

and goes on waiting until --timeout.

--graph runs the program as one graph per rank (docs/GRAPHS.md): the first
run is eager (allocations, handles, kernels), the second captures every
rank's work into a graph and launches it, later runs only upload the
inputs, launch the graph and read the outputs; use it with --repeat 3 or
more. An op that waits on the host (barrier, sync_stream, register,
deregister) cannot be in a graph: it splits the program there, and runs on
the host between two graphs, at the capture and at every replay (hirrun
check --graph notes each, with its position). Refused before it runs, with
the position and the reason: a loop that would unroll to more than 2^20 ops
in the graph and whose body the device cannot repeat, and on cuda a loop the
device would repeat where the driver predates CUDA 12.4 (docs/GRAPHS.md,
"Device loops"); --graph with --stats or --trace is a usage error.`,
	flags: func(fs *flag.FlagSet) any {
		o := &runOptions{}
		fs.StringVar(&o.backend, "backend", "sim", "the runtime to run on: "+strings.Join(runtime.Backends(), ", "))
		fs.IntVar(&o.nproc, "nproc", 0, "the number of ranks, one process per GPU on cuda; must equal the program's mesh size (0: the mesh size)")
		fs.Var(&o.inputs, "input", "an input: `NAME=random:seed=N` (random alone: seeded with the input's position, 0 for the first) or NAME=FILE.npy, or every input named in FILE.npz or FILE.safetensors (repeatable)")
		fs.Var(&o.outputs, "output", "save an output's logical tensor: `NAME=FILE.npy`, or every output: FILE.npz or FILE.safetensors (repeatable)")
		fs.Var(&o.expects, "expect", "compare an output with a reference after the run: `NAME=REF.npy`, or every output named in REF.npz or REF.safetensors (repeatable)")
		fs.Var(&o.rtol, "rtol", "the relative tolerance of --expect (default: per dtype, see above)")
		fs.Var(&o.atol, "atol", "the absolute tolerance of --expect (default: per dtype, see above)")
		fs.BoolVar(&o.stats, "stats", false, "print cache hits and misses and the time per op to stderr (serialises the ops)")
		fs.StringVar(&o.trace, "trace", "", "write the last run's ops on every rank as a Chrome/Perfetto timeline to `FILE.json` (serialises the ops, like --stats)")
		fs.BoolVar(&o.overlap, "trace-overlap", false, "with --trace: do not serialise the ops; GPU tracks show when each stream's work ran")
		fs.DurationVar(&o.timeout, "timeout", 0, "how long a rank waits for its peers (0: the runtime's default, "+runtime.DefaultTimeout.String()+")")
		fs.IntVar(&o.repeat, "repeat", 1, "run the program this many times (outputs and stats are the last run's; inputs are uploaded once, except those the program writes in place)")
		fs.BoolVar(&o.explain, "explain", false, "print what the passes did (e.g. symmetric imports) to stderr")
		fs.BoolVar(&o.graph, "graph", false, "run as one graph per rank: an eager run, a capture, then replays (see --repeat)")
		fs.StringVar(&o.progress, "progress", "auto", "draw a progress line on stderr once a run takes 2 s: `auto` (when stderr is a terminal), always or never")
		return o
	},
	run: func(c *cli, opts any, args []string) int { return c.runProgram(opts.(*runOptions), args) },
}

// speaksForJob reports whether this hirrun warns for its job: a hirrun
// on its own does, and so does rank 0 of a job torchrun or srun started;
// the other ranks do not, nor do the ranks hirrun itself starts (the
// hirrun that started them has warned already).
func speaksForJob() bool {
	env, launched, err := launch.FromEnv()
	return err != nil || !launched || env.Rank == 0 && env.Source != launch.SourceHirrun
}

func (c *cli) runProgram(o *runOptions, args []string) int {
	if len(args) != 1 {
		c.errorf("run: want one program, got %d arguments (usage: %s)", len(args), usageLine("run"))
		return exitUsage
	}
	if o.repeat < 1 {
		c.errorf("run: --repeat must be at least 1, got %d", o.repeat)
		return exitUsage
	}
	if o.timeout < 0 {
		c.errorf("run: --timeout must not be negative, got %v", o.timeout)
		return exitUsage
	}
	if o.nproc < 0 {
		c.errorf("run: --nproc must not be negative, got %d", o.nproc)
		return exitUsage
	}
	if err := checkProgressMode(o.progress); err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	if _, perProcess := processBackends[o.backend]; perProcess && args[0] == "-" {
		c.errorf("run: --backend %s runs a process per rank, and each reads the program from its file: save the program to a file and give its path instead of - (standard input)", o.backend)
		return exitUsage
	}
	if o.overlap && (o.trace == "" || o.stats) {
		c.errorf("run: --trace-overlap is a way of tracing: give --trace FILE.json, and not --stats (which waits for each op)")
		return exitUsage
	}
	if msg := tolWithoutExpect(o); msg != "" {
		c.errorf("run: %s", msg)
		return exitUsage
	}
	if o.graph && (o.stats || o.trace != "") {
		c.errorf("run: --graph runs each rank's program as one graph; --stats and --trace time ops one by one: use one or the other")
		return exitUsage
	}
	if _, perProcess := processBackends[o.backend]; !perProcess && slices.Contains(runtime.Backends(), o.backend) {
		if code, here := c.runsHere(o.backend); !here {
			return code
		}
	}
	inSpecs, err := parseSpecs("input", o.inputs)
	if err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	outSpecs, err := parseSpecs("output", o.outputs)
	if err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	expSpecs, err := parseSpecs("expect", o.expects)
	if err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	prog, code := c.parse(args[0])
	if code != exitOK {
		return code
	}
	if err := passes.Lower(prog, c.passContext(o.explain)); err != nil {
		c.report(err)
		return exitFail
	}
	if speaksForJob() {
		c.warnNoOutputs(prog) // once, not by every rank of a job
	}
	if err := checkOutputNames(prog, "output", outSpecs); err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	if err := checkOutputNames(prog, "expect", expSpecs); err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	if o.nproc != 0 && o.nproc != prog.Mesh.Size() {
		c.errorf("run: --nproc %d, but %s declares a mesh of %d rank%s (one rank per mesh device)", o.nproc, programName(args[0]), prog.Mesh.Size(), plural(prog.Mesh.Size()))
		return exitUsage
	}
	t0 := time.Now()
	inputs, err := loadInputs(prog, inSpecs)
	if err != nil {
		c.errorf("run: %v", err)
		return inputStatus(err) // 1 for inputs past the host's memory
	}
	o.startup.Inputs = time.Since(t0)
	o.startup.Ready = time.Since(processStart)
	files := &results{outputs: outSpecs, expects: expSpecs}
	if pb, ok := processBackends[o.backend]; ok {
		return c.runProcesses(pb, prog, args[0], inputs, files, o)
	}
	if err := files.prepare(prog, o); err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}

	wa := c.newWatch(o)
	t1 := time.Now()
	rt, err := runtime.Open(o.backend, wa.config(runtime.Config{
		WorldSize: prog.Mesh.Size(),
		Devices:   prog.Mesh.Devices,
		Rank:      -1,
		Timeout:   o.timeout,
	}))
	o.startup.Open = time.Since(t1)
	if err != nil {
		c.errorf("run: %v", err)
		if errors.Is(err, runtime.ErrUnknownBackend) {
			return exitUsage
		}
		return exitFail
	}
	release, err := reserveInputs(prog, rt)
	var res *evaluator.Result
	if err == nil {
		res, err = c.execute(prog, rt, inputs, o, wa)
		release()
	}
	if cerr := rt.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the %s runtime: %w", rt.Name(), cerr)
	}
	if err != nil {
		c.report(err)
		return exitFail
	}

	return c.finishRun(prog, reportsOf(prog, res, o.startup), res, files, o)
}

// tolWithoutExpect says why --rtol or --atol without --expect is refused
// (they would change nothing), or "".
func tolWithoutExpect(o *runOptions) string {
	if len(o.expects) > 0 {
		return ""
	}
	const give = "which is not given: give --expect NAME=REF.npy (or REF.npz, REF.safetensors) to compare outputs with"
	switch {
	case o.rtol.set && o.atol.set:
		return "--rtol and --atol are the tolerances of --expect, " + give + ", or leave them out"
	case o.rtol.set:
		return "--rtol is the relative tolerance of --expect, " + give + ", or leave --rtol out"
	case o.atol.set:
		return "--atol is the absolute tolerance of --expect, " + give + ", or leave --atol out"
	}
	return ""
}

// newWatch is the progress line and stall reports of a run with o.
func (c *cli) newWatch(o *runOptions) *watch {
	return newWatch(c.stderr, showProgress(o.progress, c.stderr), o.repeat)
}

// execute binds the program to the runtime and runs it o.repeat times,
// watched by wa.
func (c *cli) execute(prog *ir.Program, rt runtime.Runtime, inputs map[string]*host.Array, o *runOptions, wa *watch) (*evaluator.Result, error) {
	t0 := time.Now()
	job, err := evaluator.NewJob(prog, rt, o.jobOptions())
	o.startup.Job = time.Since(t0)
	if err != nil {
		return nil, err
	}
	wa.attach(job)
	res, err := runRepeats(job, inputs, o, wa)
	wa.finish()
	if cerr := job.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the job: %w", cerr)
	}
	return res, err
}

// rankReport is what hirrun prints of one rank's run: a summary of each
// output (in the program's output order) and the rank's counters. The
// processes of a multi-process job send theirs to rank 0 (gather.go), so
// every backend prints through the same two functions below.
type rankReport struct {
	Rank      int
	Summaries []string
	Stats     evaluator.Stats
	Startup   startup // this rank's process (in one process, the same for all)
}

// reportsOf summarises a result's ranks, in rank order.
func reportsOf(prog *ir.Program, res *evaluator.Result, st startup) []rankReport {
	reps := make([]rankReport, 0, len(res.Ranks))
	for _, rr := range res.Ranks {
		rep := rankReport{Rank: rr.Rank, Stats: rr.Stats, Startup: st}
		for _, out := range prog.Outputs {
			summary := "(not produced)"
			if a := rr.Outputs[out.Name]; a != nil {
				summary = a.Summary()
			}
			rep.Summaries = append(rep.Summaries, summary)
		}
		reps = append(reps, rep)
	}
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].Rank < reps[j].Rank })
	return reps
}

// printOutputs prints every rank's outputs, in rank then output order.
func (c *cli) printOutputs(prog *ir.Program, reports []rankReport) {
	for _, rep := range reports {
		for i, out := range prog.Outputs {
			summary := "(not produced)"
			if i < len(rep.Summaries) {
				summary = rep.Summaries[i]
			}
			fmt.Fprintf(c.stdout, "rank %d: %s = %s\n", rep.Rank, out, summary)
		}
	}
}

// printStats prints each rank's cache counters and time per op, on stderr:
// stdout holds the results alone.
func (c *cli) printStats(reports []rankReport) {
	for _, rr := range reports {
		s := rr.Stats
		fmt.Fprintf(c.stderr, "\nrank %d: symmetric handles %s; kernels %s\n",
			rr.Rank, hitsMisses(s.HandleHits, s.HandleMisses), hitsMisses(s.KernelHits, s.KernelMisses))
		if st := rr.Startup; st.Ready > 0 {
			fmt.Fprintf(c.stderr, "  start-up: %s to the program and inputs (inputs %s), runtime open %s (devices, contexts, peers), job %s\n",
				formatDuration(st.Ready), formatDuration(st.Inputs), formatDuration(st.Open), formatDuration(st.Job))
		}
		printRunSplit(c.stderr, s.Runs)
		ops := append([]evaluator.OpStat(nil), s.Ops...)
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Total > ops[j].Total })
		later := len(s.Runs) > 1
		tw := tabwriter.NewWriter(c.stderr, 0, 0, 2, ' ', 0)
		if later {
			// The first Run pays the set-up: apart, and the later Runs'
			// minimum and median per Run.
			fmt.Fprintln(tw, "  op\twhere\tcount\ttotal\tfirst Run\tlater: min\tmedian")
		} else {
			fmt.Fprintln(tw, "  op\twhere\tcount\ttotal\tmean")
		}
		for _, op := range ops {
			if later {
				lo, med := minMedian(op.PerRun)
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", op.Op, op.Pos, op.Count, formatDuration(op.Total),
					formatDuration(op.First), formatDuration(lo), formatDuration(med))
				continue
			}
			mean := time.Duration(0)
			if op.Count > 0 {
				mean = op.Total / time.Duration(op.Count)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", op.Op, op.Pos, op.Count, formatDuration(op.Total), formatDuration(mean))
		}
		tw.Flush()
	}
}

// printRunSplit prints where a rank's Runs went: the first Run apart (it
// pays the set-up), then the later Runs' median split and their fastest.
func printRunSplit(w io.Writer, runs []evaluator.RunStat) {
	if len(runs) == 0 {
		return
	}
	split := func(r evaluator.RunStat) string {
		return fmt.Sprintf("%s (inputs %s, ops %s, outputs %s, drain %s)", formatDuration(r.Total),
			formatDuration(r.Inputs), formatDuration(r.Ops), formatDuration(r.Outputs), formatDuration(r.Drain))
	}
	fmt.Fprintf(w, "  first Run: %s\n", split(runs[0]))
	if len(runs) == 1 {
		return
	}
	pick := func(f func(evaluator.RunStat) time.Duration) (lo, med time.Duration) {
		ds := make([]time.Duration, len(runs)-1)
		for i, r := range runs[1:] {
			ds[i] = f(r)
		}
		return minMedian(ds)
	}
	var lo, med evaluator.RunStat
	lo.Total, med.Total = pick(func(r evaluator.RunStat) time.Duration { return r.Total })
	lo.Inputs, med.Inputs = pick(func(r evaluator.RunStat) time.Duration { return r.Inputs })
	lo.Ops, med.Ops = pick(func(r evaluator.RunStat) time.Duration { return r.Ops })
	lo.Outputs, med.Outputs = pick(func(r evaluator.RunStat) time.Duration { return r.Outputs })
	lo.Drain, med.Drain = pick(func(r evaluator.RunStat) time.Duration { return r.Drain })
	fmt.Fprintf(w, "  later %d Run%s: median %s; fastest %s\n", len(runs)-1, plural(len(runs)-1), split(med), formatDuration(lo.Total))
}

// minMedian is the smallest and the median of ds (the lower middle of an
// even count); zeros for none.
func minMedian(ds []time.Duration) (lo, med time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	return s[0], s[(len(s)-1)/2]
}

func hitsMisses(hits, misses int64) string {
	h, m := "hits", "misses"
	if hits == 1 {
		h = "hit"
	}
	if misses == 1 {
		m = "miss"
	}
	return fmt.Sprintf("%d %s, %d %s", hits, h, misses, m)
}

// formatDuration keeps three significant digits or so: 1.23ms, 45.6µs.
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}

func valueList(vs []*ir.Value) string {
	if len(vs) == 0 {
		return "none"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
