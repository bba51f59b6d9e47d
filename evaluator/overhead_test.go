package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// addChain is BenchmarkOverheadPerOp's program with n unfused adds: a job
// on the CPU runtime and its input.
func addChain(t testing.TB, n int) (*evaluator.Job, map[string]*host.Array) {
	return addChainWith(t, n, evaluator.Options{})
}

// addChainWith is addChain's job with opts.
func addChainWith(t testing.TB, n int, opts evaluator.Options) (*evaluator.Job, map[string]*host.Array) {
	bd := ir.NewBuilder(ir.LinearMesh(1))
	x := bd.Input("x", ir.Tensor(ir.F32, 4))
	v := x
	for i := 0; i < n; i++ {
		v = bd.Binary(ir.OpAdd, v, x)
	}
	bd.Output(v)
	prog, err := bd.Program()
	require.NoError(t, err)
	for _, p := range passes.Pipeline() {
		if p.Name == "fuse" {
			continue
		}
		require.NoError(t, p.Run(prog, &passes.Context{}))
	}
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	j, err := evaluator.NewJob(prog, rt, opts)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	return j, map[string]*host.Array{"x": host.Random(ir.F32, shape(4), 1)}
}

// TestRunAllocatesNothingPerOp: once warm (kernels compiled, buffers
// pooled), a Run allocates a fixed amount (its result, its goroutine, the
// output's host copy), the same for 50 ops as for 450: the evaluator and
// the CPU runtime allocate nothing per op.
func TestRunAllocatesNothingPerOp(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations over several runs")
	}
	allocs := func(n int) float64 {
		j, in := addChain(t, n)
		for i := 0; i < 3; i++ { // warm up
			_, err := j.Run(in)
			require.NoError(t, err)
		}
		// the first error is asserted after the count, outside the
		// measured function
		var runErr error
		avg := testing.AllocsPerRun(20, func() {
			if _, err := j.Run(in); err != nil && runErr == nil {
				runErr = err
			}
		})
		require.NoError(t, runErr)
		return avg
	}
	small, large := allocs(50), allocs(450)
	perOp := (large - small) / (2 * 400) // an add and a free per link
	t.Logf("allocations per Run: %.0f with 100 IR ops, %.0f with 900: %.3f per op", small, large, perOp)
	require.Less(t, perOp, 0.05, "allocations per IR op in the steady state")
}
