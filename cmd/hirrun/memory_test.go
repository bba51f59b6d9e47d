package main

import (
	"testing"

	"github.com/hirlab/hir/runtime/sim"
)

// An input far past the machine is refused before its host array is made
// (once: a Go out-of-memory crash making 14.55 TiB of random values).
func TestHugeInputIsAClearErrorBeforeAnyAllocation(t *testing.T) {
	path := writeProgram(t, "big.hir", "mesh 2\ninput %x : f32[4000000000, 1000]\n%y = add %x, 1.0\noutput %y\n")
	expectCode(t, hirrun("check", path), exitOK)
	t.Setenv(sim.MemoryLimitEnv, "1GiB")
	r := hirrun("run", path, "--input", "x=random:seed=1")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr,
		"out of memory: 14.55 TiB for the inputs (%x: 14.55 TiB) does not fit: the host has a 1.00 GiB limit (set HIR_SIM_MEMORY_LIMIT to change the limit)")
}

// Inputs that fit the host but not beside their device copies: the CPU
// runtime counts the host arrays in its budget, so the run fails with the
// budget's error, naming the limit.
func TestInputsCountInTheCPURuntimeBudget(t *testing.T) {
	path := writeProgram(t, "mid.hir", "mesh 2\ninput %x : f32[1024, 256]\n%y = add %x, 1.0\noutput %y\n")
	t.Setenv(sim.MemoryLimitEnv, "2MiB") // the 1 MiB input, then a 1 MiB copy per rank
	r := hirrun("run", path, "--input", "x=random:seed=1")
	expectCode(t, r, exitFail)
	expectContains(t, "stderr", r.stderr, "out of memory: 1.00 MiB for alloc in global memory does not fit: the CPU runtime has 0 bytes free of its 2.00 MiB limit")
	t.Setenv(sim.MemoryLimitEnv, "32MiB")
	expectCode(t, hirrun("run", path, "--input", "x=random:seed=1"), exitOK)
}
