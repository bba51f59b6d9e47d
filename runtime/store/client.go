package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultTimeout is how long Get waits for a key, and how long other calls
// wait for the store's reply, unless WithTimeout says otherwise. It matches
// runtime.DefaultTimeout.
const DefaultTimeout = 60 * time.Second

// replyGrace is how much longer than its own timeout a blocking request
// waits for the server's answer before it gives up on the server.
const replyGrace = 5 * time.Second

// deadlineGrace is how long a blocking request whose context's deadline has
// passed still waits for the server's own timeout answer.
const deadlineGrace = time.Second

// Client is a connection to a store. Its methods may be called from several
// goroutines at once; each call is one request on the shared connection.
type Client struct {
	addr    string
	conn    net.Conn
	timeout time.Duration

	writeMu sync.Mutex
	nextID  atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan []byte
	err     error         // why the connection ended; set before done closes
	done    chan struct{} // closed when the reader ends
	once    sync.Once
}

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	rank        int
	timeout     time.Duration
	dialTimeout time.Duration
}

// WithRank tells the store which rank this client is, so a barrier fails at
// once, naming the rank, when this client disconnects before arriving.
func WithRank(rank int) DialOption {
	return func(c *dialConfig) { c.rank = rank }
}

// WithTimeout sets how long Get waits for a key and how long calls wait for
// the store's reply (default DefaultTimeout).
func WithTimeout(d time.Duration) DialOption {
	return func(c *dialConfig) { c.timeout = d }
}

// WithDialTimeout sets how long Dial keeps trying to reach a store that is
// not listening yet (default: the client timeout). Ranks usually start
// before, or at the same time as, the rank that serves.
func WithDialTimeout(d time.Duration) DialOption {
	return func(c *dialConfig) { c.dialTimeout = d }
}

// Dial connects to the store at addr and proves the job token. While the
// store refuses connections (not started yet) Dial retries until the dial
// timeout or ctx ends; a wrong token fails at once.
func Dial(ctx context.Context, addr, token string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{rank: -1, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		cfg.timeout = DefaultTimeout
	}
	if cfg.dialTimeout <= 0 {
		cfg.dialTimeout = cfg.timeout
	}
	if token == "" {
		return nil, errors.New("store: the job token is empty")
	}
	if len(token) > maxHandshake-64 {
		return nil, fmt.Errorf("store: the job token is too long (%d bytes)", len(token))
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	conn, err := dialRetry(dctx, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("store at %s: %w", addr, ctx.Err())
		}
		return nil, fmt.Errorf("store at %s: not reachable within %s: %w", addr, cfg.dialTimeout, err)
	}
	if err := handshake(dctx, conn, addr, token, cfg.rank); err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{
		addr:    addr,
		conn:    conn,
		timeout: cfg.timeout,
		pending: make(map[uint64]chan []byte),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// dialRetry dials until it connects, backing off while the address refuses.
func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	backoff := 10 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, err
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func handshake(ctx context.Context, conn net.Conn, addr, token string, rank int) error {
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var e encoder
	e.b = append(e.b, protocolMagic...)
	e.u8(protocolVersion)
	e.i32(int32(rank))
	e.b = append(e.b, token...)
	if _, err := conn.Write(frame(e.b)); err != nil {
		return fmt.Errorf("store at %s: handshake: %w", addr, err)
	}
	body, err := readFrame(conn, maxHandshake)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("store at %s: no answer to the handshake: %w", addr, ctx.Err())
		}
		return fmt.Errorf("store at %s: handshake: %w", addr, err)
	}
	d := decoder{b: body}
	status, msg := d.u8(), string(d.str())
	if err := d.done(); err != nil {
		return fmt.Errorf("store at %s: bad handshake answer: %w", addr, err)
	}
	switch status {
	case handshakeAccepted:
		// If ctx ended meanwhile, its deadline may be on the connection
		// (now or in a moment): the connection is unusable.
		if !stop() {
			return fmt.Errorf("store at %s: handshake: %w", addr, context.Cause(ctx))
		}
		return nil
	case handshakeBadToken:
		return fmt.Errorf("store at %s rejected the job token: %w", addr, ErrBadToken)
	default:
		return fmt.Errorf("store at %s refused the connection: %s", addr, msg)
	}
}

// Addr is the store's address as given to Dial.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection; calls in flight fail. It returns once the
// client's reader goroutine has ended.
func (c *Client) Close() error {
	var err error
	c.once.Do(func() { err = c.conn.Close() })
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil // the connection had already failed; that was reported
	}
	return err
}

func (c *Client) readLoop() {
	r := bufio.NewReader(c.conn)
	var err error
	for {
		var body []byte
		body, err = readFrame(r, maxFrame)
		if err != nil {
			break
		}
		d := decoder{b: body}
		id := d.u64()
		if d.err != nil {
			err = errors.New("truncated response")
			break
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- d.b // buffered: never blocks
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("store at %s: connection lost (%v): %w", c.addr, err, ErrClosed)
	c.mu.Unlock()
	c.conn.Close()
	close(c.done)
}

// call sends one request and waits for its response body (status first).
// wait is how long the server may block on it; the client allows that plus
// replyGrace, or its own timeout for a quick op.
func (c *Client) call(ctx context.Context, what string, body []byte, wait time.Duration) (*decoder, error) {
	id := c.nextID.Add(1)
	ch := make(chan []byte, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}

	var e encoder
	e.u64(id)
	e.b = append(e.b, body...)
	if err := c.send(e.b); err != nil {
		forget()
		return nil, fmt.Errorf("store at %s: %s: %w", c.addr, what, err)
	}

	limit := c.timeout
	if wait > 0 {
		limit = wait + replyGrace
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return c.status(what, resp)
	case <-ctx.Done():
		// A blocking request's server-side timeout was cut to ctx's
		// deadline: its answer, naming what was missing, is due now and
		// says more than "deadline exceeded".
		if wait > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			select {
			case resp := <-ch:
				return c.status(what, resp)
			case <-time.After(deadlineGrace):
			case <-c.done:
			}
		}
		forget()
		c.cancelRemote(id)
		return nil, fmt.Errorf("store at %s: %s: %w", c.addr, what, ctx.Err())
	case <-c.done:
		// The reader may have delivered the answer just before it ended.
		select {
		case resp := <-ch:
			return c.status(what, resp)
		default:
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", what, err)
	case <-timer.C:
		forget()
		c.cancelRemote(id)
		return nil, fmt.Errorf("store at %s: %s: no reply within %s", c.addr, what, limit)
	}
}

func (c *Client) send(body []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(frame(body))
	return err
}

// cancelRemote tells the server to stop a blocking request we no longer
// wait for, so it does not linger there until its timeout.
func (c *Client) cancelRemote(id uint64) {
	var e encoder
	e.u64(c.nextID.Add(1))
	e.u8(uint8(opCancel))
	e.u64(id)
	c.send(e.b) // best effort: if the connection is broken, so is the request
}

// status turns a response's status into an error, or returns a decoder at
// the results.
func (c *Client) status(what string, resp []byte) (*decoder, error) {
	d := &decoder{b: resp}
	switch d.u8() {
	case statusOK:
		return d, nil
	case statusError:
		msg := string(d.str())
		return nil, fmt.Errorf("store at %s: %s", c.addr, msg)
	case statusTimeout:
		te := &TimeoutError{After: d.dur(), Missing: d.strs(), Total: int(d.u32())}
		if err := d.done(); err != nil {
			return nil, c.protocolError(what, err)
		}
		return nil, te
	case statusBarrier:
		be := &BarrierError{After: d.dur(), World: int(d.i32()), Missing: d.ints(), Disconnected: d.ints()}
		if err := d.done(); err != nil {
			return nil, c.protocolError(what, err)
		}
		if len(be.Disconnected) == 0 {
			be.Disconnected = nil
		}
		return nil, be
	case statusCanceled:
		return nil, fmt.Errorf("store at %s: %s: the store is shutting down: %w", c.addr, what, ErrClosed)
	default:
		return nil, c.protocolError(what, errors.New("unknown status"))
	}
}

func (c *Client) protocolError(what string, err error) error {
	return fmt.Errorf("store at %s: %s: bad response: %v", c.addr, what, err)
}

// MaxWorld bounds the world size of a barrier or exchange; it keeps a
// forged request from making the server list a billion missing ranks.
const MaxWorld = 1 << 16

func checkRank(what, name string, rank, world int) error {
	if world < 1 || world > MaxWorld {
		return fmt.Errorf("%s %q: world size %d is out of range (1 to %d)", what, name, world, MaxWorld)
	}
	if rank < 0 || rank >= world {
		return fmt.Errorf("%s %q: rank %d is out of range for world size %d", what, name, rank, world)
	}
	return nil
}

func checkKey(kind, key string) error {
	if key == "" {
		return fmt.Errorf("store: empty %s", kind)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("store: %s %.40q... is longer than %d bytes", kind, key, MaxKeySize)
	}
	return nil
}

// effectiveWait is timeout (or the client's if timeout <= 0), cut to what is
// left of ctx's deadline so the server's error, not ctx's, names what was
// missing.
func (c *Client) effectiveWait(ctx context.Context, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = c.timeout
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	return timeout
}

// Set stores value under key, replacing any value there, and wakes whoever
// waits for key.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey("key", key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("store: value for %q is %d bytes, more than the limit of %d", key, len(value), MaxValueSize)
	}
	var e encoder
	e.u8(uint8(opSet))
	e.str([]byte(key))
	e.str(value)
	d, err := c.call(ctx, fmt.Sprintf("set %q", key), e.b, 0)
	if err != nil {
		return err
	}
	return d.done()
}

// Get returns the value of key, waiting up to the client's timeout for some
// rank to set it.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	vals, err := c.GetAll(ctx, []string{key}, 0)
	if err != nil {
		return nil, err
	}
	return vals[0], nil
}

// GetAll waits until every key is set (up to timeout; <= 0 means the
// client's timeout) and returns their values in order. On timeout the error
// is a *TimeoutError naming the keys still missing.
func (c *Client) GetAll(ctx context.Context, keys []string, timeout time.Duration) ([][]byte, error) {
	return c.waitKeys(ctx, opGet, keys, timeout)
}

// Wait waits until every key is set (up to timeout; <= 0 means the client's
// timeout). On timeout the error is a *TimeoutError naming the keys still
// missing.
func (c *Client) Wait(ctx context.Context, keys []string, timeout time.Duration) error {
	_, err := c.waitKeys(ctx, opWait, keys, timeout)
	return err
}

func (c *Client) waitKeys(ctx context.Context, op opcode, keys []string, timeout time.Duration) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	for _, k := range keys {
		if err := checkKey("key", k); err != nil {
			return nil, err
		}
	}
	wait := c.effectiveWait(ctx, timeout)
	var e encoder
	e.u8(uint8(op))
	e.dur(wait)
	e.strs(keys)
	what := fmt.Sprintf("%s %s", op, quoteList(keys))
	d, err := c.call(ctx, what, e.b, wait)
	if err != nil {
		var te *TimeoutError
		if errors.As(err, &te) {
			te.Op = op.String()
		}
		return nil, err
	}
	if op == opWait {
		return nil, d.done()
	}
	n := d.count(4)
	vals := make([][]byte, 0, n)
	for range n {
		vals = append(vals, d.str())
	}
	if err := d.done(); err != nil {
		return nil, c.protocolError(what, err)
	}
	if len(vals) != len(keys) {
		return nil, c.protocolError(what, fmt.Errorf("%d values for %d keys", len(vals), len(keys)))
	}
	return vals, nil
}

// Add adds delta to the integer stored under key (a missing key counts as
// 0) and returns the new value. The value is kept as decimal text.
func (c *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey("key", key); err != nil {
		return 0, err
	}
	var e encoder
	e.u8(uint8(opAdd))
	e.str([]byte(key))
	e.i64(delta)
	what := fmt.Sprintf("add %q", key)
	d, err := c.call(ctx, what, e.b, 0)
	if err != nil {
		return 0, err
	}
	n := d.i64()
	if err := d.done(); err != nil {
		return 0, c.protocolError(what, err)
	}
	return n, nil
}

// Delete removes key and reports whether it was there.
func (c *Client) Delete(ctx context.Context, key string) (bool, error) {
	if err := checkKey("key", key); err != nil {
		return false, err
	}
	var e encoder
	e.u8(uint8(opDelete))
	e.str([]byte(key))
	what := fmt.Sprintf("delete %q", key)
	d, err := c.call(ctx, what, e.b, 0)
	if err != nil {
		return false, err
	}
	existed := d.u8() == 1
	if err := d.done(); err != nil {
		return false, c.protocolError(what, err)
	}
	return existed, nil
}

// Barrier returns once ranks 0..world-1 have all called Barrier with this
// name. A name may be used again once a barrier on it has completed. It
// fails with a *BarrierError naming the ranks that did not arrive when the
// timeout (<= 0: the client's) runs out, or at once if one of them
// disconnects from the store first.
func (c *Client) Barrier(ctx context.Context, name string, rank, world int, timeout time.Duration) error {
	if err := checkKey("barrier name", name); err != nil {
		return err
	}
	if err := checkRank("barrier", name, rank, world); err != nil {
		return err
	}
	wait := c.effectiveWait(ctx, timeout)
	var e encoder
	e.u8(uint8(opBarrier))
	e.str([]byte(name))
	e.i32(int32(rank))
	e.i32(int32(world))
	e.dur(wait)
	d, err := c.call(ctx, fmt.Sprintf("barrier %q", name), e.b, wait)
	if err != nil {
		var be *BarrierError
		if errors.As(err, &be) {
			be.Name = name
		}
		return err
	}
	return d.done()
}
