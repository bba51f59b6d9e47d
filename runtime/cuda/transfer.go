package cuda

import (
	"context"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/store"
)

// One-sided transfers (runtime.OneSided, used by package runtime/transfer).
// A registered tensor must lie in this rank's shard of a symmetric
// allocation: every peer already has that shard imported and mapped (the
// peer-pointer table), so a READ or WRITE is one cuMemcpyAsync between a
// local address and the peer's mapped address, which the copy engines move
// over NVLink (up to Tuning.TransferSMMax bytes, 1 MiB by default, a copy
// kernel's SM loads or stores through the same mapping instead). Nothing is imported per registration; registering publishes
// only (allocation, offset, dtype, shape) through the store.

var _ runtime.OneSided = (*Device)(nil)

// SymmetricAllocation returns the sequence number of the symmetric
// allocation b is this rank's own shard of.
func (d *Device) SymmetricAllocation(rb runtime.Buffer) (uint64, error) {
	b, err := d.Own(rb)
	if err != nil {
		return 0, err
	}
	switch b.Kind {
	case gpu.KindSym:
		return b.Sym.Seq, nil
	case gpu.KindPeer:
		return 0, fmt.Errorf("cuda: rank %d: buffer #%d is rank %d's shard, not this rank's own", d.Opts.Rank, b.BufID, b.Owner)
	case gpu.KindView:
		return 0, fmt.Errorf("cuda: rank %d: buffer #%d is a contiguous view of every rank's shard, not this rank's own shard", d.Opts.Rank, b.BufID)
	}
	return 0, fmt.Errorf("cuda: rank %d: buffer #%d is in %v memory, not symmetric", d.Opts.Rank, b.BufID, b.MemType)
}

// Exchange all-gathers value through the job's store (store.ExchangeAll:
// keys are deleted only after every rank has read them).
func (d *Device) Exchange(value []byte) ([][]byte, error) {
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	if err := d.RefuseInCapture("Exchange", gpu.WhyHost); err != nil {
		return nil, err
	}
	if d.Opts.WorldSize == 1 {
		return [][]byte{append([]byte(nil), value...)}, nil
	}
	seq := d.ExchangeSeq.Add(1) - 1
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	all, err := store.ExchangeAll(ctx, d.Opts.Store, fmt.Sprintf("cuda/xchg/%d", seq), d.Opts.Rank, d.Opts.WorldSize, value, d.Opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: exchange #%d: %w", d.Opts.Rank, seq, err)
	}
	return all, nil
}

// NewHostWaitEvent creates an event without timing whose Synchronize
// sleeps between polls (gpu.Event.Sleepy) rather than spinning; not a
// CU_EVENT_BLOCKING_SYNC one, whose record alone costs the GPU more than
// a small transfer.
func (d *Device) NewHostWaitEvent() (runtime.Event, error) {
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	e, err := d.NewOrderEvent()
	if err != nil {
		return nil, err
	}
	e.Sleepy = true
	return e, nil
}

// PreparePeerCopy resolves the addresses once: the local tensor's and the
// peer's window's, through this rank's mapping of the peer's shard.
func (d *Device) PreparePeerCopy(local, remote runtime.Tensor, peer int, write bool) (runtime.PeerCopy, error) {
	if peer < 0 || peer >= d.Opts.WorldSize {
		return nil, fmt.Errorf("cuda: rank %d: one-sided copy: peer %d is outside the %d ranks", d.Opts.Rank, peer, d.Opts.WorldSize)
	}
	if _, err := d.SymmetricAllocation(remote.Buf); err != nil {
		return nil, fmt.Errorf("one-sided copy: the remote window: %w", err)
	}
	if !remote.IsContiguous() {
		return nil, fmt.Errorf("cuda: rank %d: one-sided copy: the remote window must be contiguous", d.Opts.Rank)
	}
	if local.DType != remote.DType || local.NumElements() != remote.NumElements() {
		return nil, fmt.Errorf("cuda: rank %d: one-sided copy: the local tensor is %v%v but the remote window is %v%v: dtype and element count must match",
			d.Opts.Rank, local.DType, local.Shape, remote.DType, remote.Shape)
	}
	if _, err := d.Span(local, "one-sided copy: the local tensor"); err != nil {
		return nil, err
	}
	if _, err := d.Span(remote, "one-sided copy: the remote window"); err != nil {
		return nil, err
	}
	pb, err := d.PeerBuffer(remote.Buf, peer)
	if err != nil {
		return nil, err
	}
	shard := remote.Buf.(*gpu.Buffer)
	far := runtime.Tensor{Buf: pb, Offset: remote.Offset, DType: remote.DType, Shape: remote.Shape}
	c := &peerCopy{d: d, local: local, far: far, write: write, n: uint64(local.Bytes()),
		bufs: []*gpu.Buffer{local.Buf.(*gpu.Buffer), shard, pb.(*gpu.Buffer)}}
	if local.IsContiguous() {
		lp := local.Buf.(*gpu.Buffer).Ptr + uint64(local.Offset)
		fp := pb.(*gpu.Buffer).Ptr + uint64(remote.Offset)
		c.dst, c.src = lp, fp
		if write {
			c.dst, c.src = fp, lp
		}
		c.direct = true
	}
	return c, nil
}

// peerCopy is one resolved one-sided copy. A contiguous one posts a single
// cuMemcpyAsync; a strided local tensor goes through Copy's kernel.
type peerCopy struct {
	d          *Device
	local, far runtime.Tensor
	write      bool
	direct     bool
	dst, src   uint64
	n          uint64
	bufs       []*gpu.Buffer // the local buffer, our shard, our mapping of the peer's
}

func (c *peerCopy) Post(rs runtime.Stream) error {
	for _, b := range c.bufs {
		if b.Freed.Load() {
			return fmt.Errorf("cuda: rank %d: one-sided copy: buffer #%d was freed", c.d.Opts.Rank, b.BufID)
		}
	}
	if !c.direct {
		if c.write {
			return c.d.Copy(c.far, c.local, rs)
		}
		return c.d.Copy(c.local, c.far, rs)
	}
	s, err := c.d.Stream(rs)
	if err != nil {
		return err
	}
	if c.n == 0 {
		return nil
	}
	return c.d.WithCtx(func() error {
		if int64(c.n) <= c.d.Tune.TransferSMMax {
			// Small (Tuning.TransferSMMax): a copy kernel's loads or
			// stores through the peer mapping, which with programmatic
			// dependent launch start sooner than the copy engines.
			es := smCopyUnit(c.dst, c.src, c.n)
			t := runtime.Tensor{DType: unitDType[es], Shape: []int64{int64(c.n) / int64(es)}}
			return c.d.StridedCopy(c.dst, []int64{1}, c.src, []int64{1}, t, s)
		}
		return c.d.Drv.MemcpyAsync.Call4(uintptr(c.dst), uintptr(c.src), uintptr(c.n), s.H)
	})
}

// smCopyUnit is the widest element (8, 4, 2 or 1 bytes) that divides both
// addresses and the length, for a kernel copy of n bytes.
func smCopyUnit(dst, src, n uint64) int {
	for _, es := range []int{8, 4, 2} {
		if (dst|src|n)%uint64(es) == 0 {
			return es
		}
	}
	return 1
}

// unitDType is a dtype of each element size the copy kernels move.
var unitDType = map[int]ir.DType{1: ir.Bool, 2: ir.F16, 4: ir.I32, 8: ir.I64}

// Err is nil: this rank's import of the peer's shard keeps that memory
// alive even after the peer frees its own handle (so a late read sees
// stale bytes, not a fault: Deregister's protocol is what orders it), and
// copy failures are the stream's.
func (c *peerCopy) Err() error { return nil }
