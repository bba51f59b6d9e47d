package evaluator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// TestRunsReuseEveryBuffer: a program run again allocates nothing new, also
// symmetric buffers (whose Size() is rounded up past what was asked) and
// several outputs of one size (returned to the pool in a fixed order).
func TestRunsReuseEveryBuffer(t *testing.T) {
	src := `
mesh 2
input %x : f32[2/DIDx, 3]
%a = neg %x : f32[2/DIDx, 3] symmetric
%b = exp %x : f32[2/DIDx, 3] symmetric
%c = abs %x
%d = relu %x
output %a, %b, %c, %d
`
	prog, err := parser.Parse("reuse.hir", []byte(src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: 2})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	in := map[string]*host.Array{"x": host.Random(ir.F32, shape(2, 3), 1)}
	_, err = j.Run(in)
	require.NoError(t, err)
	live := rt.LiveBuffers()
	for range 3 {
		_, err = j.Run(in)
		require.NoError(t, err)
		require.Equal(t, live, rt.LiveBuffers(), "a later Run allocated new buffers")
	}
	require.NoError(t, j.Close())
	require.Equal(t, 0, rt.LiveBuffers())
}
