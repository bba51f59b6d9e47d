// Package ranktest runs a GPU test as several processes, one per rank,
// the way hirrun launches a job: the test binary re-executes itself once
// per rank with EnvScenario naming a scenario (a func registered by the
// test package), and TestMain (Main) runs that scenario instead of the
// tests. runtime/cuda's tests and cudabench's share it.
package ranktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/store"
)

// EnvScenario names the scenario a re-executed test binary runs.
const EnvScenario = "HIR_CUDA_TEST_SCENARIO"

// Main is a test package's TestMain: with EnvScenario set it runs that
// scenario of scenarios and exits with its status (2 for an unknown
// one), else it runs the tests.
func Main(m *testing.M, scenarios map[string]func() error) {
	if name := os.Getenv(EnvScenario); name != "" {
		f, ok := scenarios[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
			os.Exit(2)
		}
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Run is one rank's process: its exit code and everything it printed.
type Run struct {
	Rank   int
	Code   int
	Output string
}

// Ranks starts a store and world copies of this binary running
// scenario, waits for all of them (at most 3 minutes), and returns their
// outputs.
func Ranks(t testing.TB, world int, scenario string, env ...string) []Run {
	t.Helper()
	return RanksWithin(t, 3*time.Minute, world, scenario, env...)
}

// RanksWithin is Ranks with the ranks given limit to finish.
func RanksWithin(t testing.TB, limit time.Duration, world int, scenario string, env ...string) []Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	const token = "cuda-test-token"
	srv, err := store.Serve(ctx, "127.0.0.1:0", token)
	require.NoError(t, err)
	defer srv.Close()
	cmds := make([]*exec.Cmd, world)
	outs := make([]*bytes.Buffer, world)
	for r := range world {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), EnvScenario+"="+scenario, "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r),
			"WORLD_SIZE="+strconv.Itoa(world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(srv.Port()),
			"HIR_LAUNCHED=1", "HIR_STORE_TOKEN="+token, "NCCL_NVLS_ENABLE=0")
		cmd.Env = append(cmd.Env, env...)
		outs[r] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		require.NoError(t, cmd.Start())
		cmds[r] = cmd
	}
	runs := make([]Run, world)
	for r, cmd := range cmds {
		cmd.Wait()
		runs[r] = Run{Rank: r, Code: cmd.ProcessState.ExitCode(), Output: outs[r].String()}
	}
	return runs
}

// Check logs every rank's output and fails t for each rank that did not
// exit 0.
func Check(t testing.TB, runs []Run) {
	t.Helper()
	for _, r := range runs {
		t.Logf("rank %d (exit %d):\n%s", r.Rank, r.Code, strings.TrimSpace(r.Output))
		assert.Zero(t, r.Code, "rank %d exited with %d", r.Rank, r.Code)
	}
}

// Metrics collects "METRIC name value unit" lines from the ranks' output.
func Metrics(runs []Run) map[string]float64 {
	m := map[string]float64{}
	for _, r := range runs {
		for _, line := range strings.Split(r.Output, "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "METRIC" {
				if v, err := strconv.ParseFloat(f[2], 64); err == nil {
					m[f[1]+" ("+f[3]+")"] = v
				}
			}
		}
	}
	return m
}

// OpenFDCount is how many file descriptors this process has open (-1
// where /proc does not say).
func OpenFDCount() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
