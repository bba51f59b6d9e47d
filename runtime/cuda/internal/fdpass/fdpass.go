//go:build unix

package fdpass

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Exchange passes file descriptors (exported VMM allocations) between the
// ranks of a job on one host: every rank listens on a Unix-domain
// SOCK_SEQPACKET socket, and holds one connection to every peer on which it
// sends. A descriptor travels as SCM_RIGHTS ancillary data with a small
// header naming the sender and the key (the symmetric allocation's number).
//
// Each accepted connection must come from a process of our own uid
// (SO_PEERCRED) and prove the job token in its first message. Received
// descriptors wait in a mailbox until the allocation that needs them asks;
// a peer whose connection ends (its process died) fails every wait for it
// at once instead of letting it run to the timeout.
type Exchange struct {
	rank, world int
	token       string
	path        string
	ln          *net.UnixListener

	sendMu []sync.Mutex
	out    []*net.UnixConn // out[p]: our connection to peer p

	mu       sync.Mutex
	changed  chan struct{}          // closed and replaced on every mailbox change
	mailbox  map[mailKey]int        // received descriptors not yet taken
	gone     map[int]error          // peers whose connection to us ended
	in       map[int]*net.UnixConn  // in[p]: peer p's connection to us
	accepted map[*net.UnixConn]bool // every accepted connection, handshake or not
	rejected int                    // connections refused (wrong uid or token)
	closed   bool
	wg       sync.WaitGroup
}

type mailKey struct {
	from int
	key  uint64
}

const (
	fdMagic      = 0x68697266 // "hirf"
	msgHello     = 1
	msgFD        = 2
	fdHeaderSize = 24
)

// socketDir is where ranks put their sockets: private to the user.
func socketDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("hir-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	return dir, nil
}

// Listen opens this rank's socket (rank of world, proving token to its
// peers). Its Path is what peers dial (publish it through the store).
func Listen(rank, world int, token string) (*Exchange, error) {
	dir, err := socketDir()
	if err != nil {
		return nil, err
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fmt.Sprintf("r%d-%d-%s.sock", rank, os.Getpid(), hex.EncodeToString(rnd[:])))
	if len(path) >= 108 { // sun_path
		return nil, fmt.Errorf("unix socket path %q is too long; set TMPDIR to a shorter directory", path)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	x := &Exchange{
		rank: rank, world: world, token: token, path: path, ln: ln,
		sendMu: make([]sync.Mutex, world), out: make([]*net.UnixConn, world),
		changed: make(chan struct{}), mailbox: map[mailKey]int{}, gone: map[int]error{}, in: map[int]*net.UnixConn{},
		accepted: map[*net.UnixConn]bool{},
	}
	x.wg.Add(1)
	go x.acceptLoop()
	return x, nil
}

// Path is the socket this rank listens on: what peers pass to Connect.
// Removing it once every peer has connected leaves the exchange working.
func (x *Exchange) Path() string { return x.path }

// Connect dials every peer's socket (paths indexed by rank) and introduces
// this rank.
func (x *Exchange) Connect(paths []string, timeout time.Duration) error {
	if len(paths) != x.world {
		return fmt.Errorf("fd exchange: %d socket paths for a world of %d", len(paths), x.world)
	}
	for p, path := range paths {
		if p == x.rank {
			continue
		}
		c, err := net.DialTimeout("unixpacket", path, timeout)
		if err != nil {
			return fmt.Errorf("rank %d: connect to rank %d's socket %s: %w", x.rank, p, path, err)
		}
		uc := c.(*net.UnixConn)
		x.mu.Lock()
		x.out[p] = uc
		x.mu.Unlock()
		hdr := header(msgHello, x.rank, 0)
		hdr = append(hdr, x.token...)
		if _, _, err := uc.WriteMsgUnix(hdr, nil, nil); err != nil {
			return fmt.Errorf("rank %d: hello to rank %d: %w", x.rank, p, err)
		}
	}
	return nil
}

func header(kind, from int, key uint64) []byte {
	b := make([]byte, fdHeaderSize)
	binary.LittleEndian.PutUint32(b[0:], fdMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(kind))
	binary.LittleEndian.PutUint32(b[8:], uint32(from))
	binary.LittleEndian.PutUint64(b[16:], key)
	return b
}

func (x *Exchange) acceptLoop() {
	defer x.wg.Done()
	for {
		c, err := x.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			c.Close()
			return
		}
		x.accepted[c] = true
		x.wg.Add(1)
		x.mu.Unlock()
		go x.serve(c)
	}
}

func (x *Exchange) reject() {
	x.mu.Lock()
	x.rejected++
	x.mu.Unlock()
}

// serve reads one peer's messages until its connection ends.
func (x *Exchange) serve(c *net.UnixConn) {
	defer x.wg.Done()
	defer func() {
		c.Close()
		x.mu.Lock()
		delete(x.accepted, c)
		x.mu.Unlock()
	}()
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		x.reject() // another user's process: never take descriptors from it
		return
	}
	buf := make([]byte, 512)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || n < fdHeaderSize {
		x.reject()
		return
	}
	closeRights(oob[:oobn])
	kind, from, _, ok := parseHeader(buf[:n])
	if !ok || kind != msgHello || string(buf[fdHeaderSize:n]) != x.token || from < 0 || from >= x.world || from == x.rank {
		x.reject()
		return
	}
	c.SetReadDeadline(time.Time{})
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return
	}
	x.in[from] = c
	x.mu.Unlock()

	var endErr error
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			endErr = err
			break
		}
		fds := rights(oob[:oobn])
		kind, _, key, ok := parseHeader(buf[:n])
		if !ok || kind != msgFD || len(fds) != 1 {
			closeAll(fds)
			endErr = fmt.Errorf("malformed message from rank %d", from)
			break
		}
		x.mu.Lock()
		if old, dup := x.mailbox[mailKey{from, key}]; dup {
			syscall.Close(old)
		}
		x.mailbox[mailKey{from, key}] = fds[0]
		x.notifyLocked()
		x.mu.Unlock()
	}
	if endErr == nil || errors.Is(endErr, net.ErrClosed) {
		endErr = errors.New("connection closed")
	}
	x.mu.Lock()
	delete(x.in, from)
	if !x.closed {
		x.gone[from] = endErr
	}
	x.notifyLocked()
	x.mu.Unlock()
}

func parseHeader(b []byte) (kind, from int, key uint64, ok bool) {
	if len(b) < fdHeaderSize || binary.LittleEndian.Uint32(b[0:]) != fdMagic {
		return 0, 0, 0, false
	}
	return int(binary.LittleEndian.Uint32(b[4:])), int(binary.LittleEndian.Uint32(b[8:])), binary.LittleEndian.Uint64(b[16:]), true
}

func rights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeRights(oob []byte) { closeAll(rights(oob)) }

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func (x *Exchange) notifyLocked() {
	close(x.changed)
	x.changed = make(chan struct{})
}

// Send passes fd to peer under key. The fd stays the caller's: the kernel
// holds its own reference while the message is in flight.
func (x *Exchange) Send(peer int, key uint64, fd int) error {
	x.mu.Lock()
	c := x.out[peer]
	x.mu.Unlock()
	if c == nil {
		return fmt.Errorf("rank %d: no connection to rank %d", x.rank, peer)
	}
	x.sendMu[peer].Lock()
	defer x.sendMu[peer].Unlock()
	if _, _, err := c.WriteMsgUnix(header(msgFD, x.rank, key), syscall.UnixRights(fd), nil); err != nil {
		return fmt.Errorf("rank %d: send handle to rank %d: %w (did its process die?)", x.rank, peer, err)
	}
	return nil
}

// Recv waits for the descriptor peer sent under key and hands it over
// (the caller closes it). It fails at once when peer's connection has
// ended, and after timeout otherwise.
func (x *Exchange) Recv(peer int, key uint64, timeout time.Duration, what string) (int, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		x.mu.Lock()
		if fd, ok := x.mailbox[mailKey{peer, key}]; ok {
			delete(x.mailbox, mailKey{peer, key})
			x.mu.Unlock()
			return fd, nil
		}
		if x.closed {
			x.mu.Unlock()
			return -1, fmt.Errorf("rank %d: %s: runtime closed while waiting for rank %d's handle", x.rank, what, peer)
		}
		if err, ok := x.gone[peer]; ok {
			x.mu.Unlock()
			return -1, fmt.Errorf("rank %d: %s: rank %d's connection ended before it sent its handle (%v); did its process die?", x.rank, what, peer, err)
		}
		ch := x.changed
		x.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return -1, fmt.Errorf("rank %d: %s: rank %d did not send its handle within %v", x.rank, what, peer, timeout)
		}
	}
}

// CloseFD closes a descriptor the caller holds (one Recv handed over, or
// an exported handle), for callers that must build off unix too.
func CloseFD(fd int) error { return syscall.Close(fd) }

// Pending is the number of received descriptors nobody has taken.
func (x *Exchange) Pending() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.mailbox)
}

// Close shuts every connection, closes descriptors nobody took and removes
// the socket file.
func (x *Exchange) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	for _, c := range x.out {
		if c != nil {
			c.Close()
		}
	}
	for c := range x.accepted {
		c.Close()
	}
	x.notifyLocked()
	x.mu.Unlock()
	err := x.ln.Close() // also removes the socket file
	x.wg.Wait()
	x.mu.Lock()
	for k, fd := range x.mailbox {
		syscall.Close(fd)
		delete(x.mailbox, k)
	}
	x.mu.Unlock()
	os.Remove(x.path)
	return err
}
