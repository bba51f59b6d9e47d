package evaluator_test

import (
	"testing"
	"time"

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

// TestCrossStreamFreesNeitherDeadlockNorLeak: the pool never makes a
// stream wait on another to reuse a buffer (here the recv's buffer would
// have waited for the send that the peer's recv completes: a deadlock), a
// value read on a second stream is not reused before that stream has read
// it, and what a Run frees across streams is reused by the next Run (also
// symmetric buffers, which stay matched across ranks).
func TestCrossStreamFreesNeitherDeadlockNorLeak(t *testing.T) {
	src := `
mesh 2
input %x : f32[4, 8]
%s = stream
for %i = 0 to 4 {
  %row = select %x, %i
  %c = mul %row, 2.0 : f32[8] symmetric
  set_stream %s
  send %c peer=+1
  %d = neg %c
  set_stream
  %r = recv peer=-1 : f32[8]
  %g = all_reduce %r algo=one_shot
}
%c0 = copy %x
set_stream %s
send %c0 peer=+1
set_stream
%y = recv peer=-1 : f32[4, 8]
sync_stream %s
output %y
`
	_, rt, j := simJob(t, "xs.hir", src, runtime.Config{Timeout: 5 * time.Second}, sim.Options{})
	x := host.Random(ir.F32, shape(4, 8), 1)
	in := map[string]*host.Array{"x": x}
	res, err := j.Run(in)
	require.NoError(t, err)
	require.NoError(t, host.Equal(x, res.Ranks[0].Outputs["y"]))
	// A global buffer freed across streams is reused within a Run once its
	// streams have passed it (timing decides), so later Runs may add some,
	// but never more than a Run that reuses nothing holds at its end (the
	// same program with every allocation fresh: the bound whatever the
	// timing); a leak would add the loop's buffers every Run and pass it.
	_, freshRT, fresh := simJob(t, "xs.hir", src, runtime.Config{Timeout: 5 * time.Second}, sim.Options{})
	evaluator.DisableReuseForTest(fresh)
	_, err = fresh.Run(in)
	require.NoError(t, err)
	bound := freshRT.LiveBuffers()
	t.Logf("buffers: %d after the first Run, %d in a Run that reuses nothing", rt.LiveBuffers(), bound)
	for range 10 {
		_, err = j.Run(in)
		require.NoError(t, err)
		require.LessOrEqual(t, rt.LiveBuffers(), bound, "later Runs keep allocating")
	}
}
