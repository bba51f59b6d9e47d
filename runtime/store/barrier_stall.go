package store

import (
	"context"
	"errors"
	"time"
)

// BarrierStalled is Barrier that, once it has waited after (when that is
// shorter than its timeout), calls stalled with the ranks that have not
// arrived, then waits on for the rest of the timeout: a wait a person can
// be told about (runtime.Config.Stalled) before it fails. The rank leaves
// the round at after and joins it again at once, as a rank that gave up may
// (the round completes with it either way); a timeout is reported as
// Barrier reports it, for the whole time waited. A nil stalled makes it
// Barrier.
func (c *Client) BarrierStalled(ctx context.Context, name string, rank, world int, timeout, after time.Duration, stalled func(missing []int)) error {
	wait := c.effectiveWait(ctx, timeout)
	if stalled == nil || after <= 0 || after >= wait {
		return c.Barrier(ctx, name, rank, world, timeout)
	}
	err := c.Barrier(ctx, name, rank, world, after)
	var be *BarrierError
	if !errors.As(err, &be) || len(be.Disconnected) > 0 {
		return err // done, or failed for good (a rank died, misuse)
	}
	stalled(be.Missing)
	err = c.Barrier(ctx, name, rank, world, wait-after)
	if errors.As(err, &be) && len(be.Disconnected) == 0 {
		be.After += after
	}
	return err
}
