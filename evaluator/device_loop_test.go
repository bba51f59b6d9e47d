package evaluator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
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

// oldDriver is a runtime whose devices capture graphs but cannot repeat
// a loop on the device (as cuda on a driver before CUDA 12.4).
type oldDriver struct{ runtime.Runtime }

type noLoops struct{ *sim.Device }

func (noLoops) LoopSupport() error { return errors.New("the driver has no conditional graph nodes") }

func (o oldDriver) Device(rank int) (runtime.Device, error) {
	d, err := o.Runtime.Device(rank)
	if err != nil {
		return nil, err
	}
	return noLoops{d.(*sim.Device)}, nil
}

// TestDeviceLoopUnsupported: a program with a device loop, on a device
// that cannot repeat loops, is refused in graph mode at NewJob, naming
// the loop and why, before any Run; eagerly it runs.
func TestDeviceLoopUnsupported(t *testing.T) {
	prog, err := parser.Parse("tiny.hir", []byte(deviceLoops["tiny"].src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	inner, err := sim.New(runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	defer inner.Close()
	_, err = evaluator.NewJob(prog, oldDriver{inner}, evaluator.Options{Graph: true})
	require.EqualError(t, err, "tiny.hir:4:1: this loop runs on the device in graph mode, which this device cannot do: the driver has no conditional graph nodes; run without graph mode")
	j, err := evaluator.NewJob(prog, oldDriver{inner}, evaluator.Options{})
	require.NoError(t, err)
	_, err = j.Run(freshInputs(prog, 1))
	require.NoError(t, err)
	require.NoError(t, j.Close())
}
