package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// A matmul given a destination writes its product into that view (a
// chunk of every block: strided) and nowhere else, as a matmul followed
// by a copy into the view does; the result is the destination.
func TestMatmulIntoDestination(t *testing.T) {
	const src = `mesh 1
input %a : f32[2, 3, 5]
input %w : f32[5, 4]
%out = alloc : f32[2, 4, 3, 4]
%d = select %out, 2 axis=1
%y = matmul %a, %w, %d
%z = matmul %a, %w
%c = select %out, 1 axis=1
%e = copy %z, %c
%r = relu %y
output %out, %r
`
	_, _, j := simJob(t, "dest.hir", src, runtime.Config{}, sim.Options{})
	a, w := host.Random(ir.F32, shape(2, 3, 5), 1), host.Random(ir.F32, shape(5, 4), 2)
	res, err := j.Run(map[string]*host.Array{"a": a, "w": w})
	require.NoError(t, err)
	out, r := floats(res.Ranks[0].Outputs["out"]), floats(res.Ranks[0].Outputs["r"])
	at := func(blk, chunk, i, k int) float64 { return out[((blk*4+chunk)*3+i)*4+k] }
	for blk := range 2 {
		for i := range 3 {
			for k := range 4 {
				want := 0.0
				for l := range 5 {
					want += a.At(int64((blk*3+i)*5+l)) * w.At(int64(l*4+k))
				}
				require.InDelta(t, want, at(blk, 2, i, k), 1e-5, "into the destination [%d, %d, %d]", blk, i, k)
				require.Equal(t, at(blk, 1, i, k), at(blk, 2, i, k), "matmul into a view = matmul then copy, [%d, %d, %d]", blk, i, k)
				require.Zero(t, at(blk, 0, i, k), "chunk 0 untouched")
				require.Zero(t, at(blk, 3, i, k), "chunk 3 untouched")
				require.Equal(t, max(at(blk, 2, i, k), 0), r[(blk*3+i)*4+k], "the result is the destination")
			}
		}
	}
}
