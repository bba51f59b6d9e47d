package evaluator_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// `alloc uninit=true` skips the zero-fill. On the CPU runtime the tensor
// holds all-one bits instead (NaN in floats, -1 in integers), so what a
// program reads before writing shows; what it writes is as with a plain
// alloc. Eager and graph mode alike, every Run (the pool's buffer comes
// back holding the last Run's values, and is poisoned again).
func TestAllocUninitIsPoisonedOnTheCPURuntime(t *testing.T) {
	const src = `mesh 2
input %x : f32[4/DIDx, 3]
%buf = alloc uninit=true : f32[4/DIDx, 3] symmetric
%y = copy %x, %buf
%g = all_gather %y : f32[4, 3] symmetric
%f = alloc uninit=true : f32[2, 2]
%i = alloc uninit=true : i32[3]
%z = alloc : f32[2, 2]
output %g, %f, %i, %z
`
	for _, graph := range []bool{false, true} {
		prog, err := parser.Parse("uninit.hir", []byte(src))
		require.NoError(t, err)
		j := job(t, prog, evaluator.Options{Graph: graph})
		x := host.Random(ir.F32, shape(4, 3), 7)
		for run := range 3 {
			res, err := j.Run(map[string]*host.Array{"x": x})
			require.NoError(t, err)
			for rank, r := range res.Ranks {
				g := floats(r.Outputs["g"])
				for e := range g {
					require.Equal(t, x.At(int64(e)), g[e], "graph %v run %d rank %d: the written buffer, gathered [%d]", graph, run, rank, e)
				}
				for e, v := range floats(r.Outputs["f"]) {
					require.True(t, math.IsNaN(v), "graph %v run %d rank %d: unwritten f32 [%d] is NaN, got %v", graph, run, rank, e, v)
				}
				for e, v := range floats(r.Outputs["i"]) {
					require.Equal(t, -1.0, v, "graph %v run %d rank %d: unwritten i32 [%d]", graph, run, rank, e)
				}
				for e, v := range floats(r.Outputs["z"]) {
					require.Zero(t, v, "graph %v run %d rank %d: a plain alloc is zero-filled [%d]", graph, run, rank, e)
				}
			}
		}
	}
}
