package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlaceFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		want Place
	}{
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"},
			Place{Rank: 1, WorldSize: 2, RankVar: "RANK", WorldVar: "WORLD_SIZE"}},
		// No MASTER_ADDR or SLURM_JOB_ID needed: only the rank counts.
		{"srun", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			Place{Rank: 0, WorldSize: 4, RankVar: "SLURM_PROCID", WorldVar: "SLURM_NTASKS"}},
		{"torch variables over slurm", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "RANK": "3", "WORLD_SIZE": "4"},
			Place{Rank: 3, WorldSize: 4, RankVar: "RANK", WorldVar: "WORLD_SIZE"}},
		{"Open MPI", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"},
			Place{Rank: 2, WorldSize: 3, RankVar: "OMPI_COMM_WORLD_RANK", WorldVar: "OMPI_COMM_WORLD_SIZE"}},
		{"MPICH", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "1"},
			Place{Rank: 0, WorldSize: 1, RankVar: "PMI_RANK", WorldVar: "PMI_SIZE"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ok, err := PlaceFromEnv(lookupIn(c.vars))
			require.NoError(t, err)
			require.True(t, ok, "no place found")
			assert.Equal(t, c.want, p)
		})
	}
	_, ok, err := PlaceFromEnv(lookupIn(map[string]string{"LOCAL_RANK": "0", "MASTER_ADDR": "x"}))
	assert.NoError(t, err, "no rank variable")
	assert.False(t, ok, "no rank variable")
	assert.Equal(t, "SLURM_PROCID=1 of SLURM_NTASKS=2", Place{1, 2, "SLURM_PROCID", "SLURM_NTASKS"}.String())
}

func TestPlaceFromEnvErrorsNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"RANK": "0"}, "launch: RANK is set but WORLD_SIZE is not"},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "2"}, "launch: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"},
		{map[string]string{"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, `launch: SLURM_PROCID="x" is not a non-negative integer`},
		{map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, "launch: RANK=2 is out of range for WORLD_SIZE=2"},
		{map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}, "launch: PMI_RANK=0 is out of range for PMI_SIZE=0"},
	} {
		_, ok, err := PlaceFromEnv(lookupIn(c.vars))
		assert.EqualError(t, err, c.want, "%v", c.vars)
		assert.False(t, ok, "%v", c.vars)
	}
}
