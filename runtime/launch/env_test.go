package launch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lookupIn(vars map[string]string) lookupFunc {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		want Env
	}{
		{
			name: "hirrun",
			vars: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
				"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41000", "HIR_STORE_TOKEN": "secret", "HIR_LAUNCHED": "1"},
			want: Env{Source: SourceHirrun, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				MasterAddr: "127.0.0.1", MasterPort: 41000, StoreAddr: "127.0.0.1:41000", Token: "secret"},
		},
		{
			// torchrun's agent store holds MASTER_PORT: rank 0 serves on the next.
			name: "torchrun rank 0",
			vars: map[string]string{"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
				"MASTER_ADDR": "node1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job7", "HIR_STORE_TOKEN": "t"},
			want: Env{Source: SourceTorchrun, Rank: 0, WorldSize: 8, LocalRank: 0, LocalWorldSize: 4,
				MasterAddr: "node1", MasterPort: 29500, StoreAddr: "node1:29501", ServeStore: true, Token: "t"},
		},
		{
			name: "by hand, store address given, token derived",
			vars: map[string]string{"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "::1", "MASTER_PORT": "29500",
				"HIR_STORE_ADDR": "[::1]:30000"},
			want: Env{Source: SourceEnv, Rank: 3, WorldSize: 4, LocalRank: 3,
				MasterAddr: "::1", MasterPort: 29500, StoreAddr: "[::1]:30000", TokenDerived: true},
		},
		{
			name: "srun on one node",
			vars: map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "2",
				"SLURM_NTASKS_PER_NODE": "4", "SLURM_NNODES": "1", "SLURM_JOB_ID": "123456"},
			want: Env{Source: SourceSlurm, Rank: 2, WorldSize: 4, LocalRank: 2, LocalWorldSize: 4,
				MasterAddr: "127.0.0.1", MasterPort: 20000 + 123456%20000, StoreAddr: "127.0.0.1:23457", TokenDerived: true},
		},
		{
			// RANK wins over srun's variables: hirrun --nproc inside an allocation.
			name: "torch variables over slurm",
			vars: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "RANK": "1", "WORLD_SIZE": "2",
				"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "5000", "HIR_STORE_TOKEN": "t", "HIR_LAUNCHED": "1"},
			want: Env{Source: SourceHirrun, Rank: 1, WorldSize: 2, LocalRank: 1,
				MasterAddr: "127.0.0.1", MasterPort: 5000, StoreAddr: "127.0.0.1:5000", Token: "t"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := fromLookup(lookupIn(c.vars))
			require.NoError(t, err, "fromLookup")
			require.True(t, ok, "fromLookup")
			if c.want.TokenDerived {
				assert.Len(t, got.Token, 64, "derived token is not 64 hex digits")
			}
			assert.Empty(t, cmp.Diff(c.want, got, cmpopts.IgnoreFields(Env{}, derivedTokenField(c.want)...)), "(-want +got)")
		})
	}
}

func derivedTokenField(e Env) []string {
	if e.TokenDerived {
		return []string{"Token"}
	}
	return nil
}

// Every rank of a job derives the same token; another job derives another.
func TestDerivedTokenIsPerJob(t *testing.T) {
	job := func(rank, id string) string {
		e, _, err := fromLookup(lookupIn(map[string]string{"SLURM_PROCID": rank, "SLURM_NTASKS": "2", "SLURM_JOB_ID": id}))
		require.NoError(t, err)
		return e.Token
	}
	assert.Equal(t, job("0", "11"), job("1", "11"), "ranks of one job derived different tokens")
	assert.NotEqual(t, job("0", "11"), job("0", "12"), "two jobs derived the same token")
}

func TestFromEnvNotLaunched(t *testing.T) {
	_, ok, err := fromLookup(lookupIn(map[string]string{"HOME": "/root"}))
	assert.False(t, ok, "no launcher variables")
	assert.NoError(t, err, "no launcher variables")
}

func TestFromEnvErrors(t *testing.T) {
	good := map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range good {
			out[k] = v
		}
		for k, v := range changes {
			if v == "<unset>" {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{with(map[string]string{"RANK": "one"}), `launch: RANK="one" is not a non-negative integer`},
		{with(map[string]string{"RANK": "-1"}), `launch: RANK="-1" is not a non-negative integer`},
		{with(map[string]string{"RANK": " 1"}), `launch: RANK=" 1" is not a non-negative integer`},
		{with(map[string]string{"RANK": "2"}), `launch: RANK=2 is out of range for WORLD_SIZE=2`},
		{with(map[string]string{"WORLD_SIZE": "0"}), `launch: WORLD_SIZE=0: the world size must be at least 1`},
		{with(map[string]string{"WORLD_SIZE": "<unset>"}), `launch: RANK is set but WORLD_SIZE is not`},
		{with(map[string]string{"RANK": "<unset>"}), `launch: WORLD_SIZE is set but RANK is not`},
		{with(map[string]string{"LOCAL_RANK": "x"}), `launch: LOCAL_RANK="x" is not a non-negative integer`},
		{with(map[string]string{"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "1"}), `launch: LOCAL_RANK=1 is out of range for this node's ranks`},
		{with(map[string]string{"MASTER_ADDR": "<unset>"}), `launch: MASTER_ADDR is not set (RANK is 0 of 2)`},
		{with(map[string]string{"MASTER_PORT": "<unset>"}), `launch: MASTER_PORT is not set (RANK is 0 of 2)`},
		{with(map[string]string{"MASTER_PORT": "70000"}), `launch: MASTER_PORT="70000" is not a TCP port (1 to 65535)`},
		{with(map[string]string{"MASTER_PORT": "65535"}), `launch: MASTER_PORT=65535 leaves no port for the store (it uses MASTER_PORT+1); set HIR_STORE_ADDR`},
		{with(map[string]string{"HIR_STORE_ADDR": "nohost"}), `launch: HIR_STORE_ADDR="nohost" is not host:port`},
		{with(map[string]string{"HIR_LAUNCHED": "1"}), `launch: HIR_STORE_TOKEN is empty or not set in a rank that hirrun started`},
		{map[string]string{"HIR_LAUNCHED": "1"}, `launch: RANK is not set, but other launcher variables are`},
		{map[string]string{"SLURM_PROCID": "0"}, `launch: SLURM_PROCID is set but SLURM_NTASKS is not`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "SLURM_JOB_ID": "1"},
			`launch: MASTER_ADDR is not set, and this srun job spans 2 nodes: set it to the first node's host name, e.g. MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, `launch: MASTER_PORT is not set, and there is no SLURM_JOB_ID to derive one from`},
	} {
		_, ok, err := fromLookup(lookupIn(c.vars))
		assert.EqualError(t, err, c.want, "%v", c.vars)
		assert.False(t, ok, "%v", c.vars)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "launch: "), "error without the package prefix: %v", err)
		}
	}
}

// TestEmptyVariablesAreUnset: RANK= and WORLD_SIZE= with nothing in them,
// as job scripts export them, mean no launcher, not a malformed rank.
func TestEmptyVariablesAreUnset(t *testing.T) {
	t.Setenv(EnvRank, "")
	t.Setenv(EnvWorldSize, "")
	_, ok, err := FromEnv()
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = PlaceFromEnv(LookupSet)
	require.NoError(t, err)
	require.False(t, ok)
	t.Setenv(EnvRank, "1")
	_, _, err = PlaceFromEnv(LookupSet)
	require.ErrorContains(t, err, "WORLD_SIZE")
}
