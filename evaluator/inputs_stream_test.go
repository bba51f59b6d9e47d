package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// TestInputsVisibleOnEveryStream: a program may use an input first on a
// stream of its own (sends of a ring shift go on a second stream, for
// instance). The inputs are bound before the first op runs (SEMANTICS.md),
// so that stream must see this Run's values, not the last Run's or zeros.
func TestInputsVisibleOnEveryStream(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 256, 64).Sharded(0))
	s := b.Op(ir.OpStream).Name("s").Value()
	b.Op(ir.OpSetStream, s)
	y := b.Op(ir.OpNeg, x).Name("y").Value()
	b.Op(ir.OpSyncStream, s)
	b.Op(ir.OpSetStream)
	b.Output(y)
	prog, err := b.Program()
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})

	for run := uint64(1); run <= 20; run++ {
		in := host.Random(ir.F32, shape(256, 64), run)
		res, err := j.Run(map[string]*host.Array{"x": in})
		require.NoError(t, err)
		for _, rr := range res.Ranks {
			shard, err := in.Shard(0, rr.Rank, 2)
			require.NoError(t, err)
			got := rr.Outputs["y"]
			for i := int64(0); i < shard.Len(); i++ {
				if got.At(i) != -shard.At(i) {
					t.Fatalf("run %d, rank %d, element %d: got %v, want %v (the stream ran before the input was bound)", run, rr.Rank, i, got.At(i), -shard.At(i))
				}
			}
		}
	}
}
