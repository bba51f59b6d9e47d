package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The server's life: Serve listens, the accept loop takes connections and
// tracks them, Stats and WaitConns report on them, Close ends them all.

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
