package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hirlab/hir/internal/benchplot"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/cuda/cudabench"
	"github.com/hirlab/hir/runtime/launch"
)

type benchOptions struct {
	nproc            int
	minSize, maxSize string
	dtypes, ops      string
	table            string
	noSave           bool
	graph            bool // --graph: also time each figure replayed from a CUDA graph
	timeout          time.Duration
	format           string // --format: table, csv or json
	plot             string // --plot: a chart of the figures, .svg or .png
	from             string // --from: print and draw a saved --format json file instead of measuring
	fs               *flag.FlagSet
}

var benchCommand = &command{
	name:    "bench",
	args:    "[--nproc N] [--format F] [--plot FILE.svg] [flags] | --from FILE.json",
	summary: "time every collective algorithm and NCCL on the GPUs, save auto's table; print or chart the figures",
	help: `Starts one process per GPU (--nproc of them, default every GPU this machine
shows) and times every algorithm of all_reduce, all_gather, reduce_scatter
and all_to_all, NCCL included where it loads, at every power of two from
--min-size to --max-size (sizes as nccl-tests counts them: the all_reduce
and all_to_all buffer, all_gather's output, reduce_scatter's input), on
symmetric operands: warm-up calls, a barrier, then calls back to back
between two CUDA events; each figure is the slowest rank's mean. It prints
one line per figure in the Go benchmark format (benchstat reads it: time
per call and bus bandwidth as nccl-tests defines it), then the fastest
algorithm per size, and saves the ranking of the algorithms per
(collective, world size, dtype class, size) as the table algo=auto follows
(--table, default $HIR_COLL_TABLE or the user cache directory's
hir/collectives.json), replacing what an earlier run measured for the same
collectives, world size and dtype classes. With --graph, each figure's
calls are also captured in one CUDA graph and replayed (docs/GRAPHS.md):
a third metric per line (graph-ns/op), and the fastest in a graph per
size next to NCCL in a graph. Needs GPUs; like run, it also works as one
rank of a job torchrun or srun started.

--format csv or json prints the figures as records instead (op, dtype,
world, size_bytes, algo, iters, latency_us, algbw_GBps, busbw_GBps,
graph_latency_us, graph_busbw_GBps, fastest, fastest_in_graph; json
within an object that also names the device and the world size), for
other tools, and notes go to stderr. --plot FILE.svg (or .png) also
draws them: a row per collective, bus bandwidth and latency against the
message size, a line per algorithm and NCCL (dashed: in a graph).
--from FILE.json prints and draws what an earlier --format json saved,
with no GPU: hirrun bench --from run.json --plot run.svg. Field names
and the chart: docs/COLLECTIVES.md.`,
	flags: func(fs *flag.FlagSet) any {
		o := &benchOptions{}
		fs.IntVar(&o.nproc, "nproc", 0, "the number of GPUs, one process each (0: every GPU of this machine)")
		fs.StringVar(&o.minSize, "min-size", "8KiB", "the smallest size (bytes, or with KiB, MiB, GiB)")
		fs.StringVar(&o.maxSize, "max-size", "1GiB", "the largest size")
		fs.StringVar(&o.dtypes, "dtypes", "bf16", "the dtypes, comma-separated (each fills its class: 16bit, 32bit, 64bit)")
		fs.StringVar(&o.ops, "ops", "all_reduce,all_gather,reduce_scatter,all_to_all", "the collectives, comma-separated")
		fs.StringVar(&o.table, "table", "", "where to save auto's table (default: "+cuda.AutoTableEnv+", else the user cache directory's hir/collectives.json)")
		fs.BoolVar(&o.noSave, "no-save", false, "print the figures only; leave the table as it is")
		fs.BoolVar(&o.graph, "graph", false, "also time each figure's calls captured in one CUDA graph and replayed (graph-ns/op; docs/GRAPHS.md)")
		fs.DurationVar(&o.timeout, "timeout", 0, "how long a rank waits for its peers (0: "+runtime.DefaultTimeout.String()+")")
		fs.StringVar(&o.format, "format", "table", "how to print the figures: table (benchstat lines and the fastest per size), csv or json")
		fs.StringVar(&o.plot, "plot", "", "also draw the figures to this .svg or .png file")
		fs.StringVar(&o.from, "from", "", "print (and with --plot draw) a file --format json saved, instead of measuring; needs no GPU")
		o.fs = fs
		return o
	},
	run: func(c *cli, opts any, args []string) int { return c.bench(opts.(*benchOptions), args) },
}

// benchPlan is what the options ask for, parsed.
type benchPlan struct {
	opts   cudabench.CollBenchOptions
	ops    []ir.Opcode
	dtypes []ir.DType
}

func parseBenchOptions(o *benchOptions) (*benchPlan, error) {
	lo, err := parseSize(o.minSize)
	if err != nil {
		return nil, fmt.Errorf("--min-size: %v", err)
	}
	hi, err := parseSize(o.maxSize)
	if err != nil {
		return nil, fmt.Errorf("--max-size: %v", err)
	}
	if hi < lo {
		return nil, fmt.Errorf("--max-size %s is below --min-size %s", o.maxSize, o.minSize)
	}
	p := &benchPlan{}
	for _, name := range splitList(o.dtypes) {
		dt, ok := ir.ParseDType(name)
		if !ok || dt.Size() < 2 {
			return nil, fmt.Errorf("--dtypes: %q is not a dtype the collectives reduce (f16, bf16, f32, f64, i32, i64)", name)
		}
		p.dtypes = append(p.dtypes, dt)
	}
	for _, name := range splitList(o.ops) {
		op, ok := ir.LookupOpcode(name, 1)
		switch {
		case !ok:
			return nil, fmt.Errorf("--ops: unknown collective %q", name)
		case !op.Info().Benchmarked:
			return nil, fmt.Errorf("--ops: %q is not one bench measures (%s)", name, strings.Join(ir.Words(ir.BenchmarkedCollectives()), ", "))
		}
		p.ops = append(p.ops, op)
	}
	if len(p.dtypes) == 0 || len(p.ops) == 0 {
		return nil, fmt.Errorf("--dtypes and --ops must name at least one each")
	}
	p.opts = cudabench.CollBenchOptions{MinBytes: lo, MaxBytes: hi, Ops: p.ops, DTypes: p.dtypes, Graph: o.graph}
	return p, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseSize reads 8192, 8KiB, 16MiB, 1GiB (also K, M, G, KB...: binary).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}

func (c *cli) bench(o *benchOptions, args []string) int {
	if len(args) != 0 {
		c.errorf("bench: takes no arguments, got %q", args)
		return exitUsage
	}
	if o.nproc < 0 || o.timeout < 0 {
		c.errorf("bench: --nproc and --timeout must not be negative")
		return exitUsage
	}
	if o.from != "" {
		return c.benchFrom(o)
	}
	plan, err := parseBenchOptions(o)
	if err != nil {
		c.errorf("bench: %v", err)
		return exitUsage
	}
	env, launched, err := launch.FromEnv()
	if err != nil {
		c.errorf("bench: %v", err)
		return exitUsage
	}
	// Only rank 0 writes the chart: the others check its name alone.
	out, err := checkBenchOutput(o, !launched || env.Rank == 0)
	if err != nil {
		c.errorf("bench: %v", err)
		return exitUsage
	}
	if launched {
		if o.nproc != 0 && o.nproc != env.WorldSize {
			c.errorf("bench: --nproc %d, but %s started %d ranks (WORLD_SIZE)", o.nproc, env.Source, env.WorldSize)
			return exitUsage
		}
		return c.benchRank(o, plan, out, env.WorldSize)
	}
	n, code, ok := c.gpuRanks("bench", o.nproc)
	if !ok {
		return code
	}
	if n == 1 {
		return c.benchRank(o, plan, out, 1)
	}
	return c.launchRanks(n, benchRankArgs(o))
}

// benchRankArgs are the arguments of each rank hirrun starts: the
// options, spelled out.
func benchRankArgs(o *benchOptions) []string {
	args := []string{"bench", "--min-size", o.minSize, "--max-size", o.maxSize, "--dtypes", o.dtypes, "--ops", o.ops, "--format", o.format}
	if o.table != "" {
		args = append(args, "--table", o.table)
	}
	if o.noSave {
		args = append(args, "--no-save")
	}
	if o.graph {
		args = append(args, "--graph")
	}
	if o.timeout > 0 {
		args = append(args, "--timeout", o.timeout.String())
	}
	if o.plot != "" {
		args = append(args, "--plot", o.plot)
	}
	return args
}

// benchRank measures with the other ranks; rank 0 prints, draws and saves.
func (c *cli) benchRank(o *benchOptions, plan *benchPlan, out *benchOutput, world int) int {
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: o.timeout})
	if err != nil {
		c.errorf("bench: %v", err)
		return exitFail
	}
	crt, ok := rt.(*cuda.Runtime)
	if !ok {
		rt.Close()
		c.errorf("bench: the cuda backend is not runtime/cuda")
		return exitFail
	}
	dev := crt.CUDADevice()
	rank := dev.Rank()
	figs, err := cudabench.MeasureCollectives(crt, plan.opts)
	if err != nil {
		c.errorf("bench: %v", err)
		abort(crt, err)
		return exitFail
	}
	device := dev.Info().Name
	table := cudabench.BuildAutoTableFor(crt, figs)
	if err := crt.Close(); err != nil {
		c.errorf("bench: closing the cuda runtime: %v", err)
		return exitFail
	}
	if rank != 0 {
		return exitOK
	}
	rep := newBenchReport(device, world, o.graph, figs, time.Now().UTC().Format(time.RFC3339), buildVersion())
	code := c.emitBench(out, rep, figs)
	if o.noSave {
		return code
	}
	path := o.table
	if path == "" {
		if path, err = cuda.AutoTablePath(); err != nil {
			c.errorf("bench: %v", err)
			return exitFail
		}
		if path == "" {
			out.note(c, "auto table: not saved (%s turns it off)", cuda.AutoTableEnv)
			return code
		}
	}
	saved, err := saveAutoTable(path, table)
	if err != nil {
		c.errorf("bench: saving the auto table: %v", err)
		return exitFail
	}
	out.note(c, "auto table: %d entries (%d measured now) saved to %s", len(saved.Entries), len(table.Entries), path)
	return code
}

// saveAutoTable merges the fresh table into the one at path (entries of
// the same device for other collectives, world sizes or dtype classes
// stay) and writes it.
func saveAutoTable(path string, fresh *cuda.AutoTable) (*cuda.AutoTable, error) {
	old, err := cuda.LoadAutoTable(path)
	if err != nil {
		old = nil // unreadable or of another format: replaced
	}
	merged := cudabench.MergeAutoTable(fresh, old)
	return merged, cudabench.SaveAutoTable(merged, path)
}

// benchName is a figure's benchmark name: key=value parts, which
// benchstat can group by.
func benchName(f cudabench.CollFigure) string {
	return fmt.Sprintf("BenchmarkCollective/op=%s/dtype=%s/world=%d/size=%s/algo=%s", f.Op, f.DType, f.World, sizeWord(f.Bytes), f.Algo)
}

// sizeWord writes a byte count as the chart's axis does: 8KiB, 1GiB.
func sizeWord(n int64) string { return benchplot.SizeWord(n) }

// printBench prints the figures in the Go benchmark format, then the
// fastest algorithm of each size next to NCCL.
func (c *cli) printBench(device string, world int, figs []cudabench.CollFigure) {
	w := c.stdout
	fmt.Fprintf(w, "device: %s\nworld: %d\n", device, world)
	for _, f := range figs {
		fmt.Fprintf(w, "%s\t%d\t%.0f ns/op\t%.2f busGB/s", benchName(f), f.Iters, f.Micros*1e3, f.BusGBps())
		if f.GraphMicros > 0 {
			fmt.Fprintf(w, "\t%.0f graph-ns/op", f.GraphMicros*1e3)
		}
		fmt.Fprintln(w)
	}
	printFastest(w, figs)
}

func printFastest(w io.Writer, figs []cudabench.CollFigure) {
	type key struct {
		op, dt string
		bytes  int64
	}
	best := map[key]cudabench.CollFigure{}
	bestGraph := map[key]cudabench.CollFigure{}
	nccl := map[key]cudabench.CollFigure{}
	var keys []key
	for _, f := range figs {
		k := key{f.Op, f.DType, f.Bytes}
		if f.Algo == ir.AlgoNCCL.String() {
			nccl[k] = f
		}
		b, seen := best[k]
		if !seen {
			keys = append(keys, k)
		}
		if !seen || f.Micros < b.Micros {
			best[k] = f
		}
		if g, ok := bestGraph[k]; f.GraphMicros > 0 && (!ok || f.GraphMicros < g.GraphMicros) {
			bestGraph[k] = f
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].op != keys[j].op {
			return keys[i].op < keys[j].op
		}
		if keys[i].dt != keys[j].dt {
			return keys[i].dt < keys[j].dt
		}
		return keys[i].bytes < keys[j].bytes
	})
	fmt.Fprintf(w, "\nfastest per size (µs per call; bus bandwidth, GB/s):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "collective\tdtype\tsize\tfastest\tµs\tGB/s\tnccl µs\tnccl GB/s\t"
	if len(bestGraph) > 0 {
		header += "fastest in a graph\tµs\tnccl in a graph µs\t"
	}
	fmt.Fprintln(tw, header)
	for _, k := range keys {
		b := best[k]
		nu, nb := "-", "-"
		n, hasNCCL := nccl[k]
		if hasNCCL {
			nu, nb = fmt.Sprintf("%.1f", n.Micros), fmt.Sprintf("%.1f", n.BusGBps())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t", k.op, k.dt, sizeWord(k.bytes), b.Algo, b.Micros, b.BusGBps(), nu, nb)
		if len(bestGraph) > 0 {
			g, ng := bestGraph[k], "-"
			if hasNCCL && n.GraphMicros > 0 {
				ng = fmt.Sprintf("%.1f", n.GraphMicros)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t", g.Algo, g.GraphMicros, ng)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
