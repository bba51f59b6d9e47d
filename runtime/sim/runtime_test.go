package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func TestRegisteredAsSim(t *testing.T) {
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Name() != "sim" || rt.WorldSize() != 2 || len(rt.Ranks()) != 2 {
		t.Errorf("got %s with %d ranks %v", rt.Name(), rt.WorldSize(), rt.Ranks())
	}
	if _, err := rt.Device(2); err == nil {
		t.Error("device 2 of 2 ranks should be an error")
	}
	if _, err := New(runtime.Config{WorldSize: 0}); err == nil {
		t.Error("world size 0 should be an error")
	}
}

// The k-th symmetric alloc of every rank is one range; writes through a
// peer buffer and through the contiguous view land in the owner's shard.
func TestSymmetricAliasing(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 5*time.Second)
	bufs := make([]runtime.Buffer, D)
	mustAll(t, onAll(rt, func(d *Device) error {
		var err error
		bufs[d.rank], err = d.Alloc(8, ir.Symmetric) // two f32 per rank
		return err
	}))
	if got := bufs[0].Size(); got != DefaultGranularity {
		t.Errorf("symmetric shard size = %d, want it rounded up to %d", got, DefaultGranularity)
	}
	d0 := rt.devices[0]
	// Rank 0 writes into rank 2's shard through a peer buffer.
	pb, err := d0.PeerBuffer(bufs[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := d0.CopyFromHost(tensorOf(pb, ir.F32, 2), encode(ir.F32, []float64{7, 8}), nil); err != nil {
		t.Fatal(err)
	}
	// Rank 1 writes into rank 0's shard through its contiguous view.
	d1 := rt.devices[1]
	cv, err := d1.ContiguousView(bufs[1])
	if err != nil {
		t.Fatal(err)
	}
	if cv.Size() != D*bufs[1].Size() {
		t.Errorf("contiguous view is %d bytes, want %d", cv.Size(), D*bufs[1].Size())
	}
	if err := d1.CopyFromHost(runtime.Tensor{Buf: cv, Offset: 4, DType: ir.F32, Shape: []int64{1}}, encode(ir.F32, []float64{5}), nil); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(d0.DefaultStream().Synchronize(), d1.DefaultStream().Synchronize()); err != nil {
		t.Fatal(err)
	}
	got2, err := download(rt.devices[2], tensorOf(bufs[2], ir.F32, 2))
	if err != nil {
		t.Fatal(err)
	}
	if !sameFloats(got2, []float64{7, 8}) {
		t.Errorf("rank 2's shard = %v, want [7 8] written by rank 0", got2)
	}
	got0, err := download(d0, tensorOf(bufs[0], ir.F32, 2))
	if err != nil {
		t.Fatal(err)
	}
	if !sameFloats(got0, []float64{0, 5}) {
		t.Errorf("rank 0's shard = %v, want [0 5] written through rank 1's view", got0)
	}
	// The view reads every shard, rank r at r × Size().
	all, err := download(d1, runtime.Tensor{Buf: cv, DType: ir.F32, Shape: []int64{D, 2}, Strides: []int64{bufs[0].Size() / 4, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !sameFloats(all, []float64{0, 5, 0, 0, 7, 8}) {
		t.Errorf("contiguous view = %v", all)
	}
	if p, _ := d0.PeerBuffer(bufs[0], 2); p != pb {
		t.Error("PeerBuffer should return the same mapping again")
	}
	if rt.LiveBuffers() != D+2 {
		t.Errorf("live = %d, want %d shards and 2 views", rt.LiveBuffers(), D)
	}
	mustAll(t, onAll(rt, func(d *Device) error { return d.Free(bufs[d.rank]) }))
	if n := rt.LiveBuffers(); n != 0 {
		t.Errorf("%d buffers live after the collective free", n)
	}
	if err := d0.CopyFromHost(tensorOf(pb, ir.F32, 2), make([]byte, 8), nil); err == nil || !strings.Contains(err.Error(), "after free") {
		t.Errorf("a view used after free: got %v", err)
	}
}

func TestMemoryErrors(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 200*time.Millisecond)
	// Sizes that differ name the ranks.
	errs := onAll(rt, func(d *Device) error {
		size := int64(16)
		if d.rank == 1 {
			size = 32
		}
		_, err := d.Alloc(size, ir.Symmetric)
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "ranks 0, 2: 16; rank 1: 32") {
			t.Errorf("rank %d: got %v, want the sizes with their ranks", r, err)
		}
	}
	// A rank that never arrives is named after the timeout.
	errs = onAll(rt, func(d *Device) error {
		if d.rank == 0 {
			return nil
		}
		_, err := d.Alloc(16, ir.Symmetric)
		return err
	})
	for _, r := range []int{1, 2} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "timed out") || !strings.Contains(errs[r].Error(), "waiting for rank 0") {
			t.Errorf("rank %d: got %v, want a timeout naming rank 0", r, errs[r])
		}
	}
	d := rt.devices[0]
	g, _ := d.Alloc(8, ir.Global)
	if _, err := d.PeerBuffer(g, 1); err == nil || !strings.Contains(err.Error(), "symmetric") {
		t.Errorf("peer buffer of global memory: %v", err)
	}
	if err := rt.devices[1].Free(g); err == nil || !strings.Contains(err.Error(), "owned by rank 0") {
		t.Errorf("free by another rank: %v", err)
	}
	if err := d.Free(g); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(g); err == nil || !strings.Contains(err.Error(), "after free") {
		t.Errorf("double free: %v", err)
	}
	if _, err := d.Alloc(-1, ir.Global); err == nil {
		t.Error("negative alloc should fail")
	}
}

// Work on two streams ordered by an event: the second stream's copy waits
// for the first stream's write, however late that runs.
func TestStreamEventOrdering(t *testing.T) {
	rt := newRuntime(t, 1, 5*time.Second)
	d := rt.devices[0]
	s1, _ := d.NewStream()
	s2, _ := d.NewStream()
	defer s1.Close()
	defer s2.Close()
	a, _ := d.Alloc(16, ir.Global)
	b, _ := d.Alloc(16, ir.Global)
	defer d.Free(a)
	defer d.Free(b)
	e, _ := d.NewEvent()
	if !e.Query() {
		t.Error("a fresh event should be complete")
	}
	gate := make(chan struct{})
	if err := s1.(*stream).enqueue(work{run: func(*stream) error { <-gate; return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyFromHost(tensorOf(a, ir.F32, 4), encode(ir.F32, []float64{1, 2, 3, 4}), s1); err != nil {
		t.Fatal(err)
	}
	if err := s1.Record(e); err != nil {
		t.Fatal(err)
	}
	if err := s2.WaitEvent(e); err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(tensorOf(b, ir.F32, 4), tensorOf(a, ir.F32, 4), s2); err != nil {
		t.Fatal(err)
	}
	if e.Query() {
		t.Error("the event completed before its stream passed it")
	}
	close(gate)
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !e.Query() {
		t.Error("the event is not complete after the stream waiting on it finished")
	}
	got := make([]byte, 16)
	if err := d.CopyToHost(got, tensorOf(b, ir.F32, 4), s2); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(decode(ir.F32, got), []float64{1, 2, 3, 4}) {
		t.Errorf("b = %v, want the values written on s1 before the event", decode(ir.F32, got))
	}
	if err := e.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// The first error on a stream is what Synchronize returns; later work is
// skipped, event records still happen, and the stream works again after.
func TestStreamErrors(t *testing.T) {
	rt := newRuntime(t, 1, 5*time.Second)
	d := rt.devices[0]
	s := d.DefaultStream().(*stream)
	ran := false
	first, second := errors.New("first"), errors.New("second")
	s.enqueue(work{run: func(*stream) error { return first }})
	s.enqueue(work{run: func(*stream) error { ran = true; return second }})
	e, _ := d.NewEvent()
	s.Record(e)
	if err := s.Synchronize(); err != first {
		t.Errorf("Synchronize = %v, want the first error", err)
	}
	if ran {
		t.Error("work after an error ran")
	}
	if !e.Query() {
		t.Error("an event recorded after an error never completed")
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("the error was not cleared: %v", err)
	}
	s.enqueue(work{run: func(*stream) error { panic("boom") }})
	if err := s.Synchronize(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic in work should become the stream's error, got %v", err)
	}
	ns, _ := d.NewStream()
	ns.(*stream).enqueue(work{run: func(*stream) error { return first }})
	if err := ns.Close(); err != first {
		t.Errorf("Close = %v, want the pending error", err)
	}
	if err := ns.(*stream).enqueue(work{run: func(*stream) error { return nil }}); err == nil {
		t.Error("enqueue on a closed stream should fail")
	}
}

func TestSendRecv(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 5*time.Second)
	// Every rank sends two messages to its right neighbour, which receives
	// them in order.
	mustAll(t, onAll(rt, func(d *Device) error {
		right, left := (d.rank+1)%D, (d.rank+D-1)%D
		a, err := upload(d, ir.Global, ir.I32, []float64{float64(d.rank), 1}, 2)
		if err != nil {
			return err
		}
		defer d.Free(a.Buf)
		b, err := upload(d, ir.Global, ir.I32, []float64{float64(d.rank), 2}, 2)
		if err != nil {
			return err
		}
		defer d.Free(b.Buf)
		rb, _ := d.Alloc(16, ir.Global)
		defer d.Free(rb)
		r1, r2 := tensorOf(rb, ir.I32, 2), runtime.Tensor{Buf: rb, Offset: 8, DType: ir.I32, Shape: []int64{2}}
		s2, _ := d.NewStream()
		defer s2.Close()
		// Sends on the default stream, recvs on another: matched by order.
		for _, err := range []error{d.Send(a, right, nil), d.Send(b, right, nil), d.Recv(r1, left, s2), d.Recv(r2, left, s2), d.Barrier(s2)} {
			if err != nil {
				return err
			}
		}
		if err := errors.Join(d.DefaultStream().Synchronize(), s2.Synchronize()); err != nil {
			return err
		}
		got, err := download(d, tensorOf(rb, ir.I32, 4))
		if err != nil {
			return err
		}
		if want := []float64{float64(left), 1, float64(left), 2}; !sameFloats(got, want) {
			return errorf(d.rank, "received %v, want %v", got, want)
		}
		return nil
	}))
	// A size mismatch fails both sides.
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 2 {
			return nil
		}
		b, _ := d.Alloc(16, ir.Global)
		defer d.Free(b)
		if d.rank == 0 {
			d.Send(tensorOf(b, ir.F32, 4), 1, nil)
		} else {
			d.Recv(tensorOf(b, ir.F32, 3), 0, nil)
		}
		return d.DefaultStream().Synchronize()
	})
	for _, r := range []int{0, 1} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "16 bytes") || !strings.Contains(errs[r].Error(), "12 bytes") {
			t.Errorf("rank %d: got %v, want a size mismatch", r, errs[r])
		}
	}
}

func TestSendWithoutRecvTimesOut(t *testing.T) {
	rt := newRuntime(t, 2, 100*time.Millisecond)
	d := rt.devices[0]
	b, _ := d.Alloc(4, ir.Global)
	defer d.Free(b)
	d.Send(tensorOf(b, ir.F32, 1), 1, nil)
	err := d.DefaultStream().Synchronize()
	if err == nil || !strings.Contains(err.Error(), "waiting for rank 1") {
		t.Errorf("got %v, want a timeout naming rank 1", err)
	}
	d.Barrier(nil)
	err = d.DefaultStream().Synchronize()
	if err == nil || !strings.Contains(err.Error(), "barrier #0") || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("got %v, want a barrier timeout naming rank 1", err)
	}
}

// Close interrupts work waiting on a peer that never comes and frees
// everything.
func TestCloseInterruptsAndFrees(t *testing.T) {
	rt, err := New(runtime.Config{WorldSize: 2, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d := rt.devices[0]
	b, _ := d.Alloc(4, ir.Global)
	d.Barrier(nil)
	done := make(chan error)
	go func() { done <- rt.closeWithin(50 * time.Millisecond) }()
	if err := <-done; err == nil {
		t.Error("Close should report the stream it had to interrupt")
	}
	if rt.LiveBuffers() != 0 {
		t.Errorf("%d buffers live after Close", rt.LiveBuffers())
	}
	if _, err := d.Alloc(4, ir.Global); err == nil {
		t.Error("alloc after Close should fail")
	}
	_ = b
}

// Symmetric frees do not wait for the peers: one goroutine may free every
// rank's handle in turn. A peer's mapping outlives the owner's free until
// the mapping rank frees its own handle.
func TestSymmetricFreeIsPerRankRefcounted(t *testing.T) {
	const D = 2
	rt := newRuntime(t, D, 5*time.Second)
	bufs := make([]runtime.Buffer, D)
	mustAll(t, onAll(rt, func(d *Device) error {
		var err error
		bufs[d.rank], err = d.Alloc(4, ir.Symmetric)
		return err
	}))
	d0, d1 := rt.devices[0], rt.devices[1]
	view, err := d0.PeerBuffer(bufs[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d1.Free(bufs[1]); err != nil {
		t.Fatal(err)
	}
	// Rank 0 still maps rank 1's shard.
	if err := d0.CopyFromHost(tensorOf(view, ir.F32, 1), encode(ir.F32, []float64{3}), nil); err != nil {
		t.Fatalf("rank 0's mapping died with rank 1's free: %v", err)
	}
	if err := d0.DefaultStream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := d1.Free(bufs[1]); err == nil || !strings.Contains(err.Error(), "after free") {
		t.Errorf("double free: %v", err)
	}
	if err := d0.Free(bufs[0]); err != nil {
		t.Fatal(err)
	}
	if n := rt.LiveBuffers(); n != 0 {
		t.Errorf("%d buffers live after every rank freed", n)
	}
}
