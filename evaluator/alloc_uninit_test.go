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
// back holding the last Run's values, and is poisoned again). Here %f and
// %i are written in their first row only (a tensor nothing writes is a
// checker error, passes/uninit.go).
func TestAllocUninitIsPoisonedOnTheCPURuntime(t *testing.T) {
	const src = `mesh 2
input %x : f32[4/DIDx, 3]
%buf = alloc uninit=true : f32[4/DIDx, 3] symmetric
%y = copy %x, %buf
%g = all_gather %y : f32[4, 3] symmetric
%x0 = select %g, 0 axis=0
%f = alloc uninit=true : f32[2, 3]
%f0 = select %f, 0 axis=0
%c = copy %x0, %f0
%i = alloc uninit=true : i32[2, 3]
%i0 = select %i, 0 axis=0
%n = cast %x0 dtype=i32
%d = copy %n, %i0
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
				f, i := floats(r.Outputs["f"]), floats(r.Outputs["i"])
				for e := range 3 {
					x0 := x.At(int64(e)) // row 0 of x, gathered
					require.Equal(t, x0, f[e], "graph %v run %d rank %d: written f32 [0, %d]", graph, run, rank, e)
					require.True(t, math.IsNaN(f[3+e]), "graph %v run %d rank %d: unwritten f32 [1, %d] is NaN, got %v", graph, run, rank, e, f[3+e])
					require.Equal(t, math.Trunc(x0), i[e], "graph %v run %d rank %d: written i32 [0, %d]", graph, run, rank, e)
					require.Equal(t, -1.0, i[3+e], "graph %v run %d rank %d: unwritten i32 [1, %d]", graph, run, rank, e)
				}
				for e, v := range floats(r.Outputs["z"]) {
					require.Zero(t, v, "graph %v run %d rank %d: a plain alloc is zero-filled [%d]", graph, run, rank, e)
				}
			}
		}
	}
}
