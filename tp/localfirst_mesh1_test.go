package tp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/tp"
)

// TestLocalFirstOneRank: on a mesh of one rank LocalFirst has no peer to
// fetch from (its stream gets no work) and is the matmul alone.
func TestLocalFirstOneRank(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := b.Input("x", ir.Tensor(ir.F32, 4, 3).Sharded(0).In(ir.Symmetric))
	w := b.Input("w", ir.Tensor(ir.F32, 3, 5))
	for _, d := range []tp.Decomposition{tp.Unpipelined, tp.LocalFirst} {
		y, err := tp.AllGatherMatmul(b, x, w, tp.Options{Decomposition: d})
		require.NoError(t, err)
		y.Name = d.String()
		b.Output(y)
	}
	prog, err := b.Program()
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer job.Close()
	res, err := job.Run(map[string]*host.Array{
		"x": host.Random(ir.F32, []int64{4, 3}, 1),
		"w": host.Random(ir.F32, []int64{3, 5}, 2),
	})
	require.NoError(t, err)
	out := res.Ranks[0].Outputs
	require.Equal(t, out[tp.Unpipelined.String()].Data, out[tp.LocalFirst.String()].Data)
}
