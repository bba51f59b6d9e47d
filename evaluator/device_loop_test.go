package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// deviceLoops are programs whose long loops graph mode captures once and
// has the device repeat (ir.IsDeviceLoop), with how many trips.
var deviceLoops = map[string]struct {
	src      string
	trips    uint64
	maxNodes int // in the graph: the body once, unrolled, and the trips left over
}{
	// A tiny op a trip, 100,000 trips: unrolled, the graph would hold
	// 100,000 kernels.
	"tiny": {`mesh 1
input %x : f32[16]
%acc = copy %x mem=global
for %i = 0 to 100000 {
  %y = mul %acc, 1.0001
  %c = copy %y, %acc
}
output %acc
`, 100000, 400},
	// Collectives and a nested loop in the body, a trip count the
	// unrolling does not divide, and a temporary freed every trip.
	"collectives": {`mesh 2
input %x : f32[2, 8]
%acc = copy %x mem=global
for %i = 0 to 997 {
  %s = all_reduce %acc algo=one_shot op=max
  %h = mul %s, 0.5
  %r = add %h, %x
  for %j = 0 to 2 {
    %t = add %r, 0.25
    %c = copy %t, %acc
  }
  free %r
}
output %acc
`, 997, 400},
	// A device loop in a long loop: device loops do not nest, so the outer
	// loop unrolls and each of its trips holds the inner one's node.
	"nested": {`mesh 1
input %x : f32[4]
%acc = copy %x mem=global
for %i = 0 to 120 {
  for %j = 0 to 300 {
    %y = mul %acc, 0.999
    %c = copy %y, %acc
  }
  %z = add %acc, 0.5
  %d = copy %z, %acc
}
output %acc
`, 300, 120 * 80},
}

// TestDeviceLoopsEqualEager: in graph mode each device loop equals its
// eager run bit for bit over several Runs with fresh inputs, and its graph
// holds the body once (a few dozen nodes), not a node per trip.
func TestDeviceLoopsEqualEager(t *testing.T) {
	for name, tc := range deviceLoops {
		t.Run(name, func(t *testing.T) {
			prog, err := parser.Parse(name+".hir", []byte(tc.src))
			require.NoError(t, err)
			require.NoError(t, passes.Lower(prog, &passes.Context{}))
			loops := ir.DeviceLoops(prog)
			require.Len(t, loops, 1, "device loops")
			assert.Empty(t, ir.CaptureBlockers(prog))
			eager := newJob(t, prog, evaluator.Options{})
			graph := newJob(t, prog, evaluator.Options{Graph: true})
			var res *evaluator.Result
			for run := range 4 {
				inputs := freshInputs(prog, uint64(run)*31+5)
				want, err := eager.Run(inputs)
				require.NoError(t, err, "eager run %d", run)
				res, err = graph.Run(inputs)
				require.NoError(t, err, "graph-mode run %d", run)
				for i := range want.Ranks {
					for out, w := range want.Ranks[i].Outputs {
						require.Equal(t, w.Data, res.Ranks[i].Outputs[out].Data, "run %d rank %d output %s", run, i, out)
					}
				}
			}
			for _, r := range res.Ranks {
				assert.Equal(t, 1, r.Stats.Graphs, "rank %d: graphs", r.Rank)
				assert.Positive(t, r.Stats.GraphNodes, "rank %d: graph nodes", r.Rank)
				assert.Less(t, r.Stats.GraphNodes, tc.maxNodes, "rank %d: graph nodes for %d trips (the body once, unrolled, and the trips left over)", r.Rank, tc.trips)
			}
		})
	}
}
