package evaluator_test

import (
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// TestManyJobsLeaveNothing: a framework embedding hir makes and closes
// jobs in one process again and again; 1,000 jobs with collectives on
// several streams leave no buffer, stream, graph or goroutine behind, and
// the last job runs as the first did (issue 20: on GPUs the fifth job of
// the overlap benchmark once stopped at "more than 16 streams").
func TestManyJobsLeaveNothing(t *testing.T) {
	prog, err := parser.ParseFile("testdata/many_jobs.hir")
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: 2, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rt.Close()
	inputs := map[string]*host.Array{"x": host.Random(prog.Inputs[0].Tensor().DType, prog.Inputs[0].Tensor().Shape(), 1)}
	runJob := func(graph bool) *evaluator.Result {
		job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: graph})
		require.NoError(t, err)
		res, err := job.Run(inputs)
		require.NoError(t, err)
		if graph {
			_, err = job.Run(inputs) // the replay
			require.NoError(t, err)
		}
		require.NoError(t, job.Close())
		return res
	}
	first := runJob(false)
	buffers, streams, graphs := rt.LiveBuffers(), rt.LiveStreams(), rt.LiveGraphs()
	goroutines := goruntime.NumGoroutine()
	for i := 0; i < 1000; i++ {
		res := runJob(i%10 == 9) // every tenth in graph mode
		if i == 999 {
			for _, name := range []string{"r", "y"} {
				want, err := first.Logical(prog, name)
				require.NoError(t, err)
				got, err := res.Logical(prog, name)
				require.NoError(t, err)
				require.Equal(t, want.Data, got.Data, "job 1000's %%%s", name)
			}
		}
	}
	require.Equal(t, buffers, rt.LiveBuffers(), "live buffers after 1,000 jobs")
	require.Equal(t, streams, rt.LiveStreams(), "open streams after 1,000 jobs")
	require.Equal(t, graphs, rt.LiveGraphs(), "live graphs after 1,000 jobs")
	// Goroutines end a moment after their stream closes: allow them that.
	deadline := time.Now().Add(2 * time.Second)
	for goruntime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, goruntime.NumGoroutine(), goroutines+2, "goroutines after 1,000 jobs")
}
