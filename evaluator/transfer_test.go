package evaluator_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

const ringTransfers = `
mesh 4
input %x : i64[4/DIDx, 3] symmetric
%h = register %x
%left = alloc : i64[4/DIDx, 3]
%r = transfer %h, %left dir=read peer=+1
wait %r
%box = alloc : i64[4/DIDx, 3] symmetric
%hb = register %box
%w = transfer %hb, %x dir=write peer=+1
wait %w
deregister %hb
deregister %h
%sum = add %left, %box
output %left, %box, %sum
`

// TestRingTransfers reads the right neighbour's shard and writes the own
// shard into the right neighbour's box; run three times over new inputs,
// the second and third runs reuse every registration and prepared handle.
func TestRingTransfers(t *testing.T) {
	prog, err := parser.Parse("ring.hir", []byte(ringTransfers))
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	const D = 4
	for run := range 3 {
		in := host.Random(ir.I64, shape(4, 3), uint64(run+1))
		res, err := j.Run(map[string]*host.Array{"x": in})
		require.NoError(t, err)
		for _, rr := range res.Ranks {
			r := rr.Rank
			next, prev := (r+1)%D, (r+D-1)%D
			for c := int64(0); c < 3; c++ {
				require.Equalf(t, in.AtInt(int64(next)*3+c), rr.Outputs["left"].AtInt(c), "run %d rank %d: read from rank %d", run, r, next)
				require.Equalf(t, in.AtInt(int64(prev)*3+c), rr.Outputs["box"].AtInt(c), "run %d rank %d: written by rank %d", run, r, prev)
			}
			// 2 registrations and 2 prepared transfers: missed once, then hit.
			require.Equal(t, int64(4), rr.Stats.HandleMisses, fmt.Sprintf("run %d rank %d", run, r))
			require.Equal(t, int64(4*run), rr.Stats.HandleHits, fmt.Sprintf("run %d rank %d", run, r))
		}
	}
}

// TestTransferInLoop registers and transfers inside a loop body; each
// iteration reads another rank's shard.
func TestTransferInLoop(t *testing.T) {
	src := `
mesh 3
input %x : f32[3/DIDx, 2] symmetric
%acc = alloc : f32[3/DIDx, 2]
for %i = 0 to 3 {
  %s = copy %x mem=symmetric
  %h = register %s
  %buf = alloc : f32[3/DIDx, 2]
  %t = transfer %h, %buf dir=read peer=+1
  wait %t
  deregister %h
  %n = add %buf, 1.0
  %a2 = copy %n, %acc
}
output %acc
`
	prog, err := parser.Parse("loop.hir", []byte(src))
	require.NoError(t, err)
	in := host.Random(ir.F32, shape(3, 2), 5)
	res, err := job(t, prog, evaluator.Options{}).Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	for _, rr := range res.Ranks {
		next := (rr.Rank + 1) % 3
		for c := int64(0); c < 2; c++ {
			require.Equal(t, float64(float32(in.At(int64(next)*2+c)+1)), rr.Outputs["acc"].At(c), "rank %d", rr.Rank)
		}
	}
}

// noOneSided is a backend whose devices lack runtime.OneSided: the
// program fails at its first register with the probe's reason.
type noOneSided struct{ runtime.Runtime }

type plainDevice struct{ runtime.Device }

func (n noOneSided) Device(rank int) (runtime.Device, error) {
	d, err := n.Runtime.Device(rank)
	return plainDevice{d}, err
}

func TestTransferUnavailable(t *testing.T) {
	prog, err := parser.Parse("ring.hir", []byte(ringTransfers))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	inner, err := runtime.Open("sim", runtime.Config{WorldSize: 4})
	require.NoError(t, err)
	defer inner.Close()
	rt := noOneSided{inner}
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	_, err = j.Run(map[string]*host.Array{"x": host.Random(ir.I64, shape(4, 3), 1)})
	require.Error(t, err)
	require.Contains(t, err.Error(), "ring.hir:4:6: rank 0: register: one-sided transfers are unavailable: the device (evaluator_test.plainDevice) does not implement runtime.OneSided (the sim backend)")
	require.NoError(t, j.Close())
}
