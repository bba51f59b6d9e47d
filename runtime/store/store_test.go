package store

import (
	"bytes"
	"context"
	"errors"
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dial(t *testing.T, srv *Server, opts ...DialOption) *Client {
	t.Helper()
	c, err := Dial(context.Background(), srv.Addr(), testToken, opts...)
	if err != nil {
		t.Fatal(err)
	}
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
			t.Fatalf("still not true after 10s: %s", what)
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
			t.Fatalf("goroutines leaked: %d now, %d before\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSetGetAddDelete(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)

	if err := c.Set(ctx, "a", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "a")
	if err != nil || string(got) != "hello" {
		t.Fatalf("Get(a) = %q, %v; want hello", got, err)
	}
	if err := c.Set(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "empty"); err != nil || len(got) != 0 {
		t.Fatalf("Get(empty) = %q, %v; want an empty value", got, err)
	}

	for i, want := range []int64{5, 3, 1000003} {
		delta := []int64{5, -2, 1000000}[i]
		n, err := c.Add(ctx, "counter", delta)
		if err != nil || n != want {
			t.Fatalf("Add(counter, %d) = %d, %v; want %d", delta, n, err, want)
		}
	}
	if got, _ := c.Get(ctx, "counter"); string(got) != "1000003" {
		t.Errorf("a counter reads as %q, want decimal text 1000003", got)
	}
	if _, err := c.Add(ctx, "a", 1); err == nil || !strings.Contains(err.Error(), `add to "a": its value is not an integer`) {
		t.Errorf("Add to a non-integer: %v", err)
	}

	existed, err := c.Delete(ctx, "a")
	if err != nil || !existed {
		t.Fatalf("Delete(a) = %v, %v; want true", existed, err)
	}
	existed, err = c.Delete(ctx, "a")
	if err != nil || existed {
		t.Fatalf("second Delete(a) = %v, %v; want false", existed, err)
	}
	if n := srv.Stats().Keys; n != 2 {
		t.Errorf("server holds %d keys, want 2 (empty, counter)", n)
	}
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
	if err := writer.Set(ctx, "late", []byte("value")); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "value" {
		t.Fatalf("Get = %q, want value", v)
	}

	vals, err := reader.GetAll(ctx, []string{"late", "late"}, 0)
	if err != nil || len(vals) != 2 || string(vals[1]) != "value" {
		t.Fatalf("GetAll = %q, %v", vals, err)
	}
}

func TestTimeoutsNameTheMissingKeys(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv, WithTimeout(50*time.Millisecond))

	_, err := c.Get(ctx, "never")
	if want := `store: get: timed out after 50ms waiting for key "never"`; err == nil || err.Error() != want {
		t.Fatalf("Get error = %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrTimeout) {
		t.Error("a Get timeout does not match ErrTimeout")
	}

	if err := c.Set(ctx, "b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	err = c.Wait(ctx, []string{"a", "b", "c"}, 20*time.Millisecond)
	if want := `store: wait: timed out after 20ms waiting for keys "a", "c" (2 of 3 missing)`; err == nil || err.Error() != want {
		t.Fatalf("Wait error = %v\nwant %s", err, want)
	}
	var te *TimeoutError
	if !errors.As(err, &te) || !cmp.Equal(te.Missing, []string{"a", "c"}) {
		t.Errorf("Wait error is not a TimeoutError for a, c: %#v", err)
	}
	if err := c.Wait(ctx, []string{"b"}, 0); err != nil {
		t.Errorf("Wait for a present key: %v", err)
	}
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
			if err != nil {
				t.Errorf("round %d rank %d: %v", round, r, err)
			}
		}
	}
	if err := clients[0].Barrier(ctx, "solo", 0, 1, 0); err != nil {
		t.Errorf("a barrier of one rank: %v", err)
	}
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
		if err == nil || err.Error() != want {
			t.Errorf("rank %d: %v\nwant %s", r, err, want)
		}
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("rank %d: a barrier timeout does not match ErrTimeout", r)
		}
	}
	// The ranks that gave up left the barrier: it works again.
	wg.Go(func() { errs[0] = c0.Barrier(ctx, "x", 0, 2, 10*time.Second) })
	wg.Go(func() { errs[1] = c1.Barrier(ctx, "x", 1, 2, 10*time.Second) })
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("barrier after a timeout: %v, %v", errs[0], errs[1])
	}
}

func TestBarrierMisuse(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)
	if err := c.Barrier(ctx, "b", 4, 4, time.Second); err == nil || err.Error() != `barrier "b": rank 4 is out of range for world size 4` {
		t.Errorf("rank out of range: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Barrier(ctx, "b", 0, 3, 10*time.Second) }()
	eventually(t, "rank 0 waits", func() bool { return srv.Stats().Waiting == 1 })
	err := c.Barrier(ctx, "b", 1, 2, time.Second)
	if want := `store at ` + srv.Addr() + `: barrier "b": rank 1 says the world size is 2, but ranks already waiting say 3`; err == nil || err.Error() != want {
		t.Errorf("world size mismatch: %v\nwant %s", err, want)
	}
	err = c.Barrier(ctx, "b", 0, 3, time.Second)
	if err == nil || !strings.Contains(err.Error(), `barrier "b": rank 0 arrived twice`) {
		t.Errorf("double arrival: %v", err)
	}
	c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("a barrier on a closed client: %v", err)
	}
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
		if err == nil || err.Error() != want {
			t.Errorf("rank %d: %v\nwant %s", r, err, want)
		}
		var be *BarrierError
		if !errors.As(err, &be) || !cmp.Equal(be.Disconnected, []int{2}) {
			t.Errorf("rank %d: not a BarrierError naming rank 2 as disconnected: %#v", r, err)
		}
		if errors.Is(err, ErrTimeout) {
			t.Errorf("rank %d: a disconnect is reported as a timeout", r)
		}
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
			if errs[r] != nil {
				t.Fatalf("round %d rank %d: %v", round, r, errs[r])
			}
			if diff := cmp.Diff(want, got[r]); diff != "" {
				t.Errorf("round %d rank %d got (-want +got):\n%s", round, r, diff)
			}
		}
		if n := srv.Stats().Keys; n != 0 {
			t.Errorf("round %d: %d keys left on the store", round, n)
		}
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
	if err := c2.Set(ctx, "h/2", []byte("x")); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = ExchangeAll(ctx, c0, "h", 0, 3, []byte("a"), time.Hour) })
	wg.Go(func() { _, errs[1] = ExchangeAll(ctx, c1, "h", 1, 3, []byte("b"), time.Hour) })
	eventually(t, "ranks 0 and 1 wait", func() bool { return srv.Stats().Waiting == 2 })
	c2.Close()
	wg.Wait()
	want := `exchange "h": barrier "h/published": rank 2 disconnected from the store; rank 2 of 3 had not arrived`
	for r, err := range errs {
		if err == nil || err.Error() != want {
			t.Errorf("rank %d: %v\nwant %s", r, err, want)
		}
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
	if !errors.As(err, &be) || !cmp.Equal(be.Missing, []int{1}) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v; want a barrier timeout naming rank 1", err)
	}
	if !strings.HasPrefix(err.Error(), `exchange "h": barrier "h/published": timed out after `) ||
		!strings.HasSuffix(err.Error(), ` waiting for rank 1 of 2`) {
		t.Errorf("message: %v", err)
	}
	if n := srv.Stats().Keys; n != 0 {
		t.Errorf("%d keys left after a failed exchange", n)
	}
}

func TestWrongTokenIsRejected(t *testing.T) {
	base := runtime.NumGoroutine()
	var logs syncBuffer
	srv, err := Serve(context.Background(), "127.0.0.1:0", testToken, quiet(&logs))
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"wrong", testToken + "x", strings.Repeat("t", 3000)} {
		c, err := Dial(context.Background(), srv.Addr(), token)
		if c != nil {
			c.Close()
		}
		want := "store at " + srv.Addr() + " rejected the job token"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("token %.10q: %v\nwant %s", token, err, want)
		}
		if !errors.Is(err, ErrBadToken) {
			t.Errorf("token %.10q: error does not match ErrBadToken", token)
		}
	}
	if n := srv.Stats().RejectedTokens; n != 3 {
		t.Errorf("server counted %d rejected tokens, want 3", n)
	}
	if !strings.Contains(logs.String(), "wrong job token") {
		t.Errorf("server log does not mention the wrong token:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "wrong\"") {
		t.Errorf("server log repeats the presented token:\n%s", logs.String())
	}
	eventually(t, "refused connections are closed", func() bool { return srv.Stats().Conns == 0 })
	srv.Close()
	settleGoroutines(t, base)

	if _, err := Serve(context.Background(), "", ""); err == nil {
		t.Error("Serve accepted an empty token")
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", ""); err == nil {
		t.Error("Dial accepted an empty token")
	}
}

// Everything the server and clients start ends with Close, including
// requests that were still waiting and clients that died mid-request.
func TestNoLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx := context.Background()
	srv, err := Serve(ctx, "", testToken, quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	clients := make([]*Client, 3)
	for i := range clients {
		if clients[i], err = Dial(ctx, srv.Addr(), testToken, WithRank(i)); err != nil {
			t.Fatal(err)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "store at "+srv.Addr()) {
			t.Errorf("a waiting call after the server closed: %v", err)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(context.Background(), conn, addr, token, -1); err != nil {
		t.Fatal(err)
	}
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
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Get: %v", err)
	}
	eventually(t, "the server stops waiting", func() bool { return srv.Stats().Waiting == 0 })
	// The connection is still good.
	if err := c.Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	// A context deadline shorter than the timeout is the one that counts,
	// and the error still names the key.
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	err := c.Wait(dctx, []string{"never"}, time.Hour)
	var te *TimeoutError
	if !errors.As(err, &te) || !cmp.Equal(te.Missing, []string{"never"}) {
		t.Errorf("Wait past its context's deadline: %v", err)
	}

	// A canceled barrier leaves it, so the rank can come back.
	bctx, bcancel := context.WithCancel(context.Background())
	go func() { done <- c.Barrier(bctx, "b", 0, 2, time.Hour) }()
	eventually(t, "the barrier waits", func() bool { return srv.Stats().Waiting == 1 })
	bcancel()
	<-done
	other := dial(t, srv)
	go func() { done <- other.Barrier(context.Background(), "b", 1, 2, time.Hour) }()
	if err := c.Barrier(context.Background(), "b", 0, 2, time.Hour); err != nil {
		t.Errorf("barrier after a canceled one: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("rank 1: %v", err)
	}
}

func TestServeContextClosesTheServer(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Serve(ctx, ":0", testToken, quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Errorf("an empty host listens on %s, want loopback", srv.Addr())
	}
	c, err := Dial(context.Background(), srv.Addr(), testToken)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after the server's context ended: %v", err)
	}
	c.Close()
	srv.Close()
	settleGoroutines(t, base)
}

func TestDialRetriesUntilTheServerListens(t *testing.T) {
	// Find a free port, then serve on it only after Dial has started.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.c.Close()

	_, err = Dial(context.Background(), "127.0.0.1:1", testToken, WithDialTimeout(30*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "store at 127.0.0.1:1: not reachable within 30ms") {
		t.Errorf("Dial to nothing: %v", err)
	}
}

func TestClientRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := dial(t, srv)
	if err := c.Set(ctx, "", nil); err == nil {
		t.Error("Set accepted an empty key")
	}
	if err := c.Set(ctx, strings.Repeat("k", MaxKeySize+1), nil); err == nil {
		t.Error("Set accepted an over-long key")
	}
	if err := c.Set(ctx, "big", make([]byte, MaxValueSize+1)); err == nil {
		t.Error("Set accepted an over-large value")
	}
	if _, err := ExchangeAll(ctx, c, "p", 2, 2, nil, time.Second); err == nil {
		t.Error("ExchangeAll accepted rank 2 of 2")
	}
}

// A frame longer than the limit from an authenticated client drops it.
func TestOversizedFrameDropsTheClient(t *testing.T) {
	var logs syncBuffer
	srv := startServer(t, quiet(&logs))
	raw := rawClient(t, srv.Addr(), testToken)
	defer raw.Close()
	raw.Write([]byte{0xff, 0xff, 0xff, 0xff})
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server answered an oversized frame")
	}
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
	if err := srv.WaitConns(ctx, 0); err == nil || !strings.Contains(err.Error(), "1 clients still connected") {
		t.Errorf("WaitConns with a client connected: %v", err)
	}
	c.Close()
	if err := srv.WaitConns(context.Background(), 0); err != nil {
		t.Error(err)
	}
}
