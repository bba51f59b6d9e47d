package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// A loop of one-sided transfers on a ring, with a compute op on each side
// of every register and deregister and a barrier: graph mode splits the
// program at each op that waits on the host (3 per trip, 1 after the loop).
const transferLoop = `mesh 4
input %x : f32[4/DIDx, 3] symmetric
%acc = alloc : f32[4/DIDx, 3]
for %i = 0 to 3 {
  %y = mul %x, 2.0 : f32[4/DIDx, 3] symmetric
  %h = register %y
  %left = alloc : f32[4/DIDx, 3]
  %r = transfer %h, %left dir=read peer=+1
  wait %r
  deregister %h
  %s = add %left, 1.5
  %a = add %acc, %s
  %c = copy %a, %acc
  barrier
}
output %acc
`

// TestGraphSplitsAtHostWaits: transfers in graph mode equal the eager run
// over 50 Runs with fresh inputs (a registration whose peers' meeting went
// stale, or a transfer replayed before its peer's tensor was written,
// would differ), the program is split into one graph more than the ops
// that wait on the host, and closing the job leaves no graph, buffer or
// registration behind.
func TestGraphSplitsAtHostWaits(t *testing.T) {
	prog, err := parser.Parse("ring.hir", []byte(transferLoop))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	require.Len(t, ir.GraphSplits(prog), 3, "register, deregister, barrier")
	eagerRT, err := sim.New(runtime.Config{WorldSize: 4})
	require.NoError(t, err)
	defer eagerRT.Close()
	graphRT, err := sim.New(runtime.Config{WorldSize: 4})
	require.NoError(t, err)
	defer graphRT.Close()
	eager, err := evaluator.NewJob(prog, eagerRT, evaluator.Options{})
	require.NoError(t, err)
	graph, err := evaluator.NewJob(prog, graphRT, evaluator.Options{Graph: true})
	require.NoError(t, err)
	for run := range 50 {
		in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{4, 3}, uint64(run+1))}
		want, err := eager.Run(in)
		require.NoError(t, err)
		got, err := graph.Run(in)
		require.NoError(t, err, "run %d", run)
		for i := range want.Ranks {
			require.Equal(t, want.Ranks[i].Outputs["acc"].Data, got.Ranks[i].Outputs["acc"].Data, "run %d rank %d", run, i)
			if run > 0 {
				require.Equal(t, 3*3+1, got.Ranks[i].Stats.Graphs, "rank %d: graphs (3 splits a trip, 3 trips)", i)
			}
		}
	}
	require.NoError(t, eager.Close())
	require.NoError(t, graph.Close())
	require.Zero(t, graphRT.LiveGraphs(), "graphs left after Close")
	require.Zero(t, graphRT.LiveBuffers(), "buffers left after Close")
}
