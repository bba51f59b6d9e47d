package main

import (
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/cuda/cudabench"
	"github.com/hirlab/hir/runtime/launch"
)

type topoOptions struct {
	nproc   int
	sizeMiB int
	iters   int
	timeout time.Duration
}

var topoCommand = &command{
	name:    "topo",
	args:    "[--nproc N] [--size-mib M]",
	summary: "measure peer access, copy bandwidth and latency between the GPUs",
	help: `Starts one process per GPU (--nproc of them, default every GPU this machine
shows), gives each a symmetric allocation, and measures, for every ordered
pair of GPUs (from, to): whether from's GPU can access to's
(cuDeviceCanAccessPeer), the bandwidth of large copies pushed by from
through its mapping of to's shard (back to back, timed with CUDA events
after warm-ups), and the latency of one small copy through that mapping
(the median of many, each timed alone with events). Rows with from = to
copy within one GPU, between the two halves of its shard. One rank copies
at a time, so the figures do not disturb each other. Needs GPUs; like run,
it also works as one rank of a job torchrun or srun started.`,
	flags: func(fs *flag.FlagSet) any {
		o := &topoOptions{}
		fs.IntVar(&o.nproc, "nproc", 0, "the number of GPUs, one process each (0: every GPU of this machine)")
		fs.IntVar(&o.sizeMiB, "size-mib", 256, "the size of the large copies, in MiB")
		fs.IntVar(&o.iters, "iters", 5, "timed large copies per pair (after 2 warm-ups)")
		fs.DurationVar(&o.timeout, "timeout", 0, "how long a rank waits for its peers (0: "+runtime.DefaultTimeout.String()+")")
		return o
	},
	run: func(c *cli, opts any, args []string) int { return c.topo(opts.(*topoOptions), args) },
}

func (c *cli) topo(o *topoOptions, args []string) int {
	if len(args) != 0 {
		c.errorf("topo: takes no arguments, got %q", args)
		return exitUsage
	}
	if o.nproc < 0 || o.sizeMiB < 1 || o.iters < 1 || o.timeout < 0 {
		c.errorf("topo: --nproc must not be negative, --size-mib and --iters must be at least 1, --timeout not negative")
		return exitUsage
	}
	env, launched, err := launch.FromEnv()
	if err != nil {
		c.errorf("topo: %v", err)
		return exitUsage
	}
	if launched {
		if o.nproc != 0 && o.nproc != env.WorldSize {
			c.errorf("topo: --nproc %d, but %s started %d ranks (WORLD_SIZE)", o.nproc, env.Source, env.WorldSize)
			return exitUsage
		}
		return c.topoRank(o, env.WorldSize)
	}
	n, code, ok := c.gpuRanks("topo", o.nproc)
	if !ok {
		return code
	}
	if n == 1 {
		return c.topoRank(o, 1)
	}
	rankArgs := []string{"topo", "--size-mib", strconv.Itoa(o.sizeMiB), "--iters", strconv.Itoa(o.iters)}
	if o.timeout > 0 {
		rankArgs = append(rankArgs, "--timeout", o.timeout.String())
	}
	return c.launchRanks(n, rankArgs)
}

// topoRank measures this process's rank's links; rank 0 prints the table.
func (c *cli) topoRank(o *topoOptions, world int) int {
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: o.timeout})
	if err != nil {
		c.errorf("topo: %v", err)
		return exitFail
	}
	crt, ok := rt.(*cuda.Runtime)
	if !ok {
		rt.Close()
		c.errorf("topo: the cuda backend is not runtime/cuda")
		return exitFail
	}
	topo, err := cudabench.MeasureTopology(crt, cudabench.TopoOptions{Bytes: int64(o.sizeMiB) << 20, Iters: o.iters})
	if err != nil {
		c.errorf("topo: %v", err)
		abort(crt, err)
		return exitFail
	}
	rank := crt.CUDADevice().Rank()
	if err := crt.Close(); err != nil {
		c.errorf("topo: closing the cuda runtime: %v", err)
		return exitFail
	}
	if rank == 0 {
		c.printTopology(topo)
	}
	return exitOK
}

func (c *cli) printTopology(t *cudabench.Topology) {
	o := t.Options
	for _, r := range t.Ranks {
		fmt.Fprintf(c.stdout, "rank %d: GPU %d (%s)\n", r.Rank, r.Device, r.Name)
	}
	fmt.Fprintf(c.stdout, "\nbandwidth: %s copies pushed through the symmetric mapping, %d timed back to back after %d warm-ups (CUDA events), bytes copied / time\n",
		human(o.Bytes), o.Iters, o.Warmups)
	fmt.Fprintf(c.stdout, "latency: median of %d copies of %d bytes, each timed alone (CUDA events)\n", o.LatencySamples, o.LatencyBytes)
	fmt.Fprintf(c.stdout, "from = to: within one GPU, %s copies between the halves of its shard\n\n", human(o.Bytes/2))
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "from\tto\tpeer access\tGB/s\tlatency µs\t")
	for _, l := range t.Links {
		access := "no"
		switch {
		case l.From == l.To:
			access = "same GPU"
		case l.PeerAccess:
			access = "yes"
		}
		if l.Err != "" {
			fmt.Fprintf(tw, "%d\t%d\t%s\t-\t-\t error: %s\n", l.From, l.To, access, l.Err)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.1f\t%.2f\t\n", l.From, l.To, access, l.GBps, float64(l.Latency)/float64(time.Microsecond))
	}
	tw.Flush()
}

func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
