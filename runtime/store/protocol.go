package store

// The wire protocol.
//
// Every message, both ways, is a frame: a 4-byte big-endian length N and then
// N bytes of body. Inside a body, integers are big-endian; a "str" (keys,
// values, messages) is a u32 length and that many bytes; a duration is an i64
// of nanoseconds; a list is a u32 count and its items.
//
// Handshake. The client speaks first:
//
//	"HIRS" | u8 version (1) | i32 rank (-1: not a rank) | token (rest of body)
//
// and the server answers with one frame:
//
//	u8 status (0 accepted, 1 wrong token, 2 unsupported version) | str message
//
// A refused connection is closed after that answer. Until the handshake is
// done the server reads at most maxHandshake bytes and waits at most
// handshakeTimeout, so an unauthenticated peer can neither hold memory nor a
// goroutine for long.
//
// Requests (client to server), after the handshake:
//
//	u64 id | u8 op | fields
//
//	opSet      str key | str value                  -> (nothing)
//	opGet      dur timeout | list of str keys       -> list of str values
//	opWait     dur timeout | list of str keys       -> (nothing)
//	opAdd      str key | i64 delta                  -> i64 new value
//	opDelete   str key                              -> u8 existed
//	opBarrier  str name | i32 rank | i32 world | dur timeout -> (nothing)
//	opCancel   u64 id of an earlier request         (no response)
//
// Responses (server to client) carry the request's id, so a client may have
// several requests in flight on one connection:
//
//	u64 id | u8 status | fields
//
//	statusOK       the op's results as listed above
//	statusError    str message
//	statusTimeout  dur waited | list of str keys still missing |
//	               u32 how many keys were waited for
//	statusBarrier  dur waited | i32 world | list of i32 missing ranks |
//	               list of i32 ranks that disconnected before arriving
//	statusCanceled (nothing): the request was canceled (opCancel, or the
//	               server is closing)
//
// Set, Add and Delete are applied in the order they arrive on a connection;
// Get, Wait and Barrier block in their own goroutine on the server until they
// are satisfied, time out (the timeout travels with the request, so the
// server can name what was missing) or are canceled.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

const (
	protocolMagic   = "HIRS"
	protocolVersion = 1

	// maxHandshake bounds the handshake frame (the job token is in it).
	maxHandshake = 4096
	// MaxValueSize bounds a value; any frame larger than this (plus room for
	// the header) is a protocol error and closes the connection.
	MaxValueSize = 64 << 20
	maxFrame     = MaxValueSize + 64<<10
	// MaxKeySize bounds a key or barrier name.
	MaxKeySize = 4096
)

const (
	handshakeAccepted   = 0
	handshakeBadToken   = 1
	handshakeBadVersion = 2
)

type opcode uint8

const (
	opSet opcode = iota + 1
	opGet
	opWait
	opAdd
	opDelete
	opBarrier
	opCancel
)

func (o opcode) String() string {
	switch o {
	case opSet:
		return "set"
	case opGet:
		return "get"
	case opWait:
		return "wait"
	case opAdd:
		return "add"
	case opDelete:
		return "delete"
	case opBarrier:
		return "barrier"
	case opCancel:
		return "cancel"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

const (
	statusOK       = 0
	statusError    = 1
	statusTimeout  = 2
	statusBarrier  = 3
	statusCanceled = 4
)

// errFrameTooLarge is returned by readFrame for a length over the limit.
var errFrameTooLarge = errors.New("frame too large")

// readFrame reads one frame of at most limit bytes of body.
func readFrame(r io.Reader, limit int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", errFrameTooLarge, n, limit)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// frame prefixes body with its length, in one slice so a single Write sends
// the whole frame.
func frame(body []byte) []byte {
	out := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...)
}

// encoder appends fields to a body.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) i32(v int32)  { e.u32(uint32(v)) }
func (e *encoder) i64(v int64)  { e.u64(uint64(v)) }
func (e *encoder) dur(d time.Duration) {
	e.i64(int64(d))
}
func (e *encoder) str(s []byte) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) strs(list []string) {
	e.u32(uint32(len(list)))
	for _, s := range list {
		e.str([]byte(s))
	}
}
func (e *encoder) ints(list []int) {
	e.u32(uint32(len(list)))
	for _, v := range list {
		e.i32(int32(v))
	}
}

// decoder reads fields from a body; the first short read sticks as err and
// every later read returns zero values, so callers check err once at the end.
type decoder struct {
	b   []byte
	err error
}

var errShortBody = errors.New("truncated message")

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShortBody
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}
func (d *decoder) i32() int32 { return int32(d.u32()) }
func (d *decoder) i64() int64 { return int64(d.u64()) }
func (d *decoder) dur() time.Duration {
	v := d.i64()
	if v < 0 {
		v = 0
	}
	return time.Duration(v)
}
func (d *decoder) str() []byte {
	n := d.u32()
	if uint64(n) > math.MaxInt32 {
		d.err = errShortBody
		return nil
	}
	return d.take(int(n))
}

// count reads a list length and checks that at least min bytes per item are
// left, so a forged count cannot make us allocate a huge slice.
func (d *decoder) count(minItem int) int {
	n := d.u32()
	if d.err != nil {
		return 0
	}
	if uint64(n)*uint64(minItem) > uint64(len(d.b)) {
		d.err = errShortBody
		return 0
	}
	return int(n)
}

func (d *decoder) strs() []string {
	n := d.count(4)
	out := make([]string, 0, n)
	for range n {
		out = append(out, string(d.str()))
	}
	return out
}

func (d *decoder) ints() []int {
	n := d.count(4)
	out := make([]int, 0, n)
	for range n {
		out = append(out, int(d.i32()))
	}
	return out
}

// done reports a decoding error, or trailing bytes, as a protocol error.
func (d *decoder) done() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d unexpected trailing bytes", len(d.b))
	}
	return nil
}
