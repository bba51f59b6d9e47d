package cuda

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

	"github.com/hirlab/hir/runtime/store"
)

// Multi-process tests re-execute this test binary once per rank with
// envScenario set; TestMain then runs the named scenario instead of the
// tests and exits with its status.
const envScenario = "HIR_CUDA_TEST_SCENARIO"

var scenarios = map[string]func() error{}

func TestMain(m *testing.M) {
	if name := os.Getenv(envScenario); name != "" {
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

type rankRun struct {
	rank   int
	code   int
	output string
}

// runRanks starts a store and world copies of this binary running
// scenario, waits for all of them (bounded), and returns their outputs.
func runRanks(t testing.TB, world int, scenario string, env ...string) []rankRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const token = "cuda-test-token"
	srv, err := store.Serve(ctx, "127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cmds := make([]*exec.Cmd, world)
	outs := make([]*bytes.Buffer, world)
	for r := range world {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), envScenario+"="+scenario, "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r),
			"WORLD_SIZE="+strconv.Itoa(world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(srv.Port()),
			"HIR_LAUNCHED=1", "HIR_STORE_TOKEN="+token, "NCCL_NVLS_ENABLE=0")
		cmd.Env = append(cmd.Env, env...)
		outs[r] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	runs := make([]rankRun, world)
	for r, cmd := range cmds {
		cmd.Wait()
		runs[r] = rankRun{rank: r, code: cmd.ProcessState.ExitCode(), output: outs[r].String()}
	}
	return runs
}

// metrics collects "METRIC name value unit" lines from the ranks' output.
func metrics(runs []rankRun) map[string]float64 {
	m := map[string]float64{}
	for _, r := range runs {
		for _, line := range strings.Split(r.output, "\n") {
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

func openFDCount() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
