package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/launch"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/runtime/store"
)

// The multi-process path is tested without a GPU through "simproc", a
// test-only backend that hosts one rank per process on the CPU runtime
// (each process a sim runtime of the whole world of which it drives one
// rank: enough for programs whose ranks do not talk to each other) and
// joins the job's store like the cuda backend. The launcher starts copies
// of this test binary, which act as hirrun when envAsHirrun is set.

const (
	envAsHirrun = "HIRRUN_TEST_AS_HIRRUN"
	// envRankMode makes simproc ranks misbehave: "fail-R" fails rank R
	// after it joined the store; "block" prints the pid and sleeps.
	envRankMode = "HIRRUN_TEST_RANK_MODE"
	// envUnavailable makes simproc's machine check fail with its value.
	envUnavailable = "HIRRUN_TEST_UNAVAILABLE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envAsHirrun) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func init() {
	runtime.Register("simproc", openSimProc)
	processBackends["simproc"] = processBackend{check: func(*ir.Program) error {
		if why := os.Getenv(envUnavailable); why != "" {
			return errors.New(why)
		}
		return nil
	}}
}

type simProc struct {
	sim  *sim.Runtime
	rank int
	rv   *launch.Rendezvous
}

func openSimProc(cfg runtime.Config) (runtime.Runtime, error) {
	env, ok, err := launch.FromEnv()
	if err != nil {
		return nil, err
	}
	if !ok {
		env = launch.Env{WorldSize: 1}
	}
	if env.WorldSize != cfg.WorldSize {
		return nil, fmt.Errorf("simproc: mesh of %d, world of %d", cfg.WorldSize, env.WorldSize)
	}
	p := &simProc{rank: env.Rank}
	if env.WorldSize > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.EffectiveTimeout())
		defer cancel()
		if p.rv, err = launch.Join(ctx, env, cfg.EffectiveTimeout()); err != nil {
			return nil, err
		}
		mode := os.Getenv(envRankMode)
		if strings.HasPrefix(mode, "fail-") {
			// Fail once every rank has joined, as a rank failing mid-run
			// would (a rank not yet joined cannot tell a store that is
			// gone from one that has not started, and keeps dialling).
			if err := p.rv.Client.Barrier(ctx, "hirrun-test/joined", env.Rank, env.WorldSize, cfg.EffectiveTimeout()); err != nil {
				return nil, err
			}
		}
		switch mode {
		case "fail-" + strconv.Itoa(env.Rank):
			p.rv.Abort()
			return nil, fmt.Errorf("injected failure on rank %d", env.Rank)
		case "block":
			fmt.Fprintf(os.Stderr, "pid %d\n", os.Getpid())
			time.Sleep(time.Hour)
		}
	}
	if p.sim, err = sim.New(runtime.Config{WorldSize: env.WorldSize, Timeout: cfg.Timeout}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *simProc) Name() string   { return "simproc" }
func (p *simProc) WorldSize() int { return p.sim.WorldSize() }
func (p *simProc) Ranks() []int   { return []int{p.rank} }
func (p *simProc) Device(r int) (runtime.Device, error) {
	if r != p.rank {
		return nil, fmt.Errorf("simproc hosts rank %d only", p.rank)
	}
	return p.sim.Device(r)
}

func (p *simProc) Store() *store.Client {
	if p.rv == nil {
		return nil
	}
	return p.rv.Client
}

func (p *simProc) Close() error {
	err := p.sim.Close()
	if p.rv != nil {
		err = errors.Join(err, p.rv.Close(context.Background()))
	}
	return err
}

func (p *simProc) Abort() error {
	err := p.sim.Close()
	if p.rv != nil {
		err = errors.Join(err, p.rv.Abort())
	}
	return err
}

// goldenStdout is the stdout section of a testdata golden file.
func goldenStdout(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	_, rest, ok1 := strings.Cut(string(b), "-- stdout --\n")
	out, _, ok2 := strings.Cut(rest, "-- stderr --\n")
	require.True(t, ok1 && ok2, "%s has no stdout section", path)
	return out
}

func TestMultiProcessPrintsLikeOneProcess(t *testing.T) {
	t.Chdir("../..")
	t.Setenv(envAsHirrun, "1")
	want := goldenStdout(t, "testdata/pointwise.golden")
	for _, extra := range [][]string{nil, {"--nproc", "2"}} {
		args := append([]string{"run", "--backend", "simproc", "--input", "x=random:seed=1"}, extra...)
		r := hirrun(append(args, "testdata/pointwise.hir")...)
		expectCode(t, r, exitOK)
		assert.Equal(t, want, r.stdout, "hirrun %v printed, want the sim's golden", extra)
		assert.Empty(t, r.stderr, "stderr")
	}
}

const threeRankSrc = `mesh 3
input %x : f32[6/DIDx, 2]
input %w : f32[2]
%y = mul %x, %w
%z = add %w, 1.0
output %y, %z
`

func TestMultiProcessOutputsAndStats(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	prog := writeProgram(t, "p.hir", threeRankSrc)
	dir := t.TempDir()
	common := []string{"run", prog, "--input", "x=random:seed=3", "--input", "w=random:seed=4", "--stats", "--repeat", "2"}
	runWith := func(backend, tag string) (result, [][]byte) {
		y, z := filepath.Join(dir, tag+"y.npy"), filepath.Join(dir, tag+"z.npy")
		r := hirrun(append(common, "--backend", backend, "--output", "y="+y, "--output", "z="+z)...)
		expectCode(t, r, exitOK)
		var files [][]byte
		for _, p := range []string{y, z} {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			files = append(files, b)
		}
		return r, files
	}
	simRes, simFiles := runWith("sim", "sim-")
	procRes, procFiles := runWith("simproc", "proc-")
	for i, name := range []string{"y", "z"} {
		assert.Equal(t, simFiles[i], procFiles[i], "--output %s differs between sim (expected) and three processes (actual)", name)
	}
	// The outputs are the same bytes; the counters (on stderr, rank 0's
	// lines prefixed by the launcher) have the same lines in the same
	// order, times aside.
	assert.Equal(t, simRes.stdout, procRes.stdout, "outputs printed by sim (expected) and three processes (actual)")
	times, spaces := regexp.MustCompile(`[0-9.]+(ns|µs|ms|s)`), regexp.MustCompile(` +`)
	norm := func(s string) string { return spaces.ReplaceAllString(times.ReplaceAllString(s, "T"), " ") }
	procStats := strings.ReplaceAll(procRes.stderr, "[rank 0] ", "")
	assert.Equal(t, norm(simRes.stderr), norm(procStats), "--stats printed by sim (expected) and three processes (actual), times aside")
	assert.Equal(t, 3, strings.Count(procRes.stderr, "[rank 0] rank "), "want a counters section per rank, from rank 0:\n%s", procRes.stderr)
}

func TestMultiProcessRankFailureStopsTheJob(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	t.Setenv(envRankMode, "fail-1")
	prog := writeProgram(t, "p.hir", threeRankSrc)
	r := hirrun("run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random", "--timeout", "30s")
	expectCode(t, r, exitFail)
	expectContains(t, "stderr", r.stderr, "[rank 1] hirrun: run: injected failure on rank 1\n", "hirrun: launch: rank 1 exited with status 1")
	assert.Empty(t, r.stdout, "a failed job printed results")
}

func TestMultiProcessChecksTheMachineFirst(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	t.Setenv(envUnavailable, "no such device here")
	prog := writeProgram(t, "p.hir", threeRankSrc)
	r := hirrun("run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random")
	expectCode(t, r, exitFail)
	assert.Equal(t, "hirrun: run: no such device here\n", r.stderr)
	// A mesh that is not --nproc is a usage error, on every backend.
	for _, backend := range []string{"sim", "simproc"} {
		r = hirrun("run", "--backend", backend, "--nproc", "2", prog, "--input", "x=random", "--input", "w=random")
		expectCode(t, r, exitUsage)
		expectContains(t, "stderr", r.stderr, "--nproc 2, but "+prog+" declares a mesh of 3 ranks")
	}
}

func TestRankOfAJobOfAnotherSize(t *testing.T) {
	for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"} {
		t.Setenv(k, v)
	}
	prog := writeProgram(t, "p.hir", threeRankSrc)
	r := hirrun("run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "the program's mesh has 3 ranks but env started 2 (WORLD_SIZE=2)")
}

// rankProcs starts the ranks by hand, as torchrun would: rank 0 serves
// the store at MASTER_PORT+1. env, if not nil, gives a rank more variables.
func rankProcs(t *testing.T, world int, args []string, env func(rank int) []string) []*exec.Cmd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmds := make([]*exec.Cmd, world)
	for r := range world {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), envAsHirrun+"=1", "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port-1), "HIR_STORE_TOKEN=by-hand")
		if env != nil {
			cmd.Env = append(cmd.Env, env(r)...)
		}
		cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
		require.NoError(t, cmd.Start())
		cmds[r] = cmd
	}
	return cmds
}

func TestRanksStartedByAnotherLauncher(t *testing.T) {
	t.Chdir("../..")
	want := goldenStdout(t, "testdata/pointwise.golden")
	cmds := rankProcs(t, 2, []string{"run", "--backend", "simproc", "--input", "x=random:seed=1", "testdata/pointwise.hir"}, nil)
	for r, cmd := range cmds {
		err := cmd.Wait()
		stdout, stderr := cmd.Stdout.(*bytes.Buffer).String(), cmd.Stderr.(*bytes.Buffer).String()
		assert.NoError(t, err, "rank %d:\n%s", r, stderr)
		if r == 0 {
			assert.Equal(t, want, stdout, "rank 0 printed")
		} else {
			assert.Empty(t, stdout, "rank %d printed; only rank 0 prints", r)
		}
	}
}

// A failed rank leaves at once, so the others (started by a launcher that
// does not stop them) fail at once too rather than at their timeout.
func TestRankFailureReachesPeersStartedByAnotherLauncher(t *testing.T) {
	prog := writeProgram(t, "p.hir", threeRankSrc)
	start := time.Now()
	cmds := rankProcs(t, 3, []string{"run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random", "--timeout", "60s"}, func(int) []string { return []string{envRankMode + "=fail-1"} })
	for r, cmd := range cmds {
		err := cmd.Wait()
		stderr := cmd.Stderr.(*bytes.Buffer).String()
		assert.Error(t, err, "rank %d succeeded", r)
		// Rank 0 serves the store: it learns that rank 1 is gone, and
		// leaves, taking the store (rank 2 may learn either way).
		// (rank 2 may have left too by the time rank 0 hears.)
		want := []*regexp.Regexp{regexp.MustCompile(`ranks? ([0-9]+, )*1(, [0-9]+)* disconnected from the store`)}
		switch r {
		case 1:
			want = []*regexp.Regexp{regexp.MustCompile("injected failure on rank 1")}
		case 2:
			want = append(want, regexp.MustCompile("connection lost"))
		}
		assert.True(t, slices.ContainsFunc(want, func(w *regexp.Regexp) bool { return w.MatchString(stderr) }),
			"rank %d's stderr matches none of %q:\n%s", r, want, stderr)
	}
	assert.LessOrEqual(t, time.Since(start), 20*time.Second, "the job took too long to fail; the peers waited for their timeout")
}

func TestInterruptStopsEveryRank(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("Ctrl-C cannot be sent to another process on windows (os.Process.Signal supports only Kill there)")
	}
	prog := writeProgram(t, "p.hir", threeRankSrc)
	cmd := exec.Command(os.Args[0], "run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random")
	cmd.Env = append(os.Environ(), envAsHirrun+"=1", envRankMode+"=block")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	var pids []int
	var lines []string
	sc := bufio.NewScanner(stderr)
	for len(pids) < 3 && sc.Scan() {
		lines = append(lines, sc.Text())
		var rank, pid int
		if _, err := fmt.Sscanf(sc.Text(), "[rank %d] pid %d", &rank, &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	require.GreaterOrEqual(t, len(pids), 3, "ranks did not start:\n%s", strings.Join(lines, "\n"))
	cmd.Process.Signal(os.Interrupt)
	rest := make(chan string)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()
	err = cmd.Wait()
	tail := <-rest
	assert.Equal(t, exitInterrupted, cmd.ProcessState.ExitCode(), "exit (%v)\n%s", err, tail)
	assert.Contains(t, tail, "hirrun: launch: interrupted; stopped ranks 0, 1, 2", "stderr after the interrupt")
	for _, pid := range pids {
		assert.False(t, processAlive(pid), "rank process %d outlived the job", pid)
	}
}

func TestGatherResultsInChunks(t *testing.T) {
	defer func(n int) { gatherChunk = n }(gatherChunk)
	gatherChunk = 7 // bytes: shards travel in several chunks, the last short
	prog := writeProgram(t, "p.hir", threeRankSrc)
	p, code := (&cli{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}).parse(prog)
	require.Equal(t, exitOK, code, "parse")
	require.NoError(t, passes.Lower(p, &passes.Context{}))
	const token = "t"
	ctx := context.Background()
	srv, err := store.Serve(ctx, "127.0.0.1:0", token)
	require.NoError(t, err)
	defer srv.Close()
	x := host.Random(ir.F32, []int64{6, 2}, 1)
	z := host.Random(ir.F32, []int64{2}, 2)
	type got struct {
		reports []rankReport
		whole   *evaluator.Result
		err     error
	}
	results := make(chan got, 3)
	clients := make([]*store.Client, 3)
	for r := range 3 {
		clients[r], err = store.Dial(ctx, srv.Addr(), token, store.WithRank(r))
		require.NoError(t, err)
		defer clients[r].Close()
		shard, _ := x.Shard(0, r, 3)
		res := &evaluator.Result{Ranks: []evaluator.RankResult{{Rank: r, Outputs: map[string]*host.Array{"y": shard, "z": z}}}}
		go func() {
			reps, whole, err := gatherResults(clients[r], p, res, []string{"y", "z"}, 3, 10*time.Second, startup{Ready: time.Duration(r + 1)})
			if r == 0 {
				results <- got{reps, whole, err}
			} else if reps != nil || whole != nil || err != nil {
				results <- got{err: fmt.Errorf("rank %d got %v %v %v", r, reps, whole, err)}
			}
		}()
	}
	g := <-results
	require.NoError(t, g.err)
	for r, rep := range g.reports {
		shard, _ := x.Shard(0, r, 3)
		assert.Equal(t, r, rep.Rank, "report %d: %+v", r, rep)
		assert.Equal(t, []string{shard.Summary(), z.Summary()}, rep.Summaries, "report %d", r)
		assert.Equal(t, time.Duration(r+1), rep.Startup.Ready, "report %d: each rank's start-up travels to rank 0", r)
	}
	y, err := g.whole.Logical(p, "y")
	require.NoError(t, err)
	assert.NoError(t, host.Equal(y, x), "y joined from three ranks")
	// Rank 0 took the chunks out of the store.
	existed, err := clients[0].Delete(ctx, chunkKey(2, "y", 0))
	assert.NoError(t, err, "deleting rank 2's first chunk")
	assert.False(t, existed, "rank 2's first chunk is still in the store")
}

// Without a GPU, --backend cuda and topo say why, exit 1, start nothing.
func TestCUDAWithoutGPU(t *testing.T) {
	if p := cuda.Probe(); p.Available {
		t.Skip("this machine has a usable GPU")
	}
	prog := writeProgram(t, "p.hir", threeRankSrc)
	for _, args := range [][]string{
		{"run", "--backend", "cuda", prog, "--input", "x=random", "--input", "w=random"},
		{"run", "--backend", "cuda", "--nproc", "3", prog, "--input", "x=random", "--input", "w=random"},
		{"topo"},
		{"topo", "--nproc", "2"},
	} {
		r := hirrun(args...)
		expectCode(t, r, exitFail)
		if args[0] == "run" {
			expectContains(t, "stderr", r.stderr, "cuda backend unavailable: ", "--backend sim")
		} else { // topo has no --backend: it says it needs GPUs (gpus_test.go)
			expectContains(t, "stderr", r.stderr, "topo: needs GPUs")
			assert.NotContains(t, r.stderr, "--backend", "topo has no --backend flag to advise")
		}
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "hirrun %v: want one line of error, got:\n%s", args, r.stderr)
	}
	r := hirrun("topo", "extra")
	expectCode(t, r, exitUsage)
}

// A rank that presents another job's token is turned away by the store;
// the others name it when their wait for it times out (the first of them
// to time out leaves, so the other may hear that instead).
func TestRankWithAWrongToken(t *testing.T) {
	prog := writeProgram(t, "p.hir", threeRankSrc)
	cmds := rankProcs(t, 3, []string{"run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random", "--timeout", "3s"},
		func(r int) []string {
			if r == 2 {
				return []string{"HIR_STORE_TOKEN=not-this-job"}
			}
			return nil
		})
	var others string
	for r, cmd := range cmds {
		err := cmd.Wait()
		stderr := cmd.Stderr.(*bytes.Buffer).String()
		assert.Error(t, err, "rank %d succeeded", r)
		if r == 2 {
			assert.Contains(t, stderr, "rejected the job token", "rank 2's stderr lacks the rejection")
		}
		if r < 2 {
			others += stderr
		}
	}
	assert.Regexp(t, `timed out after [0-9.]+s waiting for (rank 2|ranks [0-9, ]*2) of 3`, others, "neither rank 0 nor rank 1 named rank 2")
}

func TestPeerGone(t *testing.T) {
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{nil, false},
		{errors.New("rank 0: p.hir:3:1: exp: unsupported on cuda yet"), false},
		{fmt.Errorf("x: %w", &store.BarrierError{Name: "b", World: 2, Missing: []int{1}, Disconnected: []int{1}}), true},
		{fmt.Errorf("x: %w", &store.BarrierError{Name: "b", World: 2, Missing: []int{1}}), false}, // a timeout
		{fmt.Errorf("get: %w", store.ErrClosed), true},
		{errors.New("rank 0: symmetric alloc #0: rank 1's connection ended before it sent its handle (EOF); did its process die?"), true},
	} {
		assert.Equal(t, c.gone, peerGone(c.err), "peerGone(%v)", c.err)
	}
}
