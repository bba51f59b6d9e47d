package cuda

import (
	"testing"
	"time"

	"github.com/hirlab/hir/runtime/cuda/internal/ranktest"
)

// Multi-process tests re-execute this test binary once per rank with
// ranktest.EnvScenario (HIR_CUDA_TEST_SCENARIO) set; TestMain then runs
// the named scenario instead of the tests and exits with its status.

// envScenario names the scenario a re-executed test binary runs.
const envScenario = ranktest.EnvScenario

var scenarios = map[string]func() error{}

func TestMain(m *testing.M) { ranktest.Main(m, scenarios) }

type rankRun struct {
	rank   int
	code   int
	output string
}

// runRanks starts a store and world copies of this binary running
// scenario, waits for all of them (bounded), and returns their outputs.
func runRanks(t testing.TB, world int, scenario string, env ...string) []rankRun {
	t.Helper()
	return runRanksWithin(t, 3*time.Minute, world, scenario, env...)
}

// runRanksWithin is runRanks with the ranks given limit to finish.
func runRanksWithin(t testing.TB, limit time.Duration, world int, scenario string, env ...string) []rankRun {
	t.Helper()
	var out []rankRun
	for _, r := range ranktest.RanksWithin(t, limit, world, scenario, env...) {
		out = append(out, rankRun{rank: r.Rank, code: r.Code, output: r.Output})
	}
	return out
}

// metrics collects "METRIC name value unit" lines from the ranks' output.
func metrics(runs []rankRun) map[string]float64 {
	var rs []ranktest.Run
	for _, r := range runs {
		rs = append(rs, ranktest.Run{Rank: r.rank, Code: r.code, Output: r.output})
	}
	return ranktest.Metrics(rs)
}

func openFDCount() int { return ranktest.OpenFDCount() }

// alignRanks meets the peers before a timed Run as the PyTorch peers'
// dist.barrier() does: on the GPU (a barrier kernel on the default
// stream), with the host waiting for it, so every rank starts its Run
// within microseconds of the others. After the store's barrier alone
// each rank wakes on its own TCP reply, and a Run whose first collective
// waited for a late rank paid that skew on rank 0's clock (the TP block's
// fixed cost per Run fell from 52-84 to 36-38 µs with this, GRAPHS.md).
func alignRanks(d *Device) error {
	s := d.DefaultStream()
	if err := d.Barrier(s); err != nil {
		return err
	}
	if err := d.StreamBarrier(s); err != nil {
		return err
	}
	return s.Synchronize()
}
