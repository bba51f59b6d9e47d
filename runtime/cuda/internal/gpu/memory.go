package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

type BufKind int

const (
	KindGlobal BufKind = iota // cuMemAlloc
	kindHost                  // cuMemHostAlloc (pinned, mapped)
	KindSym                   // this rank's shard of a symmetric allocation
	KindPeer                  // a peer's shard, mapped here (a view)
	KindView                  // the contiguous view of every shard (a view)
)

// buffer is an allocation or a view of one. ptr is a device address in
// this process's unified address space (for host memory, the mapped
// pinned range), so copies and kernels need nothing else.
type Buffer struct {
	Dev     *Device
	BufID   uint64
	Bytes   int64
	MemType ir.MemoryType
	Kind    BufKind
	Ptr     uint64
	Host    unsafe.Pointer // kindHost: the pinned host range
	Sym     *SymAlloc      // kindSym, kindPeer, kindView
	Owner   int            // the rank whose memory it is (-1 for a view)
	Freed   atomic.Bool
}

var _ runtime.Buffer = (*Buffer)(nil)

func (b *Buffer) ID() uint64         { return b.BufID }
func (b *Buffer) Size() int64        { return b.Bytes }
func (b *Buffer) Mem() ir.MemoryType { return b.MemType }

// Pointer is the buffer's device address in this process.
func (b *Buffer) Pointer() uint64 { return b.Ptr }

func (d *Device) track(b *Buffer) *Buffer {
	b.Dev, b.BufID = d, d.NextID.Add(1)
	if b.Kind == KindGlobal || b.Kind == kindHost || b.Kind == KindSym {
		d.Mu.Lock()
		d.Live[b.BufID] = b
		d.Mu.Unlock()
	}
	return b
}

func (d *Device) Own(rb runtime.Buffer) (*Buffer, error) {
	b, ok := rb.(*Buffer)
	if !ok || b == nil || b.Dev != d {
		return nil, fmt.Errorf("cuda: rank %d: buffer %T does not belong to this device", d.Opts.Rank, rb)
	}
	if b.Freed.Load() {
		return nil, fmt.Errorf("cuda: rank %d: buffer #%d was freed", d.Opts.Rank, b.BufID)
	}
	return b, nil
}

func (d *Device) TooLarge(what string, bytes int64, err error) error {
	if !IsResult(err, ErrOutOfMemory) {
		return fmt.Errorf("rank %d: %s of %d bytes: %w", d.Opts.Rank, what, bytes, err)
	}
	// The typed error (errors.As with *runtime.OutOfMemoryError) wraps the
	// driver's, so IsResult(err, errOutOfMemory) still holds.
	oom := &runtime.OutOfMemoryError{Where: fmt.Sprintf("device %d (%s)", d.Opts.Device, d.Props.Name), What: what,
		Asked: bytes, Free: -1, Limit: -1, Err: err}
	if free, total, ierr := d.Drv.memGetInfo(); ierr == nil {
		oom.Free, oom.Limit = int64(free), int64(total)
	}
	return fmt.Errorf("rank %d: %w", d.Opts.Rank, oom)
}

func Human(n uint64) string {
	switch {
	case n >= 1<<50:
		return fmt.Sprintf("%.2f PiB", float64(n)/(1<<50))
	case n >= 1<<40:
		return fmt.Sprintf("%.2f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// Alloc returns a zero-filled buffer. Symmetric allocation is collective.
func (d *Device) Alloc(bytes int64, mem ir.MemoryType) (runtime.Buffer, error) {
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	if err := d.RefuseInCapture("Alloc", WhyHost); err != nil {
		return nil, err
	}
	if bytes < 0 {
		return nil, fmt.Errorf("cuda: rank %d: alloc of %d bytes", d.Opts.Rank, bytes)
	}
	n := uint64(bytes)
	if n == 0 {
		n = 1 // the driver refuses empty allocations; Size() still says 0
	}
	switch mem {
	case ir.Global:
		var ptr uint64
		err := d.WithCtx(func() error {
			if err := d.Drv.MemAlloc.Call2(uintptr(unsafe.Pointer(&ptr)), uintptr(n)); err != nil {
				return d.TooLarge("global alloc", bytes, err)
			}
			// The memset runs on the legacy stream, which our non-blocking
			// streams do not wait for: finish it here.
			if err := d.Drv.MemsetD8.Call3(uintptr(ptr), 0, uintptr(n)); err != nil {
				d.Drv.MemFree.Call1(uintptr(ptr))
				return err
			}
			return d.Drv.SyncCtx()
		})
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		return d.track(&Buffer{Bytes: bytes, MemType: mem, Kind: KindGlobal, Ptr: ptr, Owner: d.Opts.Rank}), nil
	case ir.Host:
		var host unsafe.Pointer
		var ptr uint64
		err := d.WithCtx(func() error {
			if err := d.Drv.MemHostAlloc.Call3(uintptr(unsafe.Pointer(&host)), uintptr(n), memHostAllocPortable|memHostAllocDeviceMap); err != nil {
				return d.TooLarge("host alloc", bytes, err)
			}
			if err := d.Drv.MemHostGetDevicePointer.Call3(uintptr(unsafe.Pointer(&ptr)), uintptr(host), 0); err != nil {
				d.Drv.MemFreeHost.Call1(uintptr(host))
				return err
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		clear(unsafe.Slice((*byte)(host), n))
		return d.track(&Buffer{Bytes: bytes, MemType: mem, Kind: kindHost, Ptr: ptr, Host: host, Owner: d.Opts.Rank}), nil
	case ir.Symmetric:
		b, err := d.AllocSymmetric(bytes)
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("cuda: rank %d: alloc in unknown memory type %v", d.Opts.Rank, mem)
}

// Free releases a buffer; freeing a symmetric buffer is collective.
func (d *Device) Free(rb runtime.Buffer) error {
	if err := d.RefuseInCapture("Free", WhyHost); err != nil {
		return err
	}
	b, err := d.Own(rb)
	if err != nil {
		return err
	}
	if b.Kind == KindPeer || b.Kind == KindView {
		return fmt.Errorf("cuda: rank %d: buffer #%d is a view; free the symmetric buffer it maps", d.Opts.Rank, b.BufID)
	}
	if b.Kind == KindSym {
		// Work queued on any stream may still touch the shard or its
		// mappings. Peers need not be waited for: each holds its own
		// imported handle to our shard, and the driver keeps physical
		// memory alive until every handle is released and every mapping
		// unmapped. So, as on the CPU runtime, every rank frees each
		// symmetric buffer, in any order and without meeting the others
		// (a barrier per allocation deadlocked ranks that freed two
		// symmetric buffers in different orders).
		if err := d.WithCtx(d.Drv.SyncCtx); err != nil {
			return errors.Join(fmt.Errorf("cuda: rank %d: free: %w", d.Opts.Rank, err), d.Release(b))
		}
	}
	return d.Release(b)
}

// release frees b locally (no collective step).
func (d *Device) Release(b *Buffer) error {
	if b.Freed.Swap(true) {
		return nil
	}
	d.Mu.Lock()
	delete(d.Live, b.BufID)
	d.Mu.Unlock()
	switch b.Kind {
	case KindGlobal:
		return d.WithCtx(func() error { return d.Drv.MemFree.Call1(uintptr(b.Ptr)) })
	case kindHost:
		return d.WithCtx(func() error { return d.Drv.MemFreeHost.Call1(uintptr(b.Host)) })
	case KindSym:
		return d.teardown(b.Sym)
	}
	return nil
}

// unsafeSlice is a pinned host buffer's bytes.
func UnsafeSlice(b *Buffer) []byte {
	if b.Kind != kindHost || b.Host == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.Host), b.Bytes)
}
