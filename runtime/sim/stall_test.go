package sim

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// stallLog collects what a runtime.Config.Stalled hook hears.
type stallLog struct {
	mu     sync.Mutex
	stalls []runtime.Stall
}

func (l *stallLog) add(s runtime.Stall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalls = append(l.stalls, s)
}

// byRank is what was heard, in rank order.
func (l *stallLog) byRank() []runtime.Stall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.stalls)
	slices.SortStableFunc(out, func(a, b runtime.Stall) int { return a.Rank - b.Rank })
	return out
}

// stallRuntime is a runtime of D ranks whose waits report a stall after
// 50 ms and time out after timeout.
func stallRuntime(t *testing.T, D int, timeout time.Duration) (*Runtime, *stallLog) {
	log := &stallLog{}
	rt, err := New(runtime.Config{WorldSize: D, Timeout: timeout, StallAfter: 50 * time.Millisecond, Stalled: log.add})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt, log
}

// TestStallNamesTheOpAndTheMissingRanks: ranks 0 and 1 reach a barrier
// that rank 2 never reaches. Each waiting rank reports once, with the op
// its stream work was labelled with and the rank it waits for, then goes
// on waiting until the timeout, whose typed error is unchanged.
func TestStallNamesTheOpAndTheMissingRanks(t *testing.T) {
	const timeout = 400 * time.Millisecond
	rt, log := stallRuntime(t, 3, timeout)
	op := &ir.Op{Code: ir.OpBarrier, Pos: ir.NewPos("prog.hir", 12, 3)}
	start := time.Now()
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 2 {
			return nil // never arrives
		}
		s := d.DefaultStream()
		s.(runtime.Labeler).Label(op)
		if err := d.Barrier(s); err != nil {
			return err
		}
		return s.Synchronize()
	})
	require.GreaterOrEqual(t, time.Since(start), timeout, "the ranks waited until the timeout")
	for _, r := range []int{0, 1} {
		var te *runtime.TimeoutError
		require.True(t, errors.As(errs[r], &te), "rank %d: %v", r, errs[r])
		assert.Equal(t, []int{2}, te.Missing)
		assert.Equal(t, timeout, te.After)
	}
	stalls := log.byRank()
	require.Len(t, stalls, 2, "one report per waiting rank: %v", stalls)
	for i, s := range stalls {
		assert.Equal(t, runtime.Stall{Rank: i, What: "barrier #0", Label: op, Waited: 50 * time.Millisecond, Waiting: []int{2}}, s)
	}
	assert.Equal(t, "rank 1 has waited 50ms at prog.hir:12:3 (barrier) for rank 2", stalls[1].String())
}

// TestStallOfACollectiveAndAHostWait: a collective that rank 0 never
// joins names rank 0, with the runtime's name for the wait where its work
// carries no op; so does a host-side wait (a symmetric alloc). A wait that
// completes before the threshold reports nothing.
func TestStallOfACollectiveAndAHostWait(t *testing.T) {
	rt, log := stallRuntime(t, 2, 300*time.Millisecond)
	// completes at once: nothing to report
	mustAll(t, onAll(rt, func(d *Device) error { return d.Barrier(nil) }))
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 0 {
			return nil
		}
		in, err := upload(d, ir.Global, ir.F32, []float64{1}, 1)
		if err != nil {
			return err
		}
		defer d.Free(in.Buf)
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, ReduceOp: ir.ReduceSum, In: in, Out: in}, nil); err != nil {
			return err
		}
		return d.DefaultStream().Synchronize()
	})
	require.ErrorIs(t, errs[1], runtime.ErrTimeout)
	errs = onAll(rt, func(d *Device) error {
		if d.rank == 0 {
			return nil
		}
		_, err := d.Alloc(16, ir.Symmetric)
		return err
	})
	require.ErrorIs(t, errs[1], runtime.ErrTimeout)
	var said []string
	for _, s := range log.byRank() {
		said = append(said, s.String())
	}
	assert.Equal(t, []string{
		"rank 1 has waited 50ms in all_reduce algo=ring (collective #0) for rank 0",
		"rank 1 has waited 50ms in symmetric alloc #0 for rank 0",
	}, said)
}

// TestNoStallPastTheTimeout: a threshold the timeout
// reaches first reports nothing (the timeout says it all).
func TestNoStallPastTheTimeout(t *testing.T) {
	log := &stallLog{}
	rt, err := New(runtime.Config{WorldSize: 2, Timeout: 100 * time.Millisecond, StallAfter: time.Second, Stalled: log.add})
	require.NoError(t, err)
	defer rt.Close()
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 0 {
			return nil
		}
		if err := d.Barrier(nil); err != nil {
			return err
		}
		return d.DefaultStream().Synchronize()
	})
	require.ErrorIs(t, errs[1], runtime.ErrTimeout)
	assert.Empty(t, log.byRank())
}
