package evaluator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/runtime"
)

// TestUseOnAnotherStreamWaitsForItsProducer: %a is allocated (and zero
// filled) on the default stream, written on stream %s, and read back on the
// default stream. Each use must wait for the op that produced the value it
// names, whichever stream that ran on; without that the write raced with
// the zero fill and the read with the write.
func TestUseOnAnotherStreamWaitsForItsProducer(t *testing.T) {
	src := `mesh 1
input %x : f32[65536]
%s = stream
%a = alloc : f32[65536]
set_stream %s
%b = mul %x, 3.0
%c = copy %b, %a
set_stream
%y = add %c, 1.0
output %y
`
	prog, err := parser.Parse("streams.hir", []byte(src))
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	for run := range 20 {
		in := host.Random(ir.F32, []int64{65536}, uint64(run+1))
		res, err := j.Run(map[string]*host.Array{"x": in})
		require.NoError(t, err)
		out := res.Ranks[0].Outputs[prog.Outputs[0].Name]
		for i := int64(0); i < in.Len(); i++ {
			want := float64(float32(float32(in.At(i))*3) + 1)
			require.Equal(t, want, out.At(i), "run %d element %d", run, i)
		}
	}
}

// A runtime error names the rank once: the CPU runtime's messages start
// with the rank, and Run puts it in front already.
func TestRuntimeErrorNamesTheRankOnce(t *testing.T) {
	// Both ranks send first on one stream: each send waits for a recv
	// that waits behind the peer's send (a checked program may still stop
	// for peers that never come: a timeout). The failure surfaces at
	// sync_stream, but names the send whose work failed.
	src := `mesh 2
input %x : f32[4]
send %x peer=+1
%y = recv peer=-1 : f32[4]
sync_stream
output %y
`
	prog, err := parser.Parse("sr.hir", []byte(src))
	require.NoError(t, err)
	lowerUnchecked(t, prog) // the deadlock pass rejects it: see the runtime's own timeout
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer j.Close()
	_, err = j.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{4}, 1)})
	require.Error(t, err)
	require.Regexp(t, `^sr.hir:3:1: rank [01]: send: send #0 from rank [01] to rank [01]: timed out after 300ms`, err.Error())
	var te *runtime.TimeoutError
	require.ErrorAs(t, err, &te)
}
