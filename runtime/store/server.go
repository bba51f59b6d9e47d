package store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds how long an unauthenticated connection may take to
// send its handshake.
const handshakeTimeout = 10 * time.Second

// writeTimeout bounds one response write, so a client that stops reading
// cannot pin the server's goroutines.
const writeTimeout = 10 * time.Second

// Server is a running store. All of its state is in memory and dies with it.
type Server struct {
	ln        net.Listener
	tokenHash [sha256.Size]byte
	log       *slog.Logger

	ctx    context.Context // canceled by Close: ends every connection
	cancel context.CancelFunc
	stopAf atomic.Pointer[func() bool] // unregisters the Serve context's AfterFunc
	once   sync.Once
	wg     sync.WaitGroup

	connMu      sync.Mutex
	conns       map[net.Conn]struct{}
	connsClosed chan struct{} // closed and replaced when a connection ends

	rejected atomic.Int64
	waiting  atomic.Int64

	st state
}

// ServeOption configures Serve.
type ServeOption func(*Server)

// WithLogger sets where the server logs refused connections and protocol
// errors (default slog.Default()).
func WithLogger(l *slog.Logger) ServeOption {
	return func(s *Server) { s.log = l }
}

// Serve starts a store listening on addr ("host:port"). An empty host, or an
// empty addr, means 127.0.0.1: the store is reachable from this machine only
// unless the caller names another interface (for example "0.0.0.0:29500" for
// a job across nodes). Port 0 picks a free port; Addr says which. Every
// client must present token, which must not be empty. The server stops when
// ctx is done or Close is called.
func Serve(ctx context.Context, addr, token string, opts ...ServeOption) (*Server, error) {
	if token == "" {
		return nil, errors.New("store: the job token is empty")
	}
	addr, err := loopbackDefault(addr)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Server{
		ln:          ln,
		tokenHash:   sha256.Sum256([]byte(token)),
		log:         slog.Default(),
		conns:       make(map[net.Conn]struct{}),
		connsClosed: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	s.st.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	// Registered last: if ctx is already done, Close runs at once and must
	// find the server complete.
	stop := context.AfterFunc(ctx, func() { s.Close() })
	s.stopAf.Store(&stop)
	return s, nil
}

// loopbackDefault fills in 127.0.0.1 for an empty host and port 0 for an
// empty addr.
func loopbackDefault(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("store: bad address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Addr is the address the server listens on, "host:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Stats is a snapshot of the server's counters.
type Stats struct {
	Conns          int   // authenticated or handshaking connections open now
	Keys           int   // keys stored
	Waiting        int64 // blocked requests (get, wait, barrier) now
	RejectedTokens int64 // connections refused for a wrong token, ever
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.connMu.Lock()
	n := len(s.conns)
	s.connMu.Unlock()
	s.st.mu.Lock()
	k := len(s.st.data)
	s.st.mu.Unlock()
	return Stats{Conns: n, Keys: k, Waiting: s.waiting.Load(), RejectedTokens: s.rejected.Load()}
}

// Close stops the server: it stops listening, closes every connection
// (waiting clients get an error), and returns once all of the server's
// goroutines have ended. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		if stop := s.stopAf.Load(); stop != nil {
			(*stop)()
		}
		s.cancel()
		err = s.ln.Close()
		s.connMu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.connMu.Unlock()
		s.wg.Wait()
	})
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			// Out of file descriptors and the like: wait, then go on.
			s.log.Warn("store: accept failed", "err", err)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// track registers c so Close can close it; it fails once the server is closing.
func (s *Server) track(c net.Conn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.connMu.Lock()
	delete(s.conns, c)
	close(s.connsClosed)
	s.connsClosed = make(chan struct{})
	s.connMu.Unlock()
}

// WaitConns returns once at most n connections are open, or with ctx's
// error. The rank that serves the store calls it before Close so that it
// does not cut off ranks still reading their last answer.
func (s *Server) WaitConns(ctx context.Context, n int) error {
	for {
		s.connMu.Lock()
		open, ch := len(s.conns), s.connsClosed
		s.connMu.Unlock()
		if open <= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("store: %d clients still connected: %w", open, ctx.Err())
		}
	}
}

// conn is one authenticated client connection.
type conn struct {
	s       *Server
	c       net.Conn
	rank    int // -1 when the client is not a rank
	writeMu sync.Mutex

	ctx      context.Context
	reqMu    sync.Mutex
	inflight map[uint64]inflightReq
	reqs     sync.WaitGroup
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer s.untrack(c)
	defer c.Close()

	r := bufio.NewReader(c)
	rank, ok := s.handshake(c, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	cc := &conn{s: s, c: c, rank: rank, ctx: ctx, inflight: make(map[uint64]inflightReq)}
	if rank >= 0 {
		s.st.rankConnected(rank)
	}
	err := cc.readLoop(r)
	// The client is gone (or broke the protocol, or the server is closing):
	// end its waiting requests, then let barriers know its rank left.
	cancel()
	c.Close()
	cc.reqs.Wait()
	if rank >= 0 {
		s.st.rankDisconnected(rank)
	}
	if err != nil && s.ctx.Err() == nil {
		s.log.Warn("store: dropping client", "remote", c.RemoteAddr().String(), "rank", rank, "err", err)
	}
}

// handshake checks the client's magic, version and token; it reports the
// client's rank and whether the connection may go on.
func (s *Server) handshake(c net.Conn, r *bufio.Reader) (int, bool) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	body, err := readFrame(r, maxHandshake)
	if err != nil {
		s.log.Warn("store: bad handshake", "remote", c.RemoteAddr().String(), "err", err)
		return 0, false
	}
	reply := func(status uint8, msg string) bool {
		var e encoder
		e.u8(status)
		e.str([]byte(msg))
		_, err := c.Write(frame(e.b))
		return err == nil
	}
	if len(body) < len(protocolMagic)+1+4 || string(body[:len(protocolMagic)]) != protocolMagic {
		s.log.Warn("store: not a hir store client", "remote", c.RemoteAddr().String())
		return 0, false
	}
	d := decoder{b: body[len(protocolMagic):]}
	version := d.u8()
	rank := int(d.i32())
	token := d.b
	if version != protocolVersion {
		reply(handshakeBadVersion, fmt.Sprintf("store speaks protocol version %d, client %d", protocolVersion, version))
		return 0, false
	}
	// Hash both sides so the comparison takes the same time whatever the
	// token's length.
	got := sha256.Sum256(token)
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		s.rejected.Add(1)
		s.log.Warn("store: rejected a client with a wrong job token", "remote", c.RemoteAddr().String(), "rank", rank)
		reply(handshakeBadToken, "wrong job token")
		return 0, false
	}
	if rank < -1 {
		rank = -1
	}
	if !reply(handshakeAccepted, "") {
		return 0, false
	}
	c.SetDeadline(time.Time{})
	return rank, true
}

func (cc *conn) readLoop(r *bufio.Reader) error {
	for {
		body, err := readFrame(r, maxFrame)
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				return err
			}
			return nil // the client closed or died: nothing to report
		}
		d := decoder{b: body}
		id := d.u64()
		op := opcode(d.u8())
		if d.err != nil {
			return fmt.Errorf("request: %w", d.err)
		}
		if err := cc.dispatch(id, op, &d); err != nil {
			return fmt.Errorf("%s request: %w", op, err)
		}
	}
}

// dispatch runs the quick ops in order and starts the blocking ones in their
// own goroutine. An error is a protocol error: the connection is dropped.
func (cc *conn) dispatch(id uint64, op opcode, d *decoder) error {
	st := &cc.s.st
	switch op {
	case opSet:
		key, val := string(d.str()), d.str()
		if err := d.done(); err != nil {
			return err
		}
		st.set(key, val)
		cc.respond(id, statusOK, nil)
	case opAdd:
		key, delta := string(d.str()), d.i64()
		if err := d.done(); err != nil {
			return err
		}
		n, err := st.add(key, delta)
		if err != nil {
			cc.respondError(id, err)
			return nil
		}
		var e encoder
		e.i64(n)
		cc.respond(id, statusOK, e.b)
	case opDelete:
		key := string(d.str())
		if err := d.done(); err != nil {
			return err
		}
		var e encoder
		if st.delete(key) {
			e.u8(1)
		} else {
			e.u8(0)
		}
		cc.respond(id, statusOK, e.b)
	case opCancel:
		target := d.u64()
		if err := d.done(); err != nil {
			return err
		}
		// Wait for the canceled request to end, so a retry that follows on
		// this connection (a barrier, say) finds it gone.
		cc.reqMu.Lock()
		req, ok := cc.inflight[target]
		cc.reqMu.Unlock()
		if ok {
			req.cancel()
			<-req.done
		}
	case opGet, opWait:
		timeout, keys := d.dur(), d.strs()
		if err := d.done(); err != nil {
			return err
		}
		cc.goBlocking(id, func(ctx context.Context) {
			vals, err := st.waitKeys(ctx, op.String(), keys, timeout)
			if err != nil {
				cc.respondError(id, err)
				return
			}
			var e encoder
			if op == opGet {
				e.u32(uint32(len(vals)))
				for _, v := range vals {
					e.str(v)
				}
			}
			cc.respond(id, statusOK, e.b)
		})
	case opBarrier:
		name, rank, world, timeout := string(d.str()), int(d.i32()), int(d.i32()), d.dur()
		if err := d.done(); err != nil {
			return err
		}
		cc.goBlocking(id, func(ctx context.Context) {
			if err := st.barrier(ctx, name, rank, world, timeout); err != nil {
				cc.respondError(id, err)
				return
			}
			cc.respond(id, statusOK, nil)
		})
	default:
		return fmt.Errorf("unknown op %d", uint8(op))
	}
	return nil
}

// goBlocking runs a blocking request in its own goroutine, cancelable by an
// opCancel naming its id and ended when the connection goes.
func (cc *conn) goBlocking(id uint64, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(cc.ctx)
	req := inflightReq{cancel: cancel, done: make(chan struct{})}
	cc.reqMu.Lock()
	cc.inflight[id] = req
	cc.reqMu.Unlock()
	cc.reqs.Add(1)
	cc.s.waiting.Add(1)
	go func() {
		defer cc.reqs.Done()
		defer func() {
			cc.reqMu.Lock()
			delete(cc.inflight, id)
			cc.reqMu.Unlock()
			cancel()
			cc.s.waiting.Add(-1)
			close(req.done)
		}()
		run(ctx)
	}()
}

type inflightReq struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (cc *conn) respond(id uint64, status uint8, payload []byte) {
	var e encoder
	e.u64(id)
	e.u8(status)
	e.b = append(e.b, payload...)
	cc.writeMu.Lock()
	defer cc.writeMu.Unlock()
	cc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := cc.c.Write(frame(e.b)); err != nil {
		// The reader will see the broken connection and clean up.
		cc.c.Close()
	}
}

func (cc *conn) respondError(id uint64, err error) {
	var e encoder
	var te *TimeoutError
	var be *BarrierError
	switch {
	case errors.As(err, &te):
		e.dur(te.After)
		e.strs(te.Missing)
		e.u32(uint32(te.Total))
		cc.respond(id, statusTimeout, e.b)
	case errors.As(err, &be):
		e.dur(be.After)
		e.i32(int32(be.World))
		e.ints(be.Missing)
		e.ints(be.Disconnected)
		cc.respond(id, statusBarrier, e.b)
	case errors.Is(err, context.Canceled):
		cc.respond(id, statusCanceled, nil)
	default:
		e.str([]byte(err.Error()))
		cc.respond(id, statusError, e.b)
	}
}

// state is the store's data. Every change closes changed and makes a new
// one, so a waiter takes the current channel under mu, lets go of mu, and
// wakes on the next change to look again.
type state struct {
	mu       sync.Mutex
	data     map[string][]byte
	barriers map[string]*barrierRound
	live     map[int]int  // open connections per rank
	gone     map[int]bool // ranks whose last connection closed
	changed  chan struct{}
}

// barrierRound is one use of a named barrier; when every rank has arrived
// it is done and the name starts afresh.
type barrierRound struct {
	world   int
	arrived map[int]bool  // ranks waiting in the round now
	left    map[int]bool  // ranks that arrived, then gave up (timeout, cancel, died)
	done    chan struct{} // closed when all world ranks are in arrived
}

func (st *state) init() {
	st.data = make(map[string][]byte)
	st.barriers = make(map[string]*barrierRound)
	st.live = make(map[int]int)
	st.gone = make(map[int]bool)
	st.changed = make(chan struct{})
}

// notify wakes every waiter; st.mu must be held.
func (st *state) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

func (st *state) set(key string, val []byte) {
	st.mu.Lock()
	st.data[key] = val
	st.notify()
	st.mu.Unlock()
}

func (st *state) delete(key string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.data[key]
	delete(st.data, key)
	return ok
}

// add treats a missing key as 0 and stores the sum as decimal text, so Get
// of a counter reads "3".
func (st *state) add(key string, delta int64) (int64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var cur int64
	if v, ok := st.data[key]; ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("add to %q: its value is not an integer", key)
		}
		cur = n
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, fmt.Errorf("add %d to %q (%d) overflows int64", delta, key, cur)
	}
	cur += delta
	st.data[key] = []byte(strconv.FormatInt(cur, 10))
	st.notify()
	return cur, nil
}

// waitKeys waits until every key is set and returns their values.
func (st *state) waitKeys(ctx context.Context, op string, keys []string, timeout time.Duration) ([][]byte, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		st.mu.Lock()
		vals, missing := st.lookup(keys)
		ch := st.changed
		st.mu.Unlock()
		if missing == nil {
			return vals, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			st.mu.Lock()
			vals, missing = st.lookup(keys)
			st.mu.Unlock()
			if missing == nil {
				return vals, nil
			}
			return nil, &TimeoutError{Op: op, Missing: missing, Total: len(keys), After: timeout}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lookup returns the values of keys, or the keys that are missing; st.mu
// must be held.
func (st *state) lookup(keys []string) ([][]byte, []string) {
	var missing []string
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		v, ok := st.data[k]
		if !ok {
			missing = append(missing, k)
		}
		vals[i] = v
	}
	return vals, missing
}

func (st *state) rankConnected(rank int) {
	st.mu.Lock()
	st.live[rank]++
	delete(st.gone, rank)
	st.mu.Unlock()
}

func (st *state) rankDisconnected(rank int) {
	st.mu.Lock()
	st.live[rank]--
	if st.live[rank] <= 0 {
		delete(st.live, rank)
		st.gone[rank] = true
		st.notify()
	}
	st.mu.Unlock()
}

func (st *state) barrier(ctx context.Context, name string, rank, world int, timeout time.Duration) error {
	if err := checkRank("barrier", name, rank, world); err != nil {
		return err
	}
	st.mu.Lock()
	round := st.barriers[name]
	if round == nil {
		round = &barrierRound{world: world, arrived: make(map[int]bool), left: make(map[int]bool), done: make(chan struct{})}
		st.barriers[name] = round
	}
	if round.world != world {
		st.mu.Unlock()
		return fmt.Errorf("barrier %q: rank %d says the world size is %d, but ranks already waiting say %d",
			name, rank, world, round.world)
	}
	if round.arrived[rank] {
		st.mu.Unlock()
		return fmt.Errorf("barrier %q: rank %d arrived twice", name, rank)
	}
	round.arrived[rank] = true
	delete(round.left, rank)
	if len(round.arrived) == world {
		close(round.done)
		delete(st.barriers, name)
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		st.mu.Lock()
		if isClosed(round.done) {
			st.mu.Unlock()
			return nil
		}
		if gone := round.disconnected(st); gone != nil {
			err := &BarrierError{Name: name, World: world, Missing: round.missing(gone), Disconnected: gone, After: timeout}
			round.leave(st, name, rank)
			st.mu.Unlock()
			return err
		}
		ch := st.changed
		st.mu.Unlock()

		select {
		case <-round.done:
			return nil
		case <-ch:
		case <-timer.C:
			st.mu.Lock()
			defer st.mu.Unlock()
			if isClosed(round.done) {
				return nil
			}
			gone := round.disconnected(st)
			err := &BarrierError{Name: name, World: world, Missing: round.missing(gone), Disconnected: gone, After: timeout}
			round.leave(st, name, rank)
			return err
		case <-ctx.Done():
			st.mu.Lock()
			defer st.mu.Unlock()
			if isClosed(round.done) {
				return nil
			}
			round.leave(st, name, rank)
			return ctx.Err()
		}
	}
}

// disconnected lists the ranks not waiting in the round whose connection to
// the store has closed: the round cannot complete. st.mu held.
func (r *barrierRound) disconnected(st *state) []int {
	var out []int
	for i := range r.world {
		if !r.arrived[i] && st.gone[i] {
			out = append(out, i)
		}
	}
	return out
}

// missing lists, in order, the ranks that never came to the round, plus
// those in gone. A rank that came and gave up on its own timeout is not
// blamed: it did arrive. st.mu held.
func (r *barrierRound) missing(gone []int) []int {
	var out []int
	for i := range r.world {
		if (!r.arrived[i] && !r.left[i]) || slices.Contains(gone, i) {
			out = append(out, i)
		}
	}
	return out
}

// leave takes a rank that gives up out of the round, so it may try the
// barrier again; st.mu held.
func (r *barrierRound) leave(st *state, name string, rank int) {
	delete(r.arrived, rank)
	r.left[rank] = true
	if len(r.arrived) == 0 && st.barriers[name] == r {
		delete(st.barriers, name)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
