package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// TestWriteIntoDestinationProducesIt: an op that writes into a destination
// it is given (here a matmul into a view) becomes that value's producer, so
// a later use of the same value on another stream waits for the write, not
// only for the select that made the view. Before, the copy on %s read %v
// as it was before the matmul (zeros, or part of the product): a read of
// a view after a write into it raced (tp.RingAccumulate's first build).
func TestWriteIntoDestinationProducesIt(t *testing.T) {
	src := `mesh 1
input %a : f32[192, 192]
input %w : f32[192, 192]
%s = stream
%buf = alloc : f32[2, 192, 192]
%v = select %buf, 1
%p = matmul %a, %w, %v accumulate=true
set_stream %s
%c = copy %v
set_stream
output %c, %p
`
	prog, err := parser.Parse("dest.hir", []byte(src))
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	for run := range 10 {
		a := host.Random(ir.F32, []int64{192, 192}, uint64(2*run+1))
		w := host.Random(ir.F32, []int64{192, 192}, uint64(2*run+2))
		res, err := j.Run(map[string]*host.Array{"a": a, "w": w})
		require.NoError(t, err)
		c, p := res.Ranks[0].Outputs["c"], res.Ranks[0].Outputs["p"]
		require.Equal(t, p.Data, c.Data, "run %d: the copy on another stream read the view before the matmul wrote it", run)
	}
}
