package cuda

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime"
)

func TestOpenWithoutGPUIsAClearError(t *testing.T) {
	if p := Probe(); p.Available {
		t.Skip("this machine has a usable GPU")
	}
	_, err := runtime.Open("cuda", runtime.Config{WorldSize: 2, Rank: -1})
	require.ErrorContains(t, err, "cuda backend unavailable: ", "Open")
}

func TestOptionsFromEnv(t *testing.T) {
	for _, v := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "HIR_LAUNCHED", "HIR_STORE_TOKEN", "SLURM_PROCID"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	_, _, err := optionsFromEnv(runtime.Config{WorldSize: 2, Rank: -1})
	assert.ErrorContains(t, err, "one rank per process", "two ranks with no launcher")
	o, rv, err := optionsFromEnv(runtime.Config{WorldSize: 1, Rank: -1, Devices: []int{3}})
	assert.NoError(t, err, "single process")
	assert.Nil(t, rv, "single process")
	assert.Equal(t, 0, o.Rank, "single process: %+v", o)
	assert.Equal(t, 1, o.WorldSize, "single process: %+v", o)
	assert.Equal(t, 3, o.Device, "single process: %+v", o)
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "4")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "1")
	_, _, err = optionsFromEnv(runtime.Config{WorldSize: 2, Rank: -1})
	assert.ErrorContains(t, err, "mesh has 2 ranks but the launcher started 4", "mesh/world mismatch")
}
