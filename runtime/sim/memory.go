package sim

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// buffer is an allocation or a view of one. Views (peer buffers, contiguous
// views) alias their allocation's bytes and die with it.
type buffer struct {
	rt    *Runtime
	id    uint64
	data  []byte // exactly Size() bytes
	mem   ir.MemoryType
	owner int         // rank whose memory this is; -1 for a contiguous view
	sym   *symAlloc   // the symmetric allocation it belongs to, or nil
	view  bool        // a view: Free refuses it
	freed atomic.Bool // set when the allocation is released
}

var _ runtime.Buffer = (*buffer)(nil)

// kind says what the buffer is, for messages (a view of a symmetric
// allocation is never called global).
func (b *buffer) kind() string {
	switch {
	case b.view && b.owner < 0:
		return "the contiguous view of every rank's shard"
	case b.view:
		return fmt.Sprintf("rank %d's shard mapped by a peer", b.owner)
	case b.sym != nil:
		return "a symmetric shard"
	}
	return fmt.Sprintf("%v memory", b.mem)
}

func (b *buffer) ID() uint64         { return b.id }
func (b *buffer) Size() int64        { return int64(len(b.data)) }
func (b *buffer) Mem() ir.MemoryType { return b.mem }

// symAlloc is one collective symmetric allocation: one backing range of
// D × shard bytes, rank r's shard at r × shard.
type symAlloc struct {
	seq     int64
	shard   int64
	backing []byte
	shards  []*buffer // rank r's own buffer

	mu          sync.Mutex
	freedBy     []bool             // ranks that freed their handle
	peerViews   map[[2]int]*buffer // (mapping rank, peer) -> view of peer's shard
	contigViews map[int]*buffer    // mapping rank -> the whole range
}

func (rt *Runtime) newBuffer(data []byte, mem ir.MemoryType, owner int, sym *symAlloc, view bool) *buffer {
	b := &buffer{rt: rt, id: rt.nextID.Add(1), data: data, mem: mem, owner: owner, sym: sym, view: view}
	rt.mu.Lock()
	rt.live[b.id] = b
	rt.mu.Unlock()
	return b
}

func (rt *Runtime) release(bs ...*buffer) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, b := range bs {
		b.freed.Store(true)
		delete(rt.live, b.id)
	}
}

// Alloc returns a zero-filled buffer. A symmetric allocation is collective:
// the k-th symmetric Alloc of every rank meets the others' k-th and they
// share one backing range; sizes that differ are an error naming the ranks.
func (d *Device) Alloc(bytes int64, mem ir.MemoryType) (runtime.Buffer, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("rank %d: alloc of %d bytes", d.rank, bytes)
	}
	if d.rt.isClosed() {
		return nil, ErrClosed
	}
	if err := d.notCapturing("Alloc"); err != nil {
		return nil, err
	}
	switch mem {
	case ir.Global, ir.Host:
		if err := d.rt.mem.take(bytes, fmt.Sprintf("alloc in %v memory", mem)); err != nil {
			return nil, fmt.Errorf("rank %d: %w", d.rank, err)
		}
		return d.rt.newBuffer(make([]byte, bytes), mem, d.rank, nil, false), nil
	case ir.Symmetric:
	default:
		return nil, fmt.Errorf("rank %d: alloc in unknown memory type %v", d.rank, mem)
	}
	d.mu.Lock()
	seq := d.symAllocSeq
	d.symAllocSeq++
	d.mu.Unlock()
	what := fmt.Sprintf("symmetric alloc #%d", seq)
	res, err := d.rt.rv.meet(meetKey{kind: "alloc", seq: seq}, d.rt.allRanks(), d.rank, bytes, d.rt.timeout, what, nil,
		func(payloads map[int]any) (any, error) {
			if err := agree(what, "size in bytes", payloads, d.rt.size); err != nil {
				return nil, err
			}
			return d.rt.newSymAlloc(seq, payloads[0].(int64))
		})
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", d.rank, err)
	}
	return res.(*symAlloc).shards[d.rank], nil
}

func (rt *Runtime) newSymAlloc(seq, bytes int64) (*symAlloc, error) {
	shard := (bytes + rt.granularity - 1) / rt.granularity * rt.granularity
	if shard < bytes || (shard > 0 && shard*int64(rt.size)/int64(rt.size) != shard) {
		return nil, fmt.Errorf("symmetric alloc #%d of %d bytes per rank: the size overflows", seq, bytes)
	}
	if err := rt.mem.take(shard*int64(rt.size), fmt.Sprintf("symmetric alloc #%d (%s per rank on %d ranks)",
		seq, formatBytes(bytes), rt.size)); err != nil {
		return nil, err
	}
	a := &symAlloc{seq: seq, shard: shard, backing: make([]byte, shard*int64(rt.size)),
		freedBy: make([]bool, rt.size), peerViews: map[[2]int]*buffer{}, contigViews: map[int]*buffer{}}
	for r := 0; r < rt.size; r++ {
		a.shards = append(a.shards, rt.newBuffer(a.shardBytes(r), ir.Symmetric, r, a, false))
	}
	return a, nil
}

// shardBytes is rank r's shard; the capacity is clipped so an append can
// never spill into the next rank's shard.
func (a *symAlloc) shardBytes(r int) []byte {
	lo, hi := int64(r)*a.shard, int64(r+1)*a.shard
	return a.backing[lo:hi:hi]
}

// allRanks is every rank, for a meeting of all: one shared slice, not a
// new one per rank per meeting (D ranks each making D ints per collective
// was quadratic in the mesh).
func (rt *Runtime) allRanks() []int { return rt.ranks }

// Free releases a buffer once the device's streams have passed the work
// enqueued so far (cudaFree synchronises too). A symmetric allocation is
// released as the GPU's physical memory is: each rank's Free drops its own
// shard handle and the mappings it made, and the backing range goes when
// every rank has freed it. Free does not wait for the peers, so ranks may
// free in any interleaving.
func (d *Device) Free(rb runtime.Buffer) error {
	if err := d.notCapturing("Free"); err != nil {
		return err
	}
	b, err := d.rt.own(rb)
	if err != nil {
		return fmt.Errorf("rank %d: free: %w", d.rank, err)
	}
	if b.view {
		return fmt.Errorf("rank %d: free of buffer %d: it is a view; free the allocation it maps", d.rank, b.id)
	}
	if b.owner != d.rank {
		return fmt.Errorf("rank %d: free of buffer %d owned by rank %d", d.rank, b.id, b.owner)
	}
	if err := d.syncAll(); err != nil {
		return fmt.Errorf("rank %d: free: %w", d.rank, err)
	}
	if b.sym == nil {
		d.rt.release(b)
		d.rt.mem.give(b.Size())
		return nil
	}
	a := b.sym
	a.mu.Lock()
	if a.freedBy[d.rank] {
		a.mu.Unlock()
		return fmt.Errorf("rank %d: free: buffer %d used after free", d.rank, b.id)
	}
	a.freedBy[d.rank] = true
	d.rt.mem.give(a.shard) // the range goes once every rank gave its shard back
	drop := []*buffer{b}
	for key, v := range a.peerViews {
		if key[0] == d.rank {
			drop = append(drop, v)
			delete(a.peerViews, key)
		}
	}
	if v, ok := a.contigViews[d.rank]; ok {
		drop = append(drop, v)
		delete(a.contigViews, d.rank)
	}
	a.mu.Unlock()
	d.rt.release(drop...)
	return nil
}

// PeerBuffer returns a view of peer's shard of symmetric buffer b.
func (d *Device) PeerBuffer(rb runtime.Buffer, peer int) (runtime.Buffer, error) {
	b, err := d.rt.own(rb)
	if err != nil {
		return nil, fmt.Errorf("rank %d: peer buffer: %w", d.rank, err)
	}
	if b.sym == nil {
		return nil, fmt.Errorf("rank %d: peer buffer of buffer %d: it is %v memory; only symmetric buffers can be mapped by peers", d.rank, b.id, b.mem)
	}
	if peer < 0 || peer >= d.rt.size {
		return nil, fmt.Errorf("rank %d: peer buffer: peer %d out of range [0, %d)", d.rank, peer, d.rt.size)
	}
	a := b.sym
	if peer == d.rank {
		return a.shards[peer], nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := [2]int{d.rank, peer}
	if v, ok := a.peerViews[key]; ok {
		return v, nil
	}
	v := d.rt.newBuffer(a.shardBytes(peer), ir.Symmetric, peer, a, true)
	a.peerViews[key] = v
	return v, nil
}

// ContiguousView returns a view of every rank's shard back to back: rank r
// at offset r × Size(). It aliases the shards: a write lands in the owner's.
func (d *Device) ContiguousView(rb runtime.Buffer) (runtime.Buffer, error) {
	b, err := d.rt.own(rb)
	if err != nil {
		return nil, fmt.Errorf("rank %d: contiguous view: %w", d.rank, err)
	}
	if b.sym == nil {
		return nil, fmt.Errorf("rank %d: contiguous view of buffer %d: it is %v memory, not symmetric", d.rank, b.id, b.mem)
	}
	a := b.sym
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.contigViews[d.rank]; ok {
		return v, nil
	}
	v := d.rt.newBuffer(a.backing[:len(a.backing):len(a.backing)], ir.Symmetric, -1, a, true)
	a.contigViews[d.rank] = v
	return v, nil
}

// own checks that rb is a live buffer of this runtime.
func (rt *Runtime) own(rb runtime.Buffer) (*buffer, error) {
	b, ok := rb.(*buffer)
	if !ok || b == nil {
		return nil, fmt.Errorf("buffer %T is not a sim buffer", rb)
	}
	if b.rt != rt {
		return nil, fmt.Errorf("buffer %d belongs to another runtime", b.id)
	}
	if b.freed.Load() {
		return nil, fmt.Errorf("buffer %d used after free", b.id)
	}
	return b, nil
}

// agree checks that every rank brought the same payload; the error lists
// each distinct value with the ranks that brought it.
func agree(what, field string, payloads map[int]any, size int) error {
	first := payloads[0]
	same := true
	for r := 1; r < size; r++ {
		if payloads[r] != first {
			same = false
		}
	}
	if same {
		return nil
	}
	return fmt.Errorf("%s: ranks disagree on the %s: %s", what, field, describeGroups(payloads, size))
}

// describeGroups renders "rank 0, 2: X; rank 1: Y".
func describeGroups(payloads map[int]any, size int) string {
	var order []any
	groups := map[any][]int{}
	for r := 0; r < size; r++ {
		p := payloads[r]
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], r)
	}
	s := ""
	for i, p := range order {
		if i > 0 {
			s += "; "
		}
		word := "rank"
		if len(groups[p]) > 1 {
			word = "ranks"
		}
		s += fmt.Sprintf("%s %s: %v", word, joinInts(groups[p]), p)
	}
	return s
}

func joinInts(xs []int) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(x)
	}
	return s
}
