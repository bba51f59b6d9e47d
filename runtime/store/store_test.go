package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testToken = "job-token-for-tests"

// quiet keeps the server's warnings (wrong tokens, dropped clients) out of
// the test output, and lets a test read them.
func quiet(buf *syncBuffer) ServeOption {
	var w io.Writer = io.Discard
	if buf != nil {
		w = buf
	}
	return WithLogger(slog.New(slog.NewTextHandler(w, nil)))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startServer(t *testing.T, opts ...ServeOption) *Server {
	t.Helper()
	if len(opts) == 0 {
		opts = []ServeOption{quiet(nil)}
	}
	srv, err := Serve(context.Background(), "", testToken, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dial(t *testing.T, srv *Server, opts ...DialOption) *Client {
	t.Helper()
	c, err := Dial(context.Background(), srv.Addr(), testToken, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond until it holds; server-side cleanup after a client
// goes away is asynchronous.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "still not true after 10s: "+what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settleGoroutines waits until the goroutine count is back to at most base.
func settleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			require.FailNow(t, fmt.Sprintf("goroutines leaked: %d now, %d before", runtime.NumGoroutine(), base), string(buf[:n]))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSetGetAddDelete(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)

	require.NoError(t, c.Set(ctx, "a", []byte("hello")))
	got, err := c.Get(ctx, "a")
	require.NoError(t, err, "Get(a)")
	require.Equal(t, "hello", string(got), "Get(a)")
	require.NoError(t, c.Set(ctx, "empty", nil))
	got, err = c.Get(ctx, "empty")
	require.NoError(t, err, "Get(empty)")
	require.Empty(t, got, "Get(empty)")

	for i, want := range []int64{5, 3, 1000003} {
		delta := []int64{5, -2, 1000000}[i]
		n, err := c.Add(ctx, "counter", delta)
		require.NoError(t, err, "Add(counter, %d)", delta)
		require.Equal(t, want, n, "Add(counter, %d)", delta)
	}
	got, _ = c.Get(ctx, "counter")
	assert.Equal(t, "1000003", string(got), "a counter reads as decimal text")
	_, err = c.Add(ctx, "a", 1)
	assert.ErrorContains(t, err, `add to "a": its value is not an integer`, "Add to a non-integer")

	existed, err := c.Delete(ctx, "a")
	require.NoError(t, err, "Delete(a)")
	require.True(t, existed, "Delete(a)")
	existed, err = c.Delete(ctx, "a")
	require.NoError(t, err, "second Delete(a)")
	require.False(t, existed, "second Delete(a)")
	assert.Equal(t, 2, srv.Stats().Keys, "server holds keys: empty, counter")
}

func TestGetWaitsForALaterSet(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	reader, writer := dial(t, srv), dial(t, srv)

	got := make(chan string, 1)
	go func() {
		v, err := reader.Get(ctx, "late")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(v)
	}()
	eventually(t, "the Get is waiting on the server", func() bool { return srv.Stats().Waiting == 1 })
	require.NoError(t, writer.Set(ctx, "late", []byte("value")))
	require.Equal(t, "value", <-got, "Get")

	vals, err := reader.GetAll(ctx, []string{"late", "late"}, 0)
	require.NoError(t, err, "GetAll")
	require.Len(t, vals, 2, "GetAll")
	require.Equal(t, "value", string(vals[1]), "GetAll")
}

func TestTimeoutsNameTheMissingKeys(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv, WithTimeout(50*time.Millisecond))

	_, err := c.Get(ctx, "never")
	require.EqualError(t, err, `store: get: timed out after 50ms waiting for key "never"`, "Get error")
	assert.ErrorIs(t, err, ErrTimeout, "a Get timeout does not match ErrTimeout")

	require.NoError(t, c.Set(ctx, "b", []byte("x")))
	err = c.Wait(ctx, []string{"a", "b", "c"}, 20*time.Millisecond)
	require.EqualError(t, err, `store: wait: timed out after 20ms waiting for keys "a", "c" (2 of 3 missing)`, "Wait error")
	var te *TimeoutError
	if assert.ErrorAs(t, err, &te, "Wait error is not a TimeoutError") {
		assert.Equal(t, []string{"a", "c"}, te.Missing, "Wait error is not a TimeoutError for a, c")
	}
	assert.NoError(t, c.Wait(ctx, []string{"b"}, 0), "Wait for a present key")
	// The server answers before it counts the request done.
	eventually(t, "no request waits on the server after its timeout", func() bool { return srv.Stats().Waiting == 0 })
}

func TestBarrier(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	const world = 4
	clients := make([]*Client, world)
	for r := range clients {
		clients[r] = dial(t, srv, WithRank(r))
	}
	// Twice with the same name: a completed barrier starts afresh.
	for round := range 2 {
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r, c := range clients {
			wg.Go(func() { errs[r] = c.Barrier(ctx, "step", r, world, 10*time.Second) })
		}
		wg.Wait()
		for r, err := range errs {
			assert.NoError(t, err, "round %d rank %d", round, r)
		}
	}
	assert.NoError(t, clients[0].Barrier(ctx, "solo", 0, 1, 0), "a barrier of one rank")
}

func TestBarrierTimeoutNamesTheRanks(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c0, c1 := dial(t, srv, WithRank(0)), dial(t, srv, WithRank(1))
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = c0.Barrier(ctx, "x", 0, 4, 100*time.Millisecond) })
	wg.Go(func() { errs[1] = c1.Barrier(ctx, "x", 1, 4, 100*time.Millisecond) })
	wg.Wait()
	want := `barrier "x": timed out after 100ms waiting for ranks 2, 3 of 4`
	for r, err := range errs {
		assert.EqualError(t, err, want, "rank %d", r)
		assert.ErrorIs(t, err, ErrTimeout, "rank %d: a barrier timeout does not match ErrTimeout", r)
	}
	// The ranks that gave up left the barrier: it works again.
	wg.Go(func() { errs[0] = c0.Barrier(ctx, "x", 0, 2, 10*time.Second) })
	wg.Go(func() { errs[1] = c1.Barrier(ctx, "x", 1, 2, 10*time.Second) })
	wg.Wait()
	assert.NoError(t, errs[0], "barrier after a timeout, rank 0")
	assert.NoError(t, errs[1], "barrier after a timeout, rank 1")
}

func TestBarrierMisuse(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)
	assert.EqualError(t, c.Barrier(ctx, "b", 4, 4, time.Second), `barrier "b": rank 4 is out of range for world size 4`, "rank out of range")
	done := make(chan error, 1)
	go func() { done <- c.Barrier(ctx, "b", 0, 3, 10*time.Second) }()
	eventually(t, "rank 0 waits", func() bool { return srv.Stats().Waiting == 1 })
	err := c.Barrier(ctx, "b", 1, 2, time.Second)
	assert.EqualError(t, err, `store at `+srv.Addr()+`: barrier "b": rank 1 says the world size is 2, but ranks already waiting say 3`, "world size mismatch")
	err = c.Barrier(ctx, "b", 0, 3, time.Second)
	assert.ErrorContains(t, err, `barrier "b": rank 0 arrived twice`, "double arrival")
	c.Close()
	assert.ErrorIs(t, <-done, ErrClosed, "a barrier on a closed client")
}

// A rank whose process dies (its connection closes) fails the barrier for
// the others at once, naming it, well before their timeout.
func TestBarrierFailsFastWhenARankDisconnects(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c0, c1 := dial(t, srv, WithRank(0)), dial(t, srv, WithRank(1))
	c2 := dial(t, srv, WithRank(2))
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = c0.Barrier(ctx, "x", 0, 4, time.Hour) })
	wg.Go(func() { errs[1] = c1.Barrier(ctx, "x", 1, 4, time.Hour) })
	eventually(t, "ranks 0 and 1 wait", func() bool { return srv.Stats().Waiting == 2 })
	c2.Close()
	wg.Wait()
	want := `barrier "x": rank 2 disconnected from the store; ranks 2, 3 of 4 had not arrived`
	for r, err := range errs {
		assert.EqualError(t, err, want, "rank %d", r)
		var be *BarrierError
		if assert.ErrorAs(t, err, &be, "rank %d: not a BarrierError", r) {
			assert.Equal(t, []int{2}, be.Disconnected, "rank %d: not a BarrierError naming rank 2 as disconnected", r)
		}
		assert.NotErrorIs(t, err, ErrTimeout, "rank %d: a disconnect is reported as a timeout", r)
	}
}

func TestExchangeAll(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	const world = 4
	clients := make([]*Client, world)
	for r := range clients {
		clients[r] = dial(t, srv, WithRank(r))
	}
	want := make([][]byte, world)
	for r := range want {
		want[r] = fmt.Appendf(nil, "handle of rank %d", r)
	}
	// The same prefix twice: keys of the first round are gone before the
	// second starts.
	for round := range 2 {
		got := make([][][]byte, world)
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r, c := range clients {
			wg.Go(func() { got[r], errs[r] = ExchangeAll(ctx, c, "symm/0", r, world, want[r], 10*time.Second) })
		}
		wg.Wait()
		for r := range world {
			require.NoError(t, errs[r], "round %d rank %d", round, r)
			assert.Empty(t, cmp.Diff(want, got[r]), "round %d rank %d got (-want +got)", round, r)
		}
		assert.Zero(t, srv.Stats().Keys, "round %d: keys left on the store", round)
	}
}

// A peer that dies in the middle of the handle exchange: the others fail at
// once with its rank, remove their own keys, and nothing waits on.
func TestExchangeAllPeerDies(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c0, c1 := dial(t, srv, WithRank(0)), dial(t, srv, WithRank(1))
	c2 := dial(t, srv, WithRank(2))
	// Rank 2 publishes, then dies before the barrier.
	require.NoError(t, c2.Set(ctx, "h/2", []byte("x")))
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = ExchangeAll(ctx, c0, "h", 0, 3, []byte("a"), time.Hour) })
	wg.Go(func() { _, errs[1] = ExchangeAll(ctx, c1, "h", 1, 3, []byte("b"), time.Hour) })
	eventually(t, "ranks 0 and 1 wait", func() bool { return srv.Stats().Waiting == 2 })
	c2.Close()
	wg.Wait()
	want := `exchange "h": barrier "h/published": rank 2 disconnected from the store; rank 2 of 3 had not arrived`
	for r, err := range errs {
		assert.EqualError(t, err, want, "rank %d", r)
	}
	eventually(t, "only the dead rank's key is left", func() bool { return srv.Stats().Keys == 1 })
	eventually(t, "no request waits", func() bool { return srv.Stats().Waiting == 0 })
}

func TestExchangeAllTimeoutNamesTheRank(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c0 := dial(t, srv, WithRank(0))
	_, err := ExchangeAll(ctx, c0, "h", 0, 2, []byte("a"), 50*time.Millisecond)
	var be *BarrierError
	require.ErrorAs(t, err, &be, "want a barrier timeout naming rank 1")
	require.Equal(t, []int{1}, be.Missing, "want a barrier timeout naming rank 1")
	require.ErrorIs(t, err, ErrTimeout, "want a barrier timeout naming rank 1")
	assert.True(t, strings.HasPrefix(err.Error(), `exchange "h": barrier "h/published": timed out after `), "message: %v", err)
	assert.True(t, strings.HasSuffix(err.Error(), ` waiting for rank 1 of 2`), "message: %v", err)
	assert.Zero(t, srv.Stats().Keys, "keys left after a failed exchange")
}

func TestWrongTokenIsRejected(t *testing.T) {
	base := runtime.NumGoroutine()
	var logs syncBuffer
	srv, err := Serve(context.Background(), "127.0.0.1:0", testToken, quiet(&logs))
	require.NoError(t, err)
	for _, token := range []string{"wrong", testToken + "x", strings.Repeat("t", 3000)} {
		c, err := Dial(context.Background(), srv.Addr(), token)
		if c != nil {
			c.Close()
		}
		want := "store at " + srv.Addr() + " rejected the job token"
		if assert.Error(t, err, "token %.10q", token) {
			assert.True(t, strings.HasPrefix(err.Error(), want), "token %.10q: %v\nwant %s", token, err, want)
		}
		assert.ErrorIs(t, err, ErrBadToken, "token %.10q: error does not match ErrBadToken", token)
	}
	assert.Equal(t, int64(3), srv.Stats().RejectedTokens, "server counted rejected tokens")
	assert.Contains(t, logs.String(), "wrong job token", "server log does not mention the wrong token")
	assert.NotContains(t, logs.String(), "wrong\"", "server log repeats the presented token")
	eventually(t, "refused connections are closed", func() bool { return srv.Stats().Conns == 0 })
	srv.Close()
	settleGoroutines(t, base)

	_, err = Serve(context.Background(), "", "")
	assert.Error(t, err, "Serve accepted an empty token")
	_, err = Dial(context.Background(), "127.0.0.1:1", "")
	assert.Error(t, err, "Dial accepted an empty token")
}

// Everything the server and clients start ends with Close, including
// requests that were still waiting and clients that died mid-request.
func TestNoLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx := context.Background()
	srv, err := Serve(ctx, "", testToken, quiet(nil))
	require.NoError(t, err)
	clients := make([]*Client, 3)
	for i := range clients {
		clients[i], err = Dial(ctx, srv.Addr(), testToken, WithRank(i))
		require.NoError(t, err)
	}
	errs := make(chan error, 3)
	go func() { _, err := clients[0].Get(ctx, "never"); errs <- err }()
	go func() { errs <- clients[1].Wait(ctx, []string{"a", "b"}, time.Hour) }()
	go func() { errs <- clients[2].Barrier(ctx, "never", 2, 5, time.Hour) }()

	// A client that dies half-way through sending a request.
	raw := rawClient(t, srv.Addr(), testToken)
	raw.Write([]byte{0, 0, 0, 100, 1, 2, 3})
	raw.Close()
	// A client that dies while its Get waits.
	raw = rawClient(t, srv.Addr(), testToken)
	var e encoder
	e.u64(1)
	e.u8(uint8(opGet))
	e.dur(time.Hour)
	e.strs([]string{"never"})
	raw.Write(frame(e.b))
	eventually(t, "four requests wait", func() bool { return srv.Stats().Waiting == 4 })
	raw.Close()
	eventually(t, "the dead clients are cleaned up", func() bool {
		st := srv.Stats()
		return st.Waiting == 3 && st.Conns == 3
	})
	// A client that connects and never sends its handshake is not waited
	// for by Close.
	silent, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer silent.Close()

	require.NoError(t, srv.Close())
	for range 3 {
		err := <-errs
		assert.ErrorIs(t, err, ErrClosed, "a waiting call after the server closed")
		assert.ErrorContains(t, err, "store at "+srv.Addr(), "a waiting call after the server closed")
	}
	for _, c := range clients {
		c.Close()
	}
	silent.Close()
	settleGoroutines(t, base)
}

// rawClient connects and does the handshake by hand.
func rawClient(t *testing.T, addr, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, handshake(context.Background(), conn, addr, token, -1))
	return conn
}

func TestCancelStopsTheWaitOnTheServer(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Get(ctx, "never"); done <- err }()
	eventually(t, "the Get waits", func() bool { return srv.Stats().Waiting == 1 })
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "canceled Get")
	eventually(t, "the server stops waiting", func() bool { return srv.Stats().Waiting == 0 })
	// The connection is still good.
	require.NoError(t, c.Set(context.Background(), "k", []byte("v")))

	// A context deadline shorter than the timeout is the one that counts,
	// and the error still names the key.
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	err := c.Wait(dctx, []string{"never"}, time.Hour)
	var te *TimeoutError
	if assert.ErrorAs(t, err, &te, "Wait past its context's deadline") {
		assert.Equal(t, []string{"never"}, te.Missing, "Wait past its context's deadline")
	}

	// A canceled barrier leaves it, so the rank can come back.
	bctx, bcancel := context.WithCancel(context.Background())
	go func() { done <- c.Barrier(bctx, "b", 0, 2, time.Hour) }()
	eventually(t, "the barrier waits", func() bool { return srv.Stats().Waiting == 1 })
	bcancel()
	<-done
	other := dial(t, srv)
	go func() { done <- other.Barrier(context.Background(), "b", 1, 2, time.Hour) }()
	assert.NoError(t, c.Barrier(context.Background(), "b", 0, 2, time.Hour), "barrier after a canceled one")
	assert.NoError(t, <-done, "rank 1")
}

func TestServeContextClosesTheServer(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Serve(ctx, ":0", testToken, quiet(nil))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(srv.Addr(), "127.0.0.1:"), "an empty host listens on %s, want loopback", srv.Addr())
	c, err := Dial(context.Background(), srv.Addr(), testToken)
	require.NoError(t, err)
	cancel()
	_, err = c.Get(context.Background(), "k")
	assert.ErrorIs(t, err, ErrClosed, "Get after the server's context ended")
	c.Close()
	srv.Close()
	settleGoroutines(t, base)
}

func TestDialRetriesUntilTheServerListens(t *testing.T) {
	// Find a free port, then serve on it only after Dial has started.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()

	type result struct {
		c   *Client
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := Dial(context.Background(), addr, testToken, WithDialTimeout(30*time.Second))
		got <- result{c, err}
	}()
	time.Sleep(20 * time.Millisecond) // let Dial meet a refused connection first
	srv, err := Serve(context.Background(), addr, testToken, quiet(nil))
	if err != nil {
		t.Skipf("the free port was taken meanwhile: %v", err)
	}
	defer srv.Close()
	r := <-got
	require.NoError(t, r.err)
	r.c.Close()

	_, err = Dial(context.Background(), "127.0.0.1:1", testToken, WithDialTimeout(30*time.Millisecond))
	assert.ErrorContains(t, err, "store at 127.0.0.1:1: not reachable within 30ms", "Dial to nothing")
}

func TestClientRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)
	assert.Error(t, c.Set(ctx, "", nil), "Set accepted an empty key")
	assert.Error(t, c.Set(ctx, strings.Repeat("k", MaxKeySize+1), nil), "Set accepted an over-long key")
	assert.Error(t, c.Set(ctx, "big", make([]byte, MaxValueSize+1)), "Set accepted an over-large value")
	_, err := ExchangeAll(ctx, c, "p", 2, 2, nil, time.Second)
	assert.Error(t, err, "ExchangeAll accepted rank 2 of 2")
}

// A frame longer than the limit from an authenticated client drops it.
func TestOversizedFrameDropsTheClient(t *testing.T) {
	var logs syncBuffer
	srv := startServer(t, quiet(&logs))
	raw := rawClient(t, srv.Addr(), testToken)
	defer raw.Close()
	raw.Write([]byte{0xff, 0xff, 0xff, 0xff})
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := raw.Read(make([]byte, 1))
	require.Error(t, err, "the server answered an oversized frame")
	eventually(t, "the server logs the drop", func() bool { return strings.Contains(logs.String(), "frame too large") })
}

func TestServeWithADoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv, err := Serve(ctx, "", testToken, quiet(nil))
	if err != nil {
		// Listen saw the canceled context first: also fine.
		return
	}
	// It closes itself (at once, but in another goroutine).
	eventually(t, "the server stops accepting clients", func() bool {
		c, err := Dial(context.Background(), srv.Addr(), testToken, WithDialTimeout(10*time.Millisecond))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	srv.Close()
}

func TestWaitConns(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorContains(t, srv.WaitConns(ctx, 0), "1 clients still connected", "WaitConns with a client connected")
	c.Close()
	assert.NoError(t, srv.WaitConns(context.Background(), 0))
}
