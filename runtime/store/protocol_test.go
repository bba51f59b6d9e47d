package store

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	if err := d.done(); err != nil {
		t.Fatal(err)
	}
	want := []any{uint8(7), int32(-3), int64(-1 << 40), 1500 * time.Millisecond, "key", []string{"a", "", "ccc"}, []int{0, 5, -1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
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
		if d.done() == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	d := decoder{b: []byte{1, 2}}
	d.u8()
	if d.done() == nil {
		t.Error("trailing bytes were not reported")
	}
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
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	good, err := Dial(context.Background(), srv.Addr(), testToken)
	if err != nil {
		f.Fatal(err)
	}
	defer good.Close()

	f.Fuzz(func(t *testing.T, body []byte) {
		conn, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := handshake(context.Background(), conn, srv.Addr(), testToken, -1); err != nil {
			t.Fatal(err)
		}
		conn.Write(frame(body))
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := good.Set(ctx, "alive", []byte("yes")); err != nil {
			t.Fatalf("the server stopped serving after %x: %v", body, err)
		}
	})
}
