package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// ExchangeAll publishes value as this rank's and returns every rank's value,
// indexed by rank: an all-gather of small byte strings through the store
// (memory handles, NCCL ids). Every rank of the world calls it with the same
// prefix; a prefix may be used again once the call has returned on every
// rank.
//
// The keys are "<prefix>/<rank>". Each rank deletes only its own key, and
// only after a second barrier, so no rank can find a key deleted before it
// read it. A rank that never publishes, or dies, makes the others fail
// within timeout with an error naming it (at once when it dies: its
// connection to the store closes). On failure this rank's key is removed.
func ExchangeAll(ctx context.Context, c *Client, prefix string, rank, world int, value []byte, timeout time.Duration) ([][]byte, error) {
	if err := checkRank("exchange", prefix, rank, world); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(err error) ([][]byte, error) {
		// Tidy up with a fresh short deadline: ctx may be what failed.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), replyGrace)
		defer ccancel()
		c.Delete(cctx, exchangeKey(prefix, rank))
		return nil, fmt.Errorf("exchange %q: %w", prefix, err)
	}

	keys := make([]string, world)
	for r := range world {
		keys[r] = exchangeKey(prefix, r)
	}
	if err := c.Set(ctx, keys[rank], value); err != nil {
		return fail(err)
	}
	// All published: after this barrier every key is there. The barrier,
	// unlike a wait for keys, can name a rank that died.
	if err := c.Barrier(ctx, prefix+"/published", rank, world, 0); err != nil {
		return fail(err)
	}
	vals, err := c.GetAll(ctx, keys, 0)
	if err != nil {
		return fail(err)
	}
	// All read: now each rank may remove its own key.
	if err := c.Barrier(ctx, prefix+"/read", rank, world, 0); err != nil {
		return fail(err)
	}
	if _, err := c.Delete(ctx, keys[rank]); err != nil {
		return nil, fmt.Errorf("exchange %q: %w", prefix, err)
	}
	return vals, nil
}

func exchangeKey(prefix string, rank int) string {
	return prefix + "/" + strconv.Itoa(rank)
}
