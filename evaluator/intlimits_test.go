package evaluator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// TestLoopsAtTheInt64Limits: a loop whose next index would overflow int64
// ends after its last trip (i += step used to wrap below `to` and loop
// forever), and runs its body with the exact indexes.
func TestLoopsAtTheInt64Limits(t *testing.T) {
	src := `mesh 2
input %ones : f32[4]
%m = alloc : f32[3, 4]
for %i = 1 to 9223372036854775807 step 9223372036854775807 {
  %r = select %m, %i
  %c = copy %ones, %r
}
for %j = 0 to 9223372036854775807 step 4611686018427387904 {
  %a = relu %ones
}
for %k = -9223372036854775808 to 9223372036854775807 step 9223372036854775807 {
  %b = neg %ones
}
for %l = 9223372036854775805 to 9223372036854775807 {
  %d = abs %ones
}
output %m
`
	prog, err := parser.Parse("t.hir", []byte(src))
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	ones := host.New(ir.F32, shape(4))
	for i := int64(0); i < 4; i++ {
		ones.Set(i, 1)
	}
	type result struct {
		res *evaluator.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := j.Run(map[string]*host.Array{"ones": ones})
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		for _, rr := range r.res.Ranks {
			// only row 1 was written: the first loop ran once, with i = 1
			require.Equal(t, []float64{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}, floats(rr.Outputs["m"]), "rank %d", rr.Rank)
		}
	case <-time.After(60 * time.Second):
		require.FailNow(t, "the loops did not end")
	}
}
