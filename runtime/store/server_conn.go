package store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// One client connection: the handshake, the request loop, the dispatch of
// each op (blocking ones in goroutines of their own, cancelable) and the
// responses, errors encoded by kind.

// handshakeTimeout bounds how long an unauthenticated connection may take to
// send its handshake.
const handshakeTimeout = 10 * time.Second

// writeTimeout bounds one response write, so a client that stops reading
// cannot pin the server's goroutines.
const writeTimeout = 10 * time.Second

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
