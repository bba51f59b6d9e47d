package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBarrierStalledReportsThenCompletes: ranks 0 and 1 wait for rank 2,
// which comes late; each hears once, after 50 ms, that rank 2 is missing,
// and the barrier then completes for all three.
func TestBarrierStalledReportsThenCompletes(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	const world = 3
	var mu sync.Mutex
	heard := map[int][][]int{}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		c := dial(t, srv, WithRank(r))
		wg.Go(func() {
			if r == 2 {
				time.Sleep(300 * time.Millisecond)
			}
			errs[r] = c.BarrierStalled(ctx, "late", r, world, 10*time.Second, 50*time.Millisecond, func(missing []int) {
				mu.Lock()
				defer mu.Unlock()
				heard[r] = append(heard[r], missing)
			})
		})
	}
	wg.Wait()
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
	assert.Equal(t, map[int][][]int{0: {{2}}, 1: {{2}}}, heard)
}

// TestBarrierStalledTimesOutAsBarrierDoes: a rank that never comes is
// reported at the stall, then the barrier fails after the whole timeout
// with Barrier's error.
func TestBarrierStalledTimesOutAsBarrierDoes(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv, WithRank(0))
	var heard [][]int
	err := c.BarrierStalled(ctx, "never", 0, 2, 200*time.Millisecond, 50*time.Millisecond, func(missing []int) { heard = append(heard, missing) })
	require.EqualError(t, err, `barrier "never": timed out after 200ms waiting for rank 1 of 2`)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, [][]int{{1}}, heard)
	// no hook, or a threshold past the timeout: Barrier, nothing heard
	heard = nil
	err = c.BarrierStalled(ctx, "never", 0, 2, 100*time.Millisecond, time.Second, func(missing []int) { heard = append(heard, missing) })
	require.EqualError(t, err, `barrier "never": timed out after 100ms waiting for rank 1 of 2`)
	assert.Empty(t, heard)
}
