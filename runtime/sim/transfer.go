package sim

import (
	"fmt"
	"sync"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// One-sided transfers (runtime.OneSided): the CPU runtime's side of package
// runtime/transfer. A peer's shard is reached as on the GPU, through the
// symmetric allocation; the copy checks when it runs that the peer still
// holds that memory, so a protocol that lets a rank free what a peer's
// transfer is reading fails here instead of reading stale bytes.

var _ runtime.OneSided = (*Device)(nil)

// SymmetricAllocation returns the sequence number of the symmetric
// allocation b is this rank's own shard of.
func (d *Device) SymmetricAllocation(rb runtime.Buffer) (uint64, error) {
	b, err := d.rt.own(rb)
	if err != nil {
		return 0, errorf(d.rank, "%v", err)
	}
	switch {
	case b.sym == nil:
		return 0, errorf(d.rank, "buffer %d is in %v memory, not symmetric", b.id, b.mem)
	case b.view && b.owner < 0:
		return 0, errorf(d.rank, "buffer %d is a contiguous view of every rank's shard, not this rank's own shard", b.id)
	case b.owner != d.rank:
		return 0, errorf(d.rank, "buffer %d is rank %d's shard, not this rank's own", b.id, b.owner)
	}
	return uint64(b.sym.seq), nil
}

// Exchange all-gathers value through the rendezvous: the k-th Exchange of
// every rank meets the others' k-th.
func (d *Device) Exchange(value []byte) ([][]byte, error) {
	if d.rt.isClosed() {
		return nil, ErrClosed
	}
	if err := d.notCapturing("Exchange"); err != nil {
		return nil, err
	}
	seq := d.exchangeSeq.Add(1) - 1
	what := fmt.Sprintf("exchange #%d", seq)
	mine := append([]byte(nil), value...)
	res, err := d.rt.rv.meet(meetKey{kind: "exchange", seq: seq}, d.rt.allRanks(), d.rank, mine, d.rt.timeout, what, nil,
		func(payloads map[int]any) (any, error) {
			all := make([][]byte, d.rt.size)
			for r := range all {
				all[r] = payloads[r].([]byte)
			}
			return all, nil
		})
	if err != nil {
		return nil, errorf(d.rank, "%w", err)
	}
	// Every rank gets its own copy: callers may keep or change what they got.
	all := res.([][]byte)
	out := make([][]byte, len(all))
	for r, v := range all {
		out[r] = append([]byte(nil), v...)
	}
	return out, nil
}

// NewHostWaitEvent is NewEvent: a sim event's Synchronize already sleeps on
// a channel.
func (d *Device) NewHostWaitEvent() (runtime.Event, error) { return d.NewEvent() }

// PreparePeerCopy resolves a copy between local and the window remote of
// peer's shard (remote is given on this rank's own shard).
func (d *Device) PreparePeerCopy(local, remote runtime.Tensor, peer int, write bool) (runtime.PeerCopy, error) {
	if peer < 0 || peer >= d.rt.size {
		return nil, errorf(d.rank, "one-sided copy: peer %d is outside the %d ranks", peer, d.rt.size)
	}
	if _, err := d.SymmetricAllocation(remote.Buf); err != nil {
		return nil, fmt.Errorf("one-sided copy: the remote window: %w", err)
	}
	lv, err := d.rt.view(local)
	if err != nil {
		return nil, errorf(d.rank, "one-sided copy: the local tensor: %v", err)
	}
	rv, err := d.rt.view(remote)
	if err != nil {
		return nil, errorf(d.rank, "one-sided copy: the remote window: %v", err)
	}
	if !rv.Contig {
		return nil, errorf(d.rank, "one-sided copy: the remote window must be contiguous")
	}
	if lv.DT != rv.DT || lv.N != rv.N {
		return nil, errorf(d.rank, "one-sided copy: the local tensor is %s%v but the remote window is %s%v: dtype and element count must match",
			lv.DT, lv.Shape, rv.DT, rv.Shape)
	}
	owner := rv.buf.sym.shards[peer]
	return &peerCopy{d: d, local: lv, remote: rv.on(owner, 0), owner: owner, peer: peer, write: write}, nil
}

type peerCopy struct {
	d             *Device
	local, remote *view
	owner         *buffer // peer's shard: freed when the peer frees it
	peer          int
	write         bool

	mu  sync.Mutex
	err error
}

func (c *peerCopy) Post(rs runtime.Stream) error {
	s, err := c.d.stream(rs)
	if err != nil {
		return err
	}
	c.setErr(nil)
	return s.enqueue(work{run: func(*stream) error {
		err := c.run()
		c.setErr(err)
		return err
	}})
}

func (c *peerCopy) run() error {
	verb, dir := "read", "from"
	if c.write {
		verb, dir = "write", "to"
	}
	if c.owner.freed.Load() {
		return errorf(c.d.rank, "one-sided %s %s rank %d: rank %d freed that memory before the transfer ran", verb, dir, c.peer, c.peer)
	}
	if c.local.buf.freed.Load() {
		return errorf(c.d.rank, "one-sided %s %s rank %d: the local buffer %d was freed before the transfer ran", verb, dir, c.peer, c.local.buf.id)
	}
	if c.write {
		compute.Copy(&c.remote.View, &c.local.View)
	} else {
		compute.Copy(&c.local.View, &c.remote.View)
	}
	return nil
}

func (c *peerCopy) setErr(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *peerCopy) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
