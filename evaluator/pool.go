package evaluator

import (
	"errors"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// pool is a caching allocator: `free` parks a buffer here and the next
// allocation of the same size and memory type takes it back (last in, first
// out). Every rank runs the same program, so every rank reuses the same way
// and collective symmetric allocations stay matched; a program that runs
// again gets the same buffers, so the handle cache hits.
type pool struct {
	dev   runtime.Device
	free  map[poolKey]*[]pooled
	all   []runtime.Buffer // every buffer allocated, in order, for close
	asked map[uint64]int64 // by Buffer.ID: the size each was allocated for (Size() may be rounded up: symmetric shards)
	// events no longer waited on, kept for the next record: creating an
	// event is a driver call, re-recording one is not (a wait enqueued
	// earlier keeps waiting for the record it saw, on GPUs as on the CPU).
	events []runtime.Event
	// deterministic: reuse by program order only, never because a stream
	// happened to have passed a free (graph mode: the run that captures
	// must take exactly the buffers the warm-up left, and may neither
	// allocate nor query an event it recorded).
	deterministic bool
	// streamOrdered: the rank works on one stream only (no streams of the
	// program's own, no async collectives, no transfers), so a buffer
	// freed on a stream is only ever taken again on that stream, where
	// stream order alone puts the reuse after the last use: a free then
	// records no event (a driver call saved per free on a GPU).
	streamOrdered bool
	// fresh: every get allocates anew (DisableReuseForTest): a program's
	// results must not depend on which buffers it reuses, and a run
	// without reuse is the oracle for a lifetime bug.
	fresh bool
}

// poolKey is a size and a memory type in one word (a map of uint64 keys
// hashes fastest): bytes << 8 | mem.
type poolKey uint64

func keyOf(bytes int64, mem ir.MemoryType) poolKey { return poolKey(uint64(bytes)<<8 | uint64(mem)) }

// pooled is a parked buffer freed on stream on (nil: by a caller that
// synchronised); ev, when set, completes once on is done with it (without
// ev, only on itself may take the buffer before the next synchronisation).
type pooled struct {
	buf runtime.Buffer
	ev  runtime.Event
	on  runtime.Stream
	// others complete once the other streams that used the buffer have
	// passed their uses (a value read on a second stream and freed on its
	// producer's).
	others []runtime.Event
}

// done reports whether every stream that used e's buffer has passed it.
func (e *pooled) done() bool {
	if e.on != nil && e.ev == nil {
		return false // no event to ask
	}
	if e.ev != nil && !e.ev.Query() {
		return false
	}
	for _, o := range e.others {
		if !o.Query() {
			return false
		}
	}
	return true
}

func newPool(dev runtime.Device) *pool {
	return &pool{dev: dev, free: map[poolKey]*[]pooled{}, asked: map[uint64]int64{}}
}

func (p *pool) get(bytes int64, mem ir.MemoryType, s runtime.Stream) (runtime.Buffer, error) {
	if lp := p.free[keyOf(bytes, mem)]; lp != nil && !p.fresh {
		if i := p.reusable(*lp, mem, s); i >= 0 {
			list := *lp
			e := list[i]
			list = append(list[:i], list[i+1:]...)
			list[len(list):cap(list)][0] = pooled{} // drop the moved-out last entry's references
			*lp = list
			p.recycle(e)
			return e.buf, nil
		}
	}
	buf, err := p.dev.Alloc(bytes, mem)
	if err != nil {
		return nil, err
	}
	p.all = append(p.all, buf)
	p.asked[buf.ID()] = bytes
	return buf, nil
}

// reusable picks, last in first, a parked buffer that stream s may take
// without waiting for another stream: one freed on s itself (stream order
// already puts the reuse after its last use) or by a caller that
// synchronised; for global and host memory also one whose freeing stream
// has passed the free. It never makes s wait for another stream: that wait
// is an edge the program does not have, and across a send, a recv or a
// collective it can close a cycle between ranks (the recv's buffer would
// wait for the send that the peer's recv completes). A symmetric buffer
// is taken only on a rule that holds on every rank alike, since symmetric
// allocations are collective and must stay matched. -1: allocate anew.
func (p *pool) reusable(list []pooled, mem ir.MemoryType, s runtime.Stream) int {
	for i := len(list) - 1; i >= 0; i-- {
		if e := &list[i]; e.on == nil || (e.on == s && len(e.others) == 0) {
			return i
		}
	}
	if mem == ir.Symmetric || p.deterministic {
		return -1
	}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].done() {
			return i
		}
	}
	return -1
}

// recycle keeps e's events for later records.
func (p *pool) recycle(e pooled) {
	if e.ev != nil {
		p.recycleEvent(e.ev)
	}
	for _, o := range e.others {
		p.recycleEvent(o)
	}
}

// synchronized forgets the events of every parked buffer: the caller has
// synchronised every stream, so each may be reused anywhere (a symmetric
// buffer freed across streams included, on every rank alike).
func (p *pool) synchronized() {
	for _, list := range p.free {
		for i := range *list {
			p.recycle((*list)[i])
			(*list)[i] = pooled{buf: (*list)[i].buf}
		}
	}
}

// put parks buf; s is the stream whose work on buf must finish before reuse
// (nil when the caller has synchronised).
func (p *pool) put(buf runtime.Buffer, s runtime.Stream, others ...runtime.Stream) error {
	e := pooled{buf: buf, on: s}
	for _, o := range others {
		ev, err := p.takeEvent()
		if err != nil {
			return err
		}
		if err := o.Record(ev); err != nil {
			return errors.Join(err, ev.Close())
		}
		e.others = append(e.others, ev)
	}
	if s != nil && !(p.streamOrdered && len(others) == 0) {
		ev, err := p.takeEvent()
		if err != nil {
			return err
		}
		if err := s.Record(ev); err != nil {
			return errors.Join(err, ev.Close())
		}
		e.ev = ev
	}
	// Park it under the size get was asked for, so the same request finds
	// it again.
	bytes, ok := p.asked[buf.ID()]
	if !ok {
		bytes = buf.Size()
	}
	k := keyOf(bytes, buf.Mem())
	lp := p.free[k]
	if lp == nil {
		lp = new([]pooled)
		p.free[k] = lp
	}
	*lp = append(*lp, e)
	return nil
}

// close frees every buffer in allocation order (the same on every rank, as
// collective frees of symmetric buffers need).
func (p *pool) close() error {
	var errs []error
	for _, list := range p.free {
		for _, e := range *list {
			for _, ev := range append(e.others, e.ev) {
				if ev != nil {
					errs = append(errs, ev.Synchronize(), ev.Close())
				}
			}
		}
	}
	for _, ev := range p.events {
		errs = append(errs, ev.Close())
	}
	p.events = nil
	for _, b := range p.all {
		errs = append(errs, p.dev.Free(b))
	}
	p.all = nil
	p.free = map[poolKey]*[]pooled{}
	p.asked = map[uint64]int64{}
	return errors.Join(errs...)
}

// takeEvent returns a recycled event, or a new one.
func (p *pool) takeEvent() (runtime.Event, error) {
	if n := len(p.events); n > 0 {
		ev := p.events[n-1]
		p.events = p.events[:n-1]
		return ev, nil
	}
	return p.dev.NewEvent()
}

// recycleEvent keeps ev for a later record; the caller no longer uses it.
func (p *pool) recycleEvent(ev runtime.Event) { p.events = append(p.events, ev) }
