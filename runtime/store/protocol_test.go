package store

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var e encoder
	e.u8(7)
	e.i32(-3)
	e.i64(-1 << 40)
	e.dur(1500 * time.Millisecond)
	e.str([]byte("key"))
	e.strs([]string{"a", "", "ccc"})
	e.ints([]int{0, 5, -1})

	d := decoder{b: e.b}
	got := []any{d.u8(), d.i32(), d.i64(), d.dur(), string(d.str()), d.strs(), d.ints()}
	require.NoError(t, d.done())
	want := []any{uint8(7), int32(-3), int64(-1 << 40), 1500 * time.Millisecond, "key", []string{"a", "", "ccc"}, []int{0, 5, -1}}
	assert.Empty(t, cmp.Diff(want, got), "round trip (-want +got)")
}

func TestDecoderRejectsTruncatedAndForgedBodies(t *testing.T) {
	for name, body := range map[string][]byte{
		"short u64":           {1, 2, 3},
		"string past the end": {0, 0, 0, 9, 'a'},
		"huge list count":     {0xff, 0xff, 0xff, 0xff},
	} {
		d := decoder{b: body}
		d.u64()
		d.str()
		d.strs()
		assert.Error(t, d.done(), "%s: decoded without error", name)
	}
	d := decoder{b: []byte{1, 2}}
	d.u8()
	assert.Error(t, d.done(), "trailing bytes were not reported")
}

// FuzzServerRequest sends arbitrary request bodies from an authenticated
// client: the server must neither crash nor hang, and must still serve a
// well-behaved client afterwards.
func FuzzServerRequest(f *testing.F) {
	seed := func(op opcode, fill func(e *encoder)) {
		var e encoder
		e.u64(1)
		e.u8(uint8(op))
		fill(&e)
		f.Add(e.b)
	}
	seed(opSet, func(e *encoder) { e.str([]byte("k")); e.str([]byte("v")) })
	seed(opGet, func(e *encoder) { e.dur(time.Millisecond); e.strs([]string{"k", "x"}) })
	seed(opWait, func(e *encoder) { e.dur(time.Hour); e.strs([]string{"x"}) })
	seed(opAdd, func(e *encoder) { e.str([]byte("n")); e.i64(3) })
	seed(opDelete, func(e *encoder) { e.str([]byte("k")) })
	seed(opBarrier, func(e *encoder) { e.str([]byte("b")); e.i32(0); e.i32(2); e.dur(time.Millisecond) })
	seed(opBarrier, func(e *encoder) { e.str([]byte("b")); e.i32(-5); e.i32(-1); e.dur(time.Millisecond) })
	seed(opCancel, func(e *encoder) { e.u64(1) })
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 99})

	srv, err := Serve(context.Background(), "", testToken, quiet(nil))
	require.NoError(f, err)
	defer srv.Close()
	good, err := Dial(context.Background(), srv.Addr(), testToken)
	require.NoError(f, err)
	defer good.Close()

	f.Fuzz(func(t *testing.T, body []byte) {
		conn, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		require.NoError(t, handshake(context.Background(), conn, srv.Addr(), testToken, -1))
		conn.Write(frame(body))
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, good.Set(ctx, "alive", []byte("yes")), "the server stopped serving after %x", body)
	})
}
