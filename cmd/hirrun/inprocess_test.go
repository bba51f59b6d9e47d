package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// launcherEnv makes vars the only launcher variables of this test's
// environment (the test's own are put back after it).
func launcherEnv(t *testing.T, vars map[string]string) {
	for _, name := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
		"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"} {
		t.Setenv(name, "")
		require.NoError(t, os.Unsetenv(name))
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// Under a launcher, --backend sim runs the whole program in rank 0's
// process, printing what a plain run prints, and every other rank exits
// 0 with one line on stderr.
func TestSimUnderALauncherRunsOnRankZero(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	args := []string{"run", prog, "--input", "x=random:seed=3"}
	launcherEnv(t, nil)
	plain := hirrun(args...)
	expectCode(t, plain, exitOK)
	require.Contains(t, plain.stdout, "rank 1: %y", "a plain run prints every rank")
	require.Empty(t, plain.stderr, "a plain run")

	for _, c := range []struct {
		name   string
		vars   map[string]string
		stdout string
		stderr string
	}{
		{"torchrun rank 0", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, plain.stdout,
			"hirrun: run: RANK=0 of WORLD_SIZE=2: --backend sim runs every rank of the program in this process; the launcher's other process exits at once (--backend cuda runs a rank per process)\n"},
		{"torchrun rank 1", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "",
			"hirrun: run: RANK=1 of WORLD_SIZE=2: --backend sim runs every rank of the program in one process, rank 0's; this one exits (--backend cuda runs a rank per process)\n"},
		{"srun task 0 of 4", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, plain.stdout,
			"hirrun: run: SLURM_PROCID=0 of SLURM_NTASKS=4: --backend sim runs every rank of the program in this process; the launcher's 3 other processes exit at once (--backend cuda runs a rank per process)\n"},
		{"mpirun rank 3", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, "",
			"hirrun: run: OMPI_COMM_WORLD_RANK=3 of OMPI_COMM_WORLD_SIZE=4: --backend sim runs every rank of the program in one process, rank 0's; this one exits (--backend cuda runs a rank per process)\n"},
		{"a world of one", map[string]string{"RANK": "0", "WORLD_SIZE": "1"}, plain.stdout, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			launcherEnv(t, c.vars)
			r := hirrun(args...)
			expectCode(t, r, exitOK)
			assert.Equal(t, c.stdout, r.stdout, "stdout")
			assert.Equal(t, c.stderr, r.stderr, "stderr")
		})
	}
}

// Only rank 0 writes --output files: the others do not even read inputs.
func TestSimUnderALauncherWritesOutputsOnce(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	dir := t.TempDir()
	for _, rank := range []string{"1", "0"} {
		out := filepath.Join(dir, "y"+rank+".npy")
		launcherEnv(t, map[string]string{"RANK": rank, "WORLD_SIZE": "2"})
		r := hirrun("run", prog, "--input", "x=random", "--output", "y="+out)
		expectCode(t, r, exitOK)
		_, err := os.Stat(out)
		if rank == "0" {
			assert.NoError(t, err, "rank 0 wrote no output file")
		} else {
			assert.ErrorIs(t, err, os.ErrNotExist, "rank 1 wrote an output file")
		}
	}
}

func TestSimUnderAMalformedLauncherSaysWhich(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"RANK": "0"}, "hirrun: run: launch: RANK is set but WORLD_SIZE is not\n"},
		{map[string]string{"SLURM_PROCID": "one", "SLURM_NTASKS": "2"}, "hirrun: run: launch: SLURM_PROCID=\"one\" is not a non-negative integer\n"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}, "hirrun: run: launch: OMPI_COMM_WORLD_RANK=4 is out of range for OMPI_COMM_WORLD_SIZE=4\n"},
	} {
		launcherEnv(t, c.vars)
		r := hirrun("run", prog, "--input", "x=random")
		expectCode(t, r, exitUsage)
		assert.Equal(t, c.want, r.stderr, "%v", c.vars)
		assert.Empty(t, r.stdout, "%v", c.vars)
	}
}
