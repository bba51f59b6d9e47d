package cudabench

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/cuda/internal/ranktest"
)

// GPU tests skip, with the probe's reason, where no usable GPU is; the
// multi-process ones re-execute this test binary once per rank
// (ranktest), as runtime/cuda's do, with the same gating.

var scenarios = map[string]func() error{}

func TestMain(m *testing.M) { ranktest.Main(m, scenarios) }

func needGPU(t testing.TB) cuda.ProbeResult {
	t.Helper()
	p := cuda.Probe()
	if !p.Available {
		t.Skip(p.Reason)
	}
	return p
}

func needGPUs(t testing.TB, n int) {
	t.Helper()
	p := needGPU(t)
	if len(p.Devices) < n && !cuda.SharingGPUs() {
		t.Skipf("needs %d GPUs, this machine has %d (%s=1 runs it with ranks sharing GPUs)", n, len(p.Devices), cuda.ShareGPUsEnv)
	}
}

// openSingle opens a world of one on device 0 and, at cleanup, checks that
// closing left nothing behind.
func openSingle(t *testing.T) *cuda.Runtime {
	t.Helper()
	needGPU(t)
	rt, err := cuda.New(cuda.Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, rt.Close(), "close")
	})
	return rt
}

// openFromEnv opens this rank of a scenario's job (launcher variables).
func openFromEnv() (*cuda.Runtime, *cuda.Device, error) {
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: 60 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	crt := rt.(*cuda.Runtime)
	return crt, crt.CUDADevice(), nil
}
