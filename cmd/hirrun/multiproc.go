package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/launch"
	"github.com/hirlab/hir/runtime/store"
)

// A multi-process job. A backend that hosts one rank per process (cuda) is
// run in one of three ways:
//
//   - hirrun was started by hand: it checks the program, the inputs and the
//     machine, then starts one copy of itself per rank through launch.Run
//     (its arguments rebuilt from the parsed flags, without --explain, which
//     this process already honoured) and waits for them;
//   - hirrun is one of those copies, or one rank of a job that torchrun or
//     srun started (launch.FromEnv): it runs its rank (runRank);
//   - the mesh has one rank: it runs that rank in this process.
//
// Results reach the user through rank 0 alone: every rank sends rank 0 its
// output summaries, counters and the shards --output and --expect need
// (gather.go), and rank 0 prints them in rank order with the same
// functions the in-process backends use, so the two print the same bytes;
// rank 0 alone writes the --output files and reads the --expect
// references. The launcher passes rank 0's stdout through unprefixed;
// everything else a rank writes is prefixed "[rank N] ".

// processBackend is a backend that runs one rank per process.
type processBackend struct {
	// check says why this machine cannot run prog's ranks, or nil.
	check func(prog *ir.Program) error
}

var processBackends = map[string]processBackend{
	"cuda": {check: cudaCheck},
}

// cudaCheck probes the driver and counts the GPUs prog's mesh needs here.
func cudaCheck(prog *ir.Program) error {
	p := cuda.Probe()
	if !p.Available {
		return fmt.Errorf("cuda backend unavailable: %s", p.Unavailable())
	}
	for rank, dev := range prog.Mesh.Devices {
		if dev >= len(p.Devices) && !cuda.SharingGPUs() {
			return fmt.Errorf("the program's mesh puts rank %d on GPU %d, but this machine shows %d GPU%s (%s=1 shares GPUs between ranks, for testing)", rank, dev, len(p.Devices), plural(len(p.Devices)), cuda.ShareGPUsEnv)
		}
	}
	return nil
}

// meshDevices is runtime.Config.Devices for a rank: nil for a linear mesh,
// so that each rank takes LOCAL_RANK's GPU (right on every node of a
// multi-node job), else the mesh's device ids.
func meshDevices(prog *ir.Program) []int {
	if prog.Mesh.IsLinear() {
		return nil
	}
	return prog.Mesh.Devices
}

// runProcesses runs prog on a one-rank-per-process backend.
func (c *cli) runProcesses(pb processBackend, prog *ir.Program, path string, inputs map[string]*host.Array, files *results, o *runOptions) int {
	env, launched, err := launch.FromEnv()
	if err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	mesh := prog.Mesh.Size()
	if launched {
		if env.WorldSize != mesh {
			c.errorf("run: the program's mesh has %d rank%s but %s started %d (WORLD_SIZE=%d)", mesh, plural(mesh), env.Source, env.WorldSize, env.WorldSize)
			return exitUsage
		}
		// Only rank 0 saves and compares outputs (on its node's files).
		if env.Rank == 0 {
			if err := files.prepare(prog, o); err != nil {
				c.errorf("run: %v", err)
				return exitUsage
			}
		}
		return c.runRank(prog, inputs, files, o)
	}
	if err := pb.check(prog); err != nil {
		c.errorf("run: %v", err)
		return exitFail
	}
	// Check the files before any rank starts; rank 0 loads them again.
	if err := files.prepare(prog, o); err != nil {
		c.errorf("run: %v", err)
		return exitUsage
	}
	if mesh == 1 {
		return c.runRank(prog, inputs, files, o)
	}
	files.loaded = nil
	return c.launchRanks(mesh, o.rankArgs(path))
}

// rankArgs are the arguments each rank's hirrun gets.
func (o *runOptions) rankArgs(path string) []string {
	a := []string{"run", "--backend", o.backend}
	for _, in := range o.inputs {
		a = append(a, "--input", in)
	}
	for _, out := range o.outputs {
		a = append(a, "--output", out)
	}
	for _, e := range o.expects {
		a = append(a, "--expect", e)
	}
	if o.rtol.set {
		a = append(a, "--rtol", o.rtol.String())
	}
	if o.atol.set {
		a = append(a, "--atol", o.atol.String())
	}
	if o.stats {
		a = append(a, "--stats")
	}
	if o.trace != "" {
		a = append(a, "--trace", o.trace) // rank 0 writes it, with every rank's ops
	}
	if o.overlap {
		a = append(a, "--trace-overlap")
	}
	if o.timeout > 0 {
		a = append(a, "--timeout", o.timeout.String())
	}
	if o.repeat > 1 {
		a = append(a, "--repeat", strconv.Itoa(o.repeat))
	}
	if o.graph {
		a = append(a, "--graph")
	}
	return append(a, "--", path)
}

// exitInterrupted is hirrun's status when Ctrl-C (or SIGTERM) stopped the
// job, as shells report a SIGINT.
const exitInterrupted = 130

// launchRanks starts nproc copies of hirrun with args and waits for them.
func (c *cli) launchRanks(nproc int, args []string) int {
	self, err := os.Executable()
	if err != nil {
		c.errorf("cannot find hirrun's own executable to start the ranks: %v", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = launch.Run(ctx, launch.LaunchConfig{
		NProc:  nproc,
		Argv:   append([]string{self}, args...),
		Stdout: c.stdout,
		Stderr: c.stderr,
		Prefix: resultPrefix,
	})
	var re *launch.RankError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &re):
		c.errorf("%v", err)
		return re.Status()
	case ctx.Err() != nil:
		c.errorf("%v", err)
		return exitInterrupted
	}
	c.errorf("%v", err)
	return exitFail
}

// resultPrefix leaves rank 0's stdout, the job's result, as it is.
func resultPrefix(rank int, stream string) string {
	if rank == 0 && stream == "stdout" {
		return ""
	}
	return launch.DefaultPrefix(rank, stream)
}

// aborter is a runtime that can leave the job without waiting for peers.
type aborter interface{ Abort() error }

// storeHolder is a runtime that has the job's store (nil for one rank).
type storeHolder interface{ Store() *store.Client }

// abort closes rt after a failure, without waiting for the other ranks:
// they may be waiting for this one, and learn sooner that it is gone. When
// err says another rank is gone first, it then waits a moment, so that a
// launcher, which reports the first rank to exit, names the rank that
// failed first rather than this one (it stops this one anyway).
func abort(rt runtime.Runtime, err error) {
	if a, ok := rt.(aborter); ok {
		a.Abort()
	} else {
		rt.Close()
	}
	if peerGone(err) {
		time.Sleep(peerGoneGrace)
	}
}

// peerGoneGrace is how long a rank that failed because a peer is gone
// waits before it exits.
var peerGoneGrace = time.Second

// peerGone reports whether err says another rank is gone (it died, or left
// after failing), rather than that this rank failed on its own.
func peerGone(err error) bool {
	var be *store.BarrierError
	switch {
	case err == nil:
		return false
	case errors.As(err, &be) && len(be.Disconnected) > 0, errors.Is(err, store.ErrClosed):
		return true
	}
	return strings.Contains(err.Error(), "did its process die") // the fd exchange
}

// runRank runs this process's rank of prog; on rank 0 it prints every
// rank's results.
func (c *cli) runRank(prog *ir.Program, inputs map[string]*host.Array, files *results, o *runOptions) int {
	wa := c.newWatch(o)
	t0 := time.Now()
	rt, err := runtime.Open(o.backend, wa.config(runtime.Config{
		WorldSize: prog.Mesh.Size(),
		Devices:   meshDevices(prog),
		Rank:      -1,
		Timeout:   o.timeout,
	}))
	o.startup.Open = time.Since(t0)
	if err != nil {
		c.errorf("run: %v", err)
		return exitFail
	}
	res, err := c.runJob(prog, rt, inputs, o, wa)
	if err != nil {
		c.report(err)
		abort(rt, err)
		return exitFail
	}
	var client *store.Client
	if sh, ok := rt.(storeHolder); ok {
		client = sh.Store()
	}
	reports, all, err := gatherResults(client, prog, res, files.wholeOutputs(prog), rt.WorldSize(), o.timeout, o.startup)
	if err != nil {
		c.report(err)
		abort(rt, err)
		return exitFail
	}
	// Leave the job before writing files: peers wait for us at Close.
	if err := rt.Close(); err != nil {
		c.errorf("closing the %s runtime: %v", rt.Name(), err)
		return exitFail
	}
	if reports == nil {
		return exitOK // not rank 0: rank 0 prints
	}
	return c.finishRun(prog, reports, all, files, o)
}

// runJob runs the program o.repeat times on the ranks rt hosts, watched by
// wa. On failure it leaves the job unclosed: closing frees symmetric memory
// collectively, which would wait for peers that may be waiting for us;
// abort frees it.
func (c *cli) runJob(prog *ir.Program, rt runtime.Runtime, inputs map[string]*host.Array, o *runOptions, wa *watch) (*evaluator.Result, error) {
	t0 := time.Now()
	job, err := evaluator.NewJob(prog, rt, o.jobOptions())
	o.startup.Job = time.Since(t0)
	if err != nil {
		return nil, err
	}
	wa.attach(job)
	defer wa.finish()
	res, err := runRepeats(job, inputs, o, wa)
	if err != nil {
		return nil, err
	}
	if err := job.Close(); err != nil {
		return nil, fmt.Errorf("closing the job: %w", err)
	}
	if len(res.Ranks) == 0 {
		return nil, errors.New("the runtime hosts no rank in this process")
	}
	return res, nil
}
