package coll

import (
	"fmt"

	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// Collectives on different streams run on the device in the order the
// host issued them (every rank issues them in the same order).
//
// Each collective's kernels spin until the peers' matching kernels
// arrive. With two streams, rank 0's GPU may start stream B's collective
// while rank 1's starts stream A's: each spins, holding multiprocessors,
// and the work queued before the other collective (a matmul) cannot get
// them, so neither peer ever arrives. A two-stream pipelined program
// replayed from a graph hung so on 2 H200s (BenchmarkOverlap, matmul +
// reduce_scatter). A collective therefore waits, on the device, for the
// collective issued before it on another channel; then every rank's first
// unfinished collective is the same one, and its peers can always reach
// it. Within one stream the order holds already, and one-stream programs
// record and wait for nothing.

// orderAfterPrevious makes stream s (channel ch) wait for the collective
// issued before this one when that ran on another channel. capture is
// the open capture (nil when eager): an event recorded in another capture,
// or outside this one, is not waited for inside it. Called before the
// collective's launch, with cs.Mu not held.
func (d *Comm) orderAfterPrevious(cs *CommState, ch *CommChannel, s *gpu.Stream, capture any) error {
	cs.Mu.Lock()
	prev := cs.last
	cs.last = ch
	cs.Mu.Unlock()
	switch orderBefore(prev, ch, capture) {
	case orderNothing:
		return nil
	case orderRecordThenWait:
		// Recorded while one stream ran collectives (none then): record
		// now, which waits for the later work on that stream too.
		if err := d.recordDone(prev, prev.stream, capture); err != nil {
			return err
		}
	}
	if err := d.WithCtx(func() error { return d.Drv.StreamWaitEvent.Call3(s.H, prev.done.H, 0) }); err != nil {
		return fmt.Errorf("cuda: rank %d: order the collective after the one on channel %d: %w", d.Opts.Rank, prev.Idx, err)
	}
	return nil
}

// orderStep is what a collective on one channel does, before its launch,
// about the collective issued before it.
type orderStep uint8

const (
	orderNothing        orderStep = iota // none before, the same channel, or its stream closed (its work done)
	orderWait                            // wait for the event recorded after it
	orderRecordThenWait                  // record that event now (none was), then wait
)

// orderBefore decides the step for a collective on ch after one on prev
// (nil: none yet), within capture (nil: eager). An event recorded outside
// the open capture is not waited for: the capture starts after it.
func orderBefore(prev, ch *CommChannel, capture any) orderStep {
	switch {
	case prev == nil, prev == ch, prev.stream == nil:
		return orderNothing
	case prev.doneSet && prev.doneIn == capture:
		return orderWait
	case capture != nil:
		return orderNothing
	}
	return orderRecordThenWait
}

// captureToken is the open capture, as order.go compares captures (nil
// when eager).
func (d *Comm) captureToken() any {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	if d.Capture == nil {
		return nil // not a typed nil in an interface
	}
	return d.Capture
}

// collectiveIssued records, after a collective on channel ch (stream s),
// the event a later collective on another channel waits for; only while
// collectives run on more than one stream.
func (d *Comm) collectiveIssued(cs *CommState, ch *CommChannel, s *gpu.Stream, capture any) error {
	cs.Mu.Lock()
	many := len(cs.Chans) > 1
	cs.Mu.Unlock()
	if !many {
		ch.doneSet = false
		return nil
	}
	return d.recordDone(ch, s, capture)
}

func (d *Comm) recordDone(ch *CommChannel, s *gpu.Stream, capture any) error {
	if ch.done == nil {
		e, err := d.NewOrderEvent()
		if err != nil {
			return err
		}
		ch.done = e
	}
	if err := d.WithCtx(func() error { return d.Drv.EventRecord.Call2(ch.done.H, s.H) }); err != nil {
		return fmt.Errorf("cuda: rank %d: %w", d.Opts.Rank, err)
	}
	ch.doneSet, ch.doneIn = true, capture
	return nil
}
