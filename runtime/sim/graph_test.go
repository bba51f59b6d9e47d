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

// TestGraphReplaysWithFreshDataAndFreshMeetings captures, on two ranks, an
// all_reduce on the default stream and a copy of its result on a forked
// stream, then replays it with new input data each time. Every replay must
// see its own input (no stale pointer or copy) and meet its peer in a
// meeting of its own: keyed by the replay, which the replay advances on
// the stream. A key fixed at capture would make every replay's meeting the
// first one's.
func TestGraphReplaysWithFreshDataAndFreshMeetings(t *testing.T) {
	rt := newRuntime(t, 2, 5*time.Second)
	seen := recordMeetings(rt)
	const n, replays = 8, 50
	// got[rank][r] is what rank read back after replay r, checked on the
	// test's goroutine.
	got := make([][][]float64, 2)
	errs := onAll(rt, func(d *Device) error {
		in, err := d.Alloc(n*4, ir.Symmetric)
		if err != nil {
			return err
		}
		out, err := d.Alloc(n*4, ir.Symmetric)
		if err != nil {
			return err
		}
		cp, err := d.Alloc(n*4, ir.Global)
		if err != nil {
			return err
		}
		defer func() { d.Free(in); d.Free(out); d.Free(cp) }()
		tin, tout, tcp := tensorOf(in, ir.F32, n), tensorOf(out, ir.F32, n), tensorOf(cp, ir.F32, n)
		side, err := d.NewStream()
		if err != nil {
			return err
		}
		defer side.Close()
		fork, _ := d.NewEvent()
		join, _ := d.NewEvent()
		def := d.DefaultStream()

		if err := d.BeginCapture(def); err != nil {
			return err
		}
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: tin, Out: tout}, def); err != nil {
			return err
		}
		if err := errors.Join(def.Record(fork), side.WaitEvent(fork), d.Copy(tcp, tout, side), side.Record(join), def.WaitEvent(join)); err != nil {
			return err
		}
		g, err := d.EndCapture(def)
		if err != nil {
			return err
		}
		defer g.Close()
		if on, _ := d.IsCapturing(side); on {
			return errors.New("the fork still captures after EndCapture")
		}
		for r := range replays {
			x := make([]float64, n)
			for i := range x {
				x[i] = float64(100*r + 10*d.rank + i)
			}
			if err := d.CopyFromHost(tin, encode(ir.F32, x), def); err != nil {
				return err
			}
			if err := errors.Join(d.Barrier(def), g.Launch(def)); err != nil {
				return err
			}
			xs, err := download(d, tcp)
			if err != nil {
				return err
			}
			got[d.rank] = append(got[d.rank], xs)
			// every rank is past the replay before the next upload
			if err := d.Barrier(def); err != nil {
				return err
			}
		}
		return nil
	})
	for rank := range got {
		for r, xs := range got[rank] {
			want := make([]float64, n)
			for i := range want {
				want[i] = float64(200*r + 10 + 2*i)
			}
			assert.Equal(t, want, xs, "rank %d replay %d", rank, r)
		}
	}
	mustAll(t, errs)
	var graphMeetings int
	for k, count := range seen {
		assert.Equal(t, 1, count, "meeting %+v made twice", k)
		if k.kind == "coll" {
			assert.NotZero(t, k.replay, "a replay met its peers under an eager key")
			graphMeetings++
		}
	}
	assert.Equal(t, replays, graphMeetings, "one meeting per replay")
}

// TestCaptureRefusesWhatGPUsCannotCapture: waiting on the host for captured
// work, allocating, freeing and a barrier fail with a *runtime.CaptureError
// and invalidate the capture, as on GPUs.
func TestCaptureRefusesWhatGPUsCannotCapture(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	buf, err := d.Alloc(64, ir.Global)
	require.NoError(t, err)
	defer d.Free(buf)
	def := d.DefaultStream()
	ev, _ := d.NewEvent()
	for name, call := range map[string]func() error{
		"Stream.Synchronize": def.Synchronize,
		"Alloc":              func() error { _, err := d.Alloc(64, ir.Global); return err },
		"Free":               func() error { return d.Free(buf) },
		"Barrier":            func() error { return d.Barrier(def) },
		"Event.Synchronize":  func() error { require.NoError(t, def.Record(ev)); return ev.Synchronize() },
	} {
		require.NoError(t, d.BeginCapture(def))
		err := call()
		var ce *runtime.CaptureError
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, name, ce.Call)
		_, err = d.EndCapture(def)
		require.ErrorAs(t, err, &ce, "%s: EndCapture must fail once the capture is invalidated", name)
		on, _ := d.IsCapturing(def)
		assert.False(t, on, "%s: the stream left capture mode", name)
	}
	// A query of a captured event answers false and invalidates too.
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, def.Record(ev))
	assert.False(t, ev.Query())
	_, err = d.EndCapture(def)
	require.Error(t, err)
	// After all that the device works eagerly as before.
	require.NoError(t, def.Record(ev))
	require.NoError(t, ev.Synchronize())
}

// TestCaptureRequiresJoinedForks: a stream that joined the capture through
// an event wait must be joined back before EndCapture.
func TestCaptureRequiresJoinedForks(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	def := d.DefaultStream()
	side, err := d.NewStream()
	require.NoError(t, err)
	defer side.Close()
	fork, _ := d.NewEvent()
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, def.Record(fork))
	require.NoError(t, side.WaitEvent(fork))
	on, err := d.IsCapturing(side)
	require.NoError(t, err)
	assert.True(t, on, "a stream waiting on a captured event joins the capture")
	_, err = d.EndCapture(def)
	require.ErrorContains(t, err, "not joined back")
}

// TestGraphTeardownLeavesNothing: a graph's streams go with it.
func TestGraphTeardownLeavesNothing(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	before := len(d.allStreams())
	def := d.DefaultStream()
	side, err := d.NewStream()
	require.NoError(t, err)
	fork, _ := d.NewEvent()
	join, _ := d.NewEvent()
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, errors.Join(def.Record(fork), side.WaitEvent(fork), side.Record(join), def.WaitEvent(join)))
	g, err := d.EndCapture(def)
	require.NoError(t, err)
	require.NoError(t, g.Launch(def))
	require.NoError(t, def.Synchronize())
	assert.Equal(t, before+2, len(d.allStreams()), "the side stream and the graph's fork")
	require.NoError(t, g.Close())
	require.NoError(t, side.Close())
	assert.Equal(t, before, len(d.allStreams()), "streams left after the graph closed")
	assert.Error(t, g.Launch(def), "a closed graph launches")
}

// TestLoopNodeRepeatsItsBody: a loop body captured once (an all_reduce of
// the accumulator into itself, doubling it on 2 ranks) runs trips times a
// replay; each trip meets its peer in a meeting of its own; the graph
// holds the body once.
func TestLoopNodeRepeatsItsBody(t *testing.T) {
	rt := newRuntime(t, 2, 5*time.Second)
	seen := recordMeetings(rt)
	const n, trips, replays = 4, 10, 3
	got := make([][]float64, 2)
	nodes := make([]int, 2)
	errs := onAll(rt, func(d *Device) error {
		buf, err := d.Alloc(n*4, ir.Symmetric)
		if err != nil {
			return err
		}
		defer d.Free(buf)
		acc := tensorOf(buf, ir.F32, n)
		def := d.DefaultStream()
		if err := d.BeginCapture(def); err != nil {
			return err
		}
		err = errors.Join(d.BeginLoop(def, trips),
			d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: acc, Out: acc}, def),
			d.EndLoop(def))
		g, endErr := d.EndCapture(def)
		if err = errors.Join(err, endErr); err != nil {
			return err
		}
		defer g.Close()
		nodes[d.rank] = g.Nodes()
		for range replays {
			if err := d.CopyFromHost(acc, encode(ir.F32, []float64{1, 2, 3, 4}), def); err != nil {
				return err
			}
			if err := errors.Join(d.Barrier(def), g.Launch(def)); err != nil {
				return err
			}
			if got[d.rank], err = download(d, acc); err != nil {
				return err
			}
			if err := d.Barrier(def); err != nil {
				return err
			}
		}
		return nil
	})
	mustAll(t, errs)
	for rank := range got {
		assert.Equal(t, []float64{1 << trips, 2 << trips, 3 << trips, 4 << trips}, got[rank], "rank %d", rank)
		assert.Equal(t, 2, nodes[rank], "rank %d: the loop node and its body's one node", rank)
	}
	var coll int
	for k, count := range seen {
		assert.Equal(t, 1, count, "meeting %+v made twice", k)
		if k.kind == "coll" {
			assert.NotZero(t, k.trip, "a trip met its peer under no trip")
			coll++
		}
	}
	assert.Equal(t, trips*replays, coll, "one meeting per trip")
}

// TestLoopBodyIsOneStreamsWork: as in CUDA, where a loop body is a graph
// of its own, another stream may not enqueue into an open body, and
// nothing outside a body may wait on an event recorded in it.
func TestLoopBodyIsOneStreamsWork(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	def := d.DefaultStream()
	side, err := d.NewStream()
	require.NoError(t, err)
	defer side.Close()
	fork, _ := d.NewEvent()
	inBody, _ := d.NewEvent()
	var ce *runtime.CaptureError

	// a fork that joined before the body enqueues while it is open
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, errors.Join(def.Record(fork), side.WaitEvent(fork)))
	require.NoError(t, d.BeginLoop(def, 3))
	require.ErrorAs(t, side.Record(inBody), &ce)
	require.NoError(t, d.EndLoop(def))
	_, err = d.EndCapture(def)
	require.ErrorAs(t, err, &ce)

	// an event recorded in a body, waited on after it
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, d.BeginLoop(def, 3))
	require.NoError(t, def.Record(inBody))
	require.NoError(t, d.EndLoop(def))
	require.ErrorAs(t, side.WaitEvent(inBody), &ce)
	assert.Contains(t, ce.Why, "recorded in a loop body")
	_, err = d.EndCapture(def)
	require.Error(t, err)

	// a body left open
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, d.BeginLoop(def, 2))
	_, err = d.EndCapture(def)
	require.ErrorContains(t, err, "not ended")

	// a body inside a body (device loops do not nest)
	require.NoError(t, d.BeginCapture(def))
	require.NoError(t, d.BeginLoop(def, 2))
	require.ErrorContains(t, d.BeginLoop(def, 2), "do not nest")
	require.NoError(t, d.EndLoop(def))
	g, err := d.EndCapture(def)
	require.NoError(t, err)
	require.NoError(t, g.Close())

	// BeginLoop outside a capture
	require.ErrorContains(t, d.BeginLoop(def, 2), "not capturing")
}
