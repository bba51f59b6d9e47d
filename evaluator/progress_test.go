package evaluator_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/runtime"
)

// TestProgressShowsWhereEachHostIs: both ranks send first and then wait
// for their streams (sync_stream), so each host stops at the sync_stream
// with one op (the send) done until the timeout; Progress, read from
// another goroutine meanwhile, says so. After the Run every op is done.
func TestProgressShowsWhereEachHostIs(t *testing.T) {
	src := "mesh 2\ninput %x : f32[4]\n%y = relu %x\nsend %y peer=+1\nsync_stream\n%r = recv peer=-1 : f32[4]\noutput %r\n"
	prog, err := parser.Parse("p.hir", []byte(src))
	require.NoError(t, err)
	lowerUnchecked(t, prog) // the deadlock pass would reject it
	const timeout = 500 * time.Millisecond
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2, Timeout: timeout})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{Progress: true})
	require.NoError(t, err)
	defer j.Close()

	require.Equal(t, []evaluator.Progress{{Rank: 0}, {Rank: 1}}, j.Progress(nil), "before any Run")
	var syncOp *ir.Op
	prog.Walk(func(op *ir.Op) {
		if op.Code == ir.OpSyncStream {
			syncOp = op
		}
	})
	require.NotNil(t, syncOp)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := j.Run(map[string]*host.Array{"x": host.Random(ir.F32, shape(4), 1)})
		assert.ErrorIs(t, err, runtime.ErrTimeout)
	}()
	// relu, send (and a free the lowering put between them, if any) are
	// done; the host is in the sync_stream until the timeout
	var seen []evaluator.Progress
	require.Eventually(t, func() bool {
		seen = j.Progress(seen[:0])
		return seen[0].Op == syncOp && seen[1].Op == syncOp
	}, timeout/2, time.Millisecond, "the hosts never showed the sync_stream: %+v", seen)
	before := 0
	for _, op := range prog.Body.Ops {
		if op == syncOp {
			break
		}
		before++
	}
	for r, p := range seen {
		assert.Equal(t, evaluator.Progress{Rank: r, Done: int64(before), Op: syncOp}, p)
	}
	wg.Wait()
	// the Run failed in the sync_stream: the host left the body there
	for _, p := range j.Progress(nil) {
		assert.Nil(t, p.Op, "rank %d after the Run", p.Rank)
		assert.Equal(t, int64(before+1), p.Done, "rank %d after the Run", p.Rank)
	}
}

// TestProgressCountsLoopIterations: a finished Run has done every op it
// ran, each iteration's body ops included; a job made without
// Options.Progress says nothing.
func TestProgressCountsLoopIterations(t *testing.T) {
	prog, err := parser.Parse("l.hir", []byte("mesh 1\ninput %x : f32[4, 2]\n%a = alloc : f32[4, 2]\nfor %i = 0 to 4 {\n  %r = select %x, %i\n  %s = select %a, %i\n  %c = copy %r, %s\n}\noutput %a\n"))
	require.NoError(t, err)
	lowerUnchecked(t, prog)
	in := map[string]*host.Array{"x": host.Random(ir.F32, shape(4, 2), 1)}
	untracked := job(t, prog, evaluator.Options{})
	_, err = untracked.Run(in)
	require.NoError(t, err)
	assert.Empty(t, untracked.Progress(nil), "without Options.Progress the hosts publish nothing")
	j := job(t, prog, evaluator.Options{Progress: true})
	_, err = j.Run(in)
	require.NoError(t, err)
	loop := 0
	for _, op := range prog.Body.Ops {
		if op.Code == ir.OpFor {
			loop = len(op.Body.Ops)
		}
	}
	require.Positive(t, loop)
	want := int64(len(prog.Body.Ops) + 4*loop)
	assert.Equal(t, []evaluator.Progress{{Rank: 0, Done: want}}, j.Progress(nil))
}

// BenchmarkOverheadPerOpProgress is BenchmarkOverheadPerOp with
// Options.Progress: what publishing the host's place costs per op.
func BenchmarkOverheadPerOpProgress(b *testing.B) {
	const n = 1000
	j, in := addChainWith(b, n, evaluator.Options{Progress: true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.Run(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/irop")
}
