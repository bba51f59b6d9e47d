package evaluator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
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
				require.Equal(t, -shard.At(i), got.At(i), "run %d, rank %d, element %d (the stream ran before the input was bound)", run, rr.Rank, i)
			}
		}
	}
}

// TestStatsDoesNotDeadlockARingShift: with Stats every op is waited for,
// but a send waits for its peer's recv, which the peer enqueues only after
// its own send: waiting for sends and recvs would deadlock the ring shift
// below (sends on a second stream), which runs fine without Stats.
func TestStatsDoesNotDeadlockARingShift(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(3))
	x := b.Input("x", ir.Tensor(ir.I64, 3, 4).Sharded(0))
	s := b.Op(ir.OpStream).Name("s").Value()
	b.Op(ir.OpSetStream, s)
	b.Op(ir.OpSend, x).Peer(1, true)
	b.Op(ir.OpSetStream)
	y := b.Op(ir.OpRecv).Peer(-1, true).Name("y").Type(ir.Tensor(ir.I64, 3, 4).Sharded(0)).Value()
	b.Op(ir.OpSyncStream, s)
	b.Output(y)
	prog, err := b.Program()
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	// A short timeout, so a deadlock fails in seconds.
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 3, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{Stats: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer j.Close()

	in := host.Random(ir.I64, shape(3, 4), 1)
	res, err := j.Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	for _, rr := range res.Ranks {
		left, err := in.Shard(0, (rr.Rank+2)%3, 3)
		require.NoError(t, err)
		require.Equal(t, left.Data, rr.Outputs["y"].Data, "rank %d holds its left neighbour's shard", rr.Rank)
		var ops []string
		for _, st := range rr.Stats.Ops {
			ops = append(ops, st.Op)
		}
		require.Contains(t, ops, "send", "send is still timed")
	}
}
