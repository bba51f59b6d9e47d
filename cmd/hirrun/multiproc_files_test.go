package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
)

// --output FILE.npz and --expect on a multi-process job (simproc, see
// multiproc_test.go): rank 0 gathers the shards, saves and compares them
// as one process does.
func TestMultiProcessOutputArchiveAndExpect(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	prog := writeProgram(t, "p.hir", threeRankSrc)
	dir := t.TempDir()
	common := []string{"run", prog, "--input", "x=random:seed=3", "--input", "w=random:seed=4"}
	simAll, procAll := filepath.Join(dir, "sim.npz"), filepath.Join(dir, "proc.npz")
	expectCode(t, hirrun(append(common, "--output", simAll)...), exitOK)
	expectCode(t, hirrun(append(common, "--backend", "simproc", "--output", procAll)...), exitOK)
	simBytes, err := os.ReadFile(simAll)
	require.NoError(t, err)
	procBytes, err := os.ReadFile(procAll)
	require.NoError(t, err)
	assert.Equal(t, simBytes, procBytes, "--output FILE.npz of three processes (actual) and of sim (expected)")

	// Both outputs compared, %y sharded over the three ranks.
	sim := hirrun(append(common, "--expect", simAll)...)
	expectCode(t, sim, exitOK)
	proc := hirrun(append(common, "--backend", "simproc", "--expect", simAll)...)
	expectCode(t, proc, exitOK)
	assert.Len(t, checkLines(proc.stdout), 2, "a check per output:\n%s", proc.stdout)
	assert.Equal(t, sim.stdout, proc.stdout, "sim (expected) and three processes (actual)")

	// A mismatch on rank 2's shard: rank 0 reports it and the job's
	// status is 1.
	z, err := host.OpenNPZ(simAll)
	require.NoError(t, err)
	y, err := z.Read("y")
	require.NoError(t, err)
	z.Close()
	bad := y.Array.Clone()
	bad.Set(11, bad.At(11)+1) // [5, 1]: rank 2's second row
	badRef := filepath.Join(dir, "bad.npy")
	require.NoError(t, bad.WriteNPYFile(badRef))
	r := hirrun(append(common, "--backend", "simproc", "--expect", "y="+badRef)...)
	expectCode(t, r, exitFail)
	lines := checkLines(r.stdout)
	require.Len(t, lines, 1, "stdout:\n%s", r.stdout)
	assert.Contains(t, lines[0], "MISMATCH, 1 of 12 elements differ (rtol 1.3e-06, atol 1e-05); the first at [5, 1]")
	expectContains(t, "stderr", r.stderr, "[rank 0] hirrun: run: 1 of 1 --expect check failed: %y", "rank 0 exited with status 1")

	// A bad path stops the job before any rank starts: one message, from
	// the launching hirrun.
	r = hirrun(append(common, "--backend", "simproc", "--output", "y="+filepath.Join(dir, "no", "y.npy"))...)
	expectCode(t, r, exitUsage)
	assert.Equal(t, "hirrun: run: --output y="+filepath.Join(dir, "no", "y.npy")+": the directory "+filepath.Join(dir, "no")+" does not exist\n", r.stderr)
	assert.Empty(t, r.stdout)
}
