package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkSetGet is one Set and one Get round trip on loopback.
func BenchmarkSetGet(b *testing.B) {
	ctx := context.Background()
	srv, err := Serve(ctx, "", testToken, quiet(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := Dial(ctx, srv.Addr(), testToken)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	val := make([]byte, 256)
	for b.Loop() {
		if err := c.Set(ctx, "k", val); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchangeAll4 is one ExchangeAll of 64-byte values among 4 ranks,
// as the CUDA runtime does for each symmetric allocation.
func BenchmarkExchangeAll4(b *testing.B) {
	ctx := context.Background()
	srv, err := Serve(ctx, "", testToken, quiet(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	const world = 4
	clients := make([]*Client, world)
	for r := range clients {
		if clients[r], err = Dial(ctx, srv.Addr(), testToken, WithRank(r)); err != nil {
			b.Fatal(err)
		}
		defer clients[r].Close()
	}
	val := make([]byte, 64)
	for b.Loop() {
		var wg sync.WaitGroup
		for r, c := range clients {
			wg.Go(func() {
				if _, err := ExchangeAll(ctx, c, "bench", r, world, val, 10*time.Second); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}
