package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// TestTraceGPUTimesOnGPU: with Trace on the cuda runtime, each compute op
// and copy has a time on its stream from CUDA events (cuEventElapsedTime),
// starting no earlier than its host slice and no longer than it.
func TestTraceGPUTimesOnGPU(t *testing.T) {
	needGPU(t)
	const src = `mesh 1
input %x : f32[1024, 1024]
input %w : f32[1024, 1024]
%y = matmul %x, %w
%z = gelu %y
%c = copy %z
output %c
`
	prog, err := parser.Parse("trace.hir", []byte(src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt := openSingleRuntime(t)
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{Trace: true})
	require.NoError(t, err)
	defer job.Close()
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{1024, 1024}, 1), "w": host.Random(ir.F32, []int64{1024, 1024}, 2)}
	var res *evaluator.Result
	for range 2 { // the second Run: kernels compiled, times the work's own
		res, err = job.Run(in)
		require.NoError(t, err)
	}
	timed := 0
	for _, ev := range res.Ranks[0].Stats.Trace {
		if ev.Op != "matmul" && ev.Op != "gelu" && ev.Op != "copy" {
			continue
		}
		timed++
		assert.Positive(t, ev.GPUDur, "%s has no GPU time", ev.Op)
		assert.GreaterOrEqual(t, ev.GPUStart, ev.Start, "%s: GPU start before the host's", ev.Op)
		assert.LessOrEqual(t, ev.GPUDur, ev.Dur, "%s: GPU time longer than the host's slice", ev.Op)
		t.Logf("%s: host %d ns, GPU %d ns", ev.Op, ev.Dur, ev.GPUDur)
	}
	assert.Equal(t, 3, timed, "traced compute ops")
}
