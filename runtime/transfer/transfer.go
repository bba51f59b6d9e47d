// Package transfer gives a rank one-sided reads and writes of its peers'
// registered tensors, modelled on NIXL's agent API: register tensors
// (collective: every rank's descriptors go through the store), prepare a
// transfer once (local tensors, a remote rank, windows of that rank's
// registered tensors), post it on a stream as often as wanted, poll it or
// wait for it on the host (sleeping, not spinning) or on a stream (the CPU
// is not involved), and deregister (collective, and only once no peer's
// transfer still touches the memory).
//
// It is built on runtime.Device and runtime.OneSided, so it runs on every
// backend that implements them: on GPUs a transfer is a cuMemcpyAsync
// through this process's mapping of the peer's shard of a symmetric
// allocation (VMM over NVLink); on the CPU runtime, a copy between the
// shards of one backing range. Registered tensors must therefore lie in
// symmetric memory; local tensors may be anywhere. docs/TRANSFERS.md has
// the protocol and the figures.
package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// Op is a transfer's direction.
type Op int

const (
	// Read copies windows of the remote rank's registered tensors into
	// the local tensors.
	Read Op = iota
	// Write copies the local tensors into windows of the remote rank's
	// registered tensors.
	Write
)

func (o Op) String() string {
	switch o {
	case Read:
		return "READ"
	case Write:
		return "WRITE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Errors a caller may test for with errors.Is.
var (
	// ErrUnavailable: the backend cannot do one-sided transfers (the
	// probe failed); the error says why.
	ErrUnavailable = errors.New("one-sided transfers are unavailable")
	// ErrNotPosted: a wait (or a status) on a handle that was never posted.
	ErrNotPosted = errors.New("the transfer was never posted")
	// ErrInFlight: a post of a handle whose last post is still running on
	// another stream.
	ErrInFlight = errors.New("the transfer is still in flight")
	// ErrDeregistered: a prepare or post on a registration that was
	// deregistered.
	ErrDeregistered = errors.New("the registration was deregistered")
	// ErrClosed: the agent was closed.
	ErrClosed = errors.New("the transfer agent is closed")
)

// Agent is one rank's endpoint. Its methods may be called from several
// goroutines; the collective ones (New, Register, Quiesce, Deregister)
// must be called by every rank in the same order.
type Agent struct {
	dev         runtime.Device
	os          runtime.OneSided
	rank, world int

	mu     sync.Mutex
	regs   map[*Registration]bool
	closed bool
}

// New opens dev's rank's agent and runs the availability probe. It is
// collective: every rank calls it. An error matching ErrUnavailable says
// why transfers cannot run on this backend.
func New(dev runtime.Device) (*Agent, error) {
	osd, ok := dev.(runtime.OneSided)
	if !ok {
		return nil, fmt.Errorf("%w: the device (%T) does not implement runtime.OneSided", ErrUnavailable, dev)
	}
	a := &Agent{dev: dev, os: osd, rank: dev.Rank(), world: dev.WorldSize(), regs: map[*Registration]bool{}}
	if err := a.probe(); err != nil {
		a.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return a, nil
}

// Rank is the agent's rank; WorldSize the number of ranks.
func (a *Agent) Rank() int      { return a.rank }
func (a *Agent) WorldSize() int { return a.world }

// Close releases what the agent holds, locally (it is not collective):
// every registration is dropped and every handle's event destroyed. Call
// it once no transfer is in flight anywhere (after a Deregister or
// Quiesce on every rank), or at the end of the job.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	regs := make([]*Registration, 0, len(a.regs))
	for r := range a.regs {
		regs = append(regs, r)
	}
	a.regs = map[*Registration]bool{}
	a.mu.Unlock()
	var errs []error
	for _, r := range regs {
		errs = append(errs, r.drop())
	}
	return errors.Join(errs...)
}

func (a *Agent) errorf(format string, args ...any) error {
	return fmt.Errorf("transfer: rank %d: "+format, append([]any{a.rank}, args...)...)
}

// Region is what a rank publishes about one registered tensor: the
// symmetric allocation it lies in, its byte offset in the rank's shard, its
// dtype and its shape.
type Region struct {
	Alloc  uint64   `json:"alloc"`
	Offset int64    `json:"offset"`
	DType  ir.DType `json:"dtype"`
	Shape  []int64  `json:"shape"`
}

// Elements is the region's element count; Bytes its size.
func (r Region) Elements() int64 { return ir.Product(r.Shape) }
func (r Region) Bytes() int64    { return r.Elements() * int64(r.DType.Size()) }

func (r Region) String() string {
	return fmt.Sprintf("%s%v at byte %d of symmetric allocation #%d", r.DType, r.Shape, r.Offset, r.Alloc)
}

// record is one rank's contribution to a collective step: its regions, or
// the reason it could not take part.
type record struct {
	Err     string   `json:"err,omitempty"`
	Regions []Region `json:"regions,omitempty"`
}

// gather runs one collective step: every rank publishes its record (an
// error included, so a rank that failed locally still arrives and no peer
// waits for it) and gets every rank's.
func (a *Agent) gather(rec record) ([]record, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	all, err := a.os.Exchange(raw)
	if err != nil {
		return nil, err
	}
	out := make([]record, len(all))
	for r, b := range all {
		if err := json.Unmarshal(b, &out[r]); err != nil {
			return nil, fmt.Errorf("rank %d sent a malformed record: %v", r, err)
		}
	}
	return out, nil
}

// failures lists the ranks' errors as "rank 1: ...; rank 3: ...".
func failures(recs []record) error {
	var msgs []string
	for r, rec := range recs {
		if rec.Err != "" {
			msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, rec.Err))
		}
	}
	if msgs == nil {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Registration is one collective Register: this rank's tensors and every
// rank's regions.
type Registration struct {
	a      *Agent
	local  []runtime.Tensor
	remote [][]Region // by rank, then by index

	mu      sync.Mutex
	handles map[*Handle]bool
	dead    bool
}

// Register makes tensors reachable by every peer's transfers. It is
// collective: every rank calls it with the same number of tensors, and the
// i-th tensor of every rank lies in its own shard of the same symmetric
// allocation (offsets, shapes and dtypes may differ: each rank's are
// published). Each tensor must be contiguous. Every rank's descriptors go
// through the store; a problem on any rank fails Register on every rank,
// naming it.
func (a *Agent) Register(tensors ...runtime.Tensor) (*Registration, error) {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	var rec record
	switch {
	case closed:
		rec.Err = ErrClosed.Error()
	case len(tensors) == 0:
		rec.Err = "no tensors to register"
	}
	for i, t := range tensors {
		if rec.Err != "" {
			break
		}
		reg, err := a.region(t)
		if err != nil {
			rec.Err = fmt.Sprintf("tensor %d: %v", i, err)
			break
		}
		rec.Regions = append(rec.Regions, reg)
	}
	recs, err := a.gather(rec)
	if err != nil {
		return nil, a.errorf("register: %v", err)
	}
	if err := failures(recs); err != nil {
		return nil, a.errorf("register: %v", err)
	}
	if err := matched(recs); err != nil {
		return nil, a.errorf("register: %v", err)
	}
	r := &Registration{a: a, local: append([]runtime.Tensor(nil), tensors...), handles: map[*Handle]bool{}}
	for _, rec := range recs {
		r.remote = append(r.remote, rec.Regions)
	}
	a.mu.Lock()
	a.regs[r] = true
	a.mu.Unlock()
	return r, nil
}

// region checks one tensor this rank registers.
func (a *Agent) region(t runtime.Tensor) (Region, error) {
	if t.Buf == nil {
		return Region{}, errors.New("it has no buffer")
	}
	if !t.DType.Valid() {
		return Region{}, fmt.Errorf("invalid dtype %v", t.DType)
	}
	if !t.IsContiguous() {
		return Region{}, fmt.Errorf("%s%v is strided; register a contiguous tensor", t.DType, t.Shape)
	}
	if t.Buf.Mem() != ir.Symmetric {
		return Region{}, fmt.Errorf("%s%v is in %v memory; peers reach a registered tensor through the symmetric heap, so it must be symmetric", t.DType, t.Shape, t.Buf.Mem())
	}
	alloc, err := a.os.SymmetricAllocation(t.Buf)
	if err != nil {
		return Region{}, err
	}
	if t.Offset < 0 || t.Offset+t.Bytes() > t.Buf.Size() {
		return Region{}, fmt.Errorf("%s%v at byte %d reaches past its %d-byte buffer", t.DType, t.Shape, t.Offset, t.Buf.Size())
	}
	return Region{Alloc: alloc, Offset: t.Offset, DType: t.DType, Shape: append([]int64(nil), t.Shape...)}, nil
}

// matched checks that every rank registered as many tensors, the i-th of
// each in the same symmetric allocation.
func matched(recs []record) error {
	for r, rec := range recs {
		if len(rec.Regions) != len(recs[0].Regions) {
			return fmt.Errorf("rank 0 registered %d tensors but rank %d registered %d; every rank registers the same number", len(recs[0].Regions), r, len(rec.Regions))
		}
		for i, reg := range rec.Regions {
			if want := recs[0].Regions[i].Alloc; reg.Alloc != want {
				return fmt.Errorf("tensor %d lies in symmetric allocation #%d on rank 0 but in #%d on rank %d; the i-th tensor of every rank must be its shard of the same allocation", i, want, reg.Alloc, r)
			}
		}
	}
	return nil
}

// Len is the number of tensors registered.
func (r *Registration) Len() int { return len(r.local) }

// Remote is rank's i-th region as it published it.
func (r *Registration) Remote(rank, i int) (Region, error) {
	if rank < 0 || rank >= len(r.remote) {
		return Region{}, fmt.Errorf("rank %d is outside the %d ranks", rank, len(r.remote))
	}
	if i < 0 || i >= len(r.remote[rank]) {
		return Region{}, fmt.Errorf("rank %d registered %d tensors; there is no tensor %d", rank, len(r.remote[rank]), i)
	}
	return r.remote[rank][i], nil
}

// Desc is a window of a remote rank's registered tensor: Count elements
// from element Offset of its Index-th tensor. Count < 0 means up to the
// tensor's end.
type Desc struct {
	Index         int
	Offset, Count int64
}

// Whole is the whole Index-th registered tensor.
func Whole(index int) Desc { return Desc{Index: index, Count: -1} }

// Prepare checks a transfer once and returns a handle to post as often as
// wanted: op between local[i] and the window remote[i] of rank peer's
// registered tensors. It checks that the peer is one of the ranks, that
// each window lies inside a tensor the peer registered, and that each
// local tensor has the window's dtype and element count. Local tensors
// need not be registered, and may be strided. It is local: peers are not
// involved.
func (r *Registration) Prepare(op Op, local []runtime.Tensor, peer int, remote []Desc) (*Handle, error) {
	a := r.a
	fail := func(format string, args ...any) (*Handle, error) {
		return nil, a.errorf("prepare %s from rank %d: %s", op, peer, fmt.Sprintf(format, args...))
	}
	if op != Read && op != Write {
		return fail("unknown op %d (Read or Write)", int(op))
	}
	if peer < 0 || peer >= a.world {
		return fail("rank %d is outside the mesh of %d ranks (0..%d)", peer, a.world, a.world-1)
	}
	if len(local) == 0 || len(local) != len(remote) {
		return fail("%d local tensors for %d remote windows; give one of each per copy", len(local), len(remote))
	}
	h := &Handle{reg: r, op: op, peer: peer}
	for i, d := range remote {
		if d.Index < 0 || d.Index >= len(r.remote[peer]) {
			return fail("window %d: rank %d registered %d tensors; there is no tensor %d (not registered)", i, peer, len(r.remote[peer]), d.Index)
		}
		reg := r.remote[peer][d.Index]
		n := reg.Elements()
		count := d.Count
		if count < 0 {
			count = n - d.Offset
		}
		if d.Offset < 0 || count < 0 || d.Offset+count > n {
			return fail("window %d: elements [%d, %d) are outside rank %d's tensor %d (%s, %d elements)", i, d.Offset, d.Offset+count, peer, d.Index, reg, n)
		}
		l := local[i]
		if l.DType != reg.DType {
			return fail("window %d: the local tensor is %s but rank %d's tensor %d is %s", i, l.DType, peer, d.Index, reg.DType)
		}
		if l.NumElements() != count {
			es := int64(reg.DType.Size())
			return fail("window %d: size mismatch: the local tensor holds %d elements (%d bytes) but the window of rank %d's tensor %d holds %d (%d bytes)",
				i, l.NumElements(), l.NumElements()*es, peer, d.Index, count, count*es)
		}
		// The peer's window, named on this rank's own shard of the same
		// allocation: the runtime maps it to the peer's shard.
		mine := r.local[d.Index]
		win := runtime.Tensor{Buf: mine.Buf, Offset: reg.Offset + d.Offset*int64(reg.DType.Size()), DType: reg.DType, Shape: []int64{count}}
		c, err := a.os.PreparePeerCopy(l, win, peer, op == Write)
		if err != nil {
			return fail("window %d: %v", i, err)
		}
		h.copies = append(h.copies, c)
	}
	ev, err := a.os.NewHostWaitEvent()
	if err != nil {
		return fail("%v", err)
	}
	h.ev = ev
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		ev.Close()
		return nil, a.errorf("prepare %s from rank %d: %w", op, peer, ErrDeregistered)
	}
	r.handles[h] = true
	return h, nil
}

// Quiesce is the safe point of Deregister without the deregistration: it
// waits (on the host) for this rank's transfers of r still in flight, then
// meets every rank. When it returns, no rank's transfer touches any rank's
// registered memory, and r stays usable. Collective.
func (r *Registration) Quiesce() error {
	var errs []error
	for _, h := range r.inFlight() {
		if err := h.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	// Arrive even after a failed wait, so no peer waits for this rank.
	rec := record{}
	if err := errors.Join(errs...); err != nil {
		rec.Err = err.Error()
	}
	if _, err := r.a.gather(rec); err != nil {
		errs = append(errs, r.a.errorf("quiesce: %v", err))
	}
	return errors.Join(errs...)
}

// Settle marks every post of r's handles as complete without waiting on
// its event. It is for a caller that knows they are: posts captured into a
// CUDA graph whose launch it has synchronised. A captured post's event was
// recorded by the capture, not by the launch, so the host cannot wait on
// it (CUDA answers CUDA_ERROR_INVALID_VALUE); Quiesce and Deregister then
// find nothing in flight. Local.
func (r *Registration) Settle() {
	r.mu.Lock()
	hs := make([]*Handle, 0, len(r.handles))
	for h := range r.handles {
		hs = append(hs, h)
	}
	r.mu.Unlock()
	for _, h := range hs {
		h.settle()
	}
}

// Deregister ends r on every rank. It is collective, and it is the point
// after which a rank may free or reuse the memory it registered: each rank
// first waits for its own transfers of r still in flight (so deregistering
// with transfers in flight completes them, it is not an error), then meets
// every rank, so no peer's transfer still reads or writes the memory. After
// it, Prepare and Post on r fail with ErrDeregistered (and so does a second
// Deregister, at once, without meeting the peers); a Wait on one of r's
// handles returns at once.
func (r *Registration) Deregister() error {
	if r.isDead() {
		return r.a.errorf("deregister: %w", ErrDeregistered)
	}
	err := r.Quiesce()
	a := r.a
	a.mu.Lock()
	delete(a.regs, r)
	a.mu.Unlock()
	return errors.Join(err, r.drop())
}

func (r *Registration) inFlight() []*Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	var hs []*Handle
	for h := range r.handles {
		if h.pending() {
			hs = append(hs, h)
		}
	}
	return hs
}

// drop marks r dead and destroys its handles' events (locally).
func (r *Registration) drop() error {
	r.mu.Lock()
	if r.dead {
		r.mu.Unlock()
		return nil
	}
	r.dead = true
	hs := make([]*Handle, 0, len(r.handles))
	for h := range r.handles {
		hs = append(hs, h)
	}
	r.mu.Unlock()
	var errs []error
	for _, h := range hs {
		errs = append(errs, h.release())
	}
	return errors.Join(errs...)
}

func (r *Registration) isDead() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dead
}
