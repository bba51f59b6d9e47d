package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func TestRegisteredAsSim(t *testing.T) {
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2})
	require.NoError(t, err)
	defer rt.Close()
	assert.Equal(t, "sim", rt.Name())
	assert.Equal(t, 2, rt.WorldSize())
	assert.Len(t, rt.Ranks(), 2)
	_, err = rt.Device(2)
	assert.Error(t, err, "device 2 of 2 ranks should be an error")
	_, err = New(runtime.Config{WorldSize: 0})
	assert.Error(t, err, "world size 0 should be an error")
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
	assert.Equal(t, int64(DefaultGranularity), bufs[0].Size(), "symmetric shard size, rounded up to the granularity")
	d0 := rt.devices[0]
	// Rank 0 writes into rank 2's shard through a peer buffer.
	pb, err := d0.PeerBuffer(bufs[0], 2)
	require.NoError(t, err)
	require.NoError(t, d0.CopyFromHost(tensorOf(pb, ir.F32, 2), encode(ir.F32, []float64{7, 8}), nil))
	// Rank 1 writes into rank 0's shard through its contiguous view.
	d1 := rt.devices[1]
	cv, err := d1.ContiguousView(bufs[1])
	require.NoError(t, err)
	assert.Equal(t, D*bufs[1].Size(), cv.Size(), "contiguous view bytes")
	require.NoError(t, d1.CopyFromHost(runtime.Tensor{Buf: cv, Offset: 4, DType: ir.F32, Shape: []int64{1}}, encode(ir.F32, []float64{5}), nil))
	require.NoError(t, errors.Join(d0.DefaultStream().Synchronize(), d1.DefaultStream().Synchronize()))
	got2, err := download(rt.devices[2], tensorOf(bufs[2], ir.F32, 2))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{7, 8}, got2), "rank 2's shard, written by rank 0 (-want +got)")
	got0, err := download(d0, tensorOf(bufs[0], ir.F32, 2))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{0, 5}, got0), "rank 0's shard, written through rank 1's view (-want +got)")
	// The view reads every shard, rank r at r × Size().
	all, err := download(d1, runtime.Tensor{Buf: cv, DType: ir.F32, Shape: []int64{D, 2}, Strides: []int64{bufs[0].Size() / 4, 1}})
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{0, 5, 0, 0, 7, 8}, all), "contiguous view (-want +got)")
	p, _ := d0.PeerBuffer(bufs[0], 2)
	assert.Same(t, pb, p, "PeerBuffer should return the same mapping again")
	assert.Equal(t, D+2, rt.LiveBuffers(), "live buffers: %d shards and 2 views", D)
	mustAll(t, onAll(rt, func(d *Device) error { return d.Free(bufs[d.rank]) }))
	assert.Equal(t, 0, rt.LiveBuffers(), "buffers live after the collective free")
	assert.ErrorContains(t, d0.CopyFromHost(tensorOf(pb, ir.F32, 2), make([]byte, 8), nil), "after free", "a view used after free")
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
		assert.ErrorContains(t, err, "ranks 0, 2: 16; rank 1: 32", "rank %d: want the sizes with their ranks", r)
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
		assert.ErrorContains(t, errs[r], "timed out", "rank %d: want a timeout naming rank 0", r)
		assert.ErrorContains(t, errs[r], "waiting for rank 0", "rank %d: want a timeout naming rank 0", r)
	}
	d := rt.devices[0]
	g, _ := d.Alloc(8, ir.Global)
	_, err := d.PeerBuffer(g, 1)
	assert.ErrorContains(t, err, "symmetric", "peer buffer of global memory")
	assert.ErrorContains(t, rt.devices[1].Free(g), "owned by rank 0", "free by another rank")
	require.NoError(t, d.Free(g))
	assert.ErrorContains(t, d.Free(g), "after free", "double free")
	_, err = d.Alloc(-1, ir.Global)
	assert.Error(t, err, "negative alloc should fail")
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
	assert.True(t, e.Query(), "a fresh event should be complete")
	gate := make(chan struct{})
	require.NoError(t, s1.(*stream).enqueue(work{run: func(*stream) error { <-gate; return nil }}))
	require.NoError(t, d.CopyFromHost(tensorOf(a, ir.F32, 4), encode(ir.F32, []float64{1, 2, 3, 4}), s1))
	require.NoError(t, s1.Record(e))
	require.NoError(t, s2.WaitEvent(e))
	require.NoError(t, d.Copy(tensorOf(b, ir.F32, 4), tensorOf(a, ir.F32, 4), s2))
	assert.False(t, e.Query(), "the event completed before its stream passed it")
	close(gate)
	require.NoError(t, s2.Synchronize())
	assert.True(t, e.Query(), "the event is not complete after the stream waiting on it finished")
	got := make([]byte, 16)
	require.NoError(t, d.CopyToHost(got, tensorOf(b, ir.F32, 4), s2))
	require.NoError(t, s2.Synchronize())
	assert.Empty(t, floatsDiff([]float64{1, 2, 3, 4}, decode(ir.F32, got)), "b, want the values written on s1 before the event (-want +got)")
	require.NoError(t, e.Synchronize())
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
	// Same: the very error, not one with the same text
	assert.Same(t, first, s.Synchronize(), "Synchronize, want the first error")
	assert.False(t, ran, "work after an error ran")
	assert.True(t, e.Query(), "an event recorded after an error never completed")
	assert.NoError(t, s.Synchronize(), "the error was not cleared")
	s.enqueue(work{run: func(*stream) error { panic("boom") }})
	assert.ErrorContains(t, s.Synchronize(), "boom", "a panic in work should become the stream's error")
	ns, _ := d.NewStream()
	ns.(*stream).enqueue(work{run: func(*stream) error { return first }})
	assert.Same(t, first, ns.Close(), "Close, want the pending error")
	assert.Error(t, ns.(*stream).enqueue(work{run: func(*stream) error { return nil }}), "enqueue on a closed stream should fail")
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
		if want := []float64{float64(left), 1, float64(left), 2}; floatsDiff(want, got) != "" {
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
		assert.ErrorContains(t, errs[r], "16 bytes", "rank %d: want a size mismatch", r)
		assert.ErrorContains(t, errs[r], "12 bytes", "rank %d: want a size mismatch", r)
	}
}

func TestSendWithoutRecvTimesOut(t *testing.T) {
	rt := newRuntime(t, 2, 100*time.Millisecond)
	d := rt.devices[0]
	b, _ := d.Alloc(4, ir.Global)
	defer d.Free(b)
	d.Send(tensorOf(b, ir.F32, 1), 1, nil)
	err := d.DefaultStream().Synchronize()
	assert.ErrorContains(t, err, "waiting for rank 1", "want a timeout naming rank 1")
	d.Barrier(nil)
	err = d.DefaultStream().Synchronize()
	assert.ErrorContains(t, err, "barrier #0", "want a barrier timeout naming rank 1")
	assert.ErrorContains(t, err, "rank 1", "want a barrier timeout naming rank 1")
}

// Close interrupts work waiting on a peer that never comes and frees
// everything.
func TestCloseInterruptsAndFrees(t *testing.T) {
	rt, err := New(runtime.Config{WorldSize: 2, Timeout: time.Hour})
	require.NoError(t, err)
	d := rt.devices[0]
	b, _ := d.Alloc(4, ir.Global)
	d.Barrier(nil)
	done := make(chan error)
	go func() { done <- rt.closeWithin(50 * time.Millisecond) }()
	assert.Error(t, <-done, "Close should report the stream it had to interrupt")
	assert.Equal(t, 0, rt.LiveBuffers(), "buffers live after Close")
	_, err = d.Alloc(4, ir.Global)
	assert.Error(t, err, "alloc after Close should fail")
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
	require.NoError(t, err)
	require.NoError(t, d1.Free(bufs[1]))
	// Rank 0 still maps rank 1's shard.
	require.NoError(t, d0.CopyFromHost(tensorOf(view, ir.F32, 1), encode(ir.F32, []float64{3}), nil), "rank 0's mapping died with rank 1's free")
	require.NoError(t, d0.DefaultStream().Synchronize())
	assert.ErrorContains(t, d1.Free(bufs[1]), "after free", "double free")
	require.NoError(t, d0.Free(bufs[0]))
	assert.Equal(t, 0, rt.LiveBuffers(), "buffers live after every rank freed")
}
