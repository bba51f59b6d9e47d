package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

type bufKind int

const (
	kindGlobal bufKind = iota // cuMemAlloc
	kindHost                  // cuMemHostAlloc (pinned, mapped)
	kindSym                   // this rank's shard of a symmetric allocation
	kindPeer                  // a peer's shard, mapped here (a view)
	kindView                  // the contiguous view of every shard (a view)
)

// buffer is an allocation or a view of one. ptr is a device address in
// this process's unified address space (for host memory, the mapped
// pinned range), so copies and kernels need nothing else.
type buffer struct {
	dev   *gpuDevice
	id    uint64
	size  int64
	mem   ir.MemoryType
	kind  bufKind
	ptr   uint64
	host  unsafe.Pointer // kindHost: the pinned host range
	sym   *symAlloc      // kindSym, kindPeer, kindView
	owner int            // the rank whose memory it is (-1 for a view)
	freed atomic.Bool
}

var _ runtime.Buffer = (*buffer)(nil)

func (b *buffer) ID() uint64         { return b.id }
func (b *buffer) Size() int64        { return b.size }
func (b *buffer) Mem() ir.MemoryType { return b.mem }

// Pointer is the buffer's device address in this process.
func (b *buffer) Pointer() uint64 { return b.ptr }

func (d *gpuDevice) track(b *buffer) *buffer {
	b.dev, b.id = d, d.nextID.Add(1)
	if b.kind == kindGlobal || b.kind == kindHost || b.kind == kindSym {
		d.mu.Lock()
		d.live[b.id] = b
		d.mu.Unlock()
	}
	return b
}

func (d *gpuDevice) own(rb runtime.Buffer) (*buffer, error) {
	b, ok := rb.(*buffer)
	if !ok || b == nil || b.dev != d {
		return nil, fmt.Errorf("cuda: rank %d: buffer %T does not belong to this device", d.opts.Rank, rb)
	}
	if b.freed.Load() {
		return nil, fmt.Errorf("cuda: rank %d: buffer #%d was freed", d.opts.Rank, b.id)
	}
	return b, nil
}

func (d *gpuDevice) tooLarge(what string, bytes int64, err error) error {
	if !IsResult(err, errOutOfMemory) {
		return fmt.Errorf("rank %d: %s of %d bytes: %w", d.opts.Rank, what, bytes, err)
	}
	// The typed error (errors.As with *runtime.OutOfMemoryError) wraps the
	// driver's, so IsResult(err, errOutOfMemory) still holds.
	oom := &runtime.OutOfMemoryError{Where: fmt.Sprintf("device %d (%s)", d.opts.Device, d.info.Name), What: what,
		Asked: bytes, Free: -1, Limit: -1, Err: err}
	if free, total, ierr := d.drv.memGetInfo(); ierr == nil {
		oom.Free, oom.Limit = int64(free), int64(total)
	}
	return fmt.Errorf("rank %d: %w", d.opts.Rank, oom)
}

func human(n uint64) string {
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
func (d *gpuDevice) Alloc(bytes int64, mem ir.MemoryType) (runtime.Buffer, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	if err := d.refuseInCapture("Alloc", whyHost); err != nil {
		return nil, err
	}
	if bytes < 0 {
		return nil, fmt.Errorf("cuda: rank %d: alloc of %d bytes", d.opts.Rank, bytes)
	}
	n := uint64(bytes)
	if n == 0 {
		n = 1 // the driver refuses empty allocations; Size() still says 0
	}
	switch mem {
	case ir.Global:
		var ptr uint64
		err := d.withCtx(func() error {
			if err := d.drv.MemAlloc.Call2(uintptr(unsafe.Pointer(&ptr)), uintptr(n)); err != nil {
				return d.tooLarge("global alloc", bytes, err)
			}
			// The memset runs on the legacy stream, which our non-blocking
			// streams do not wait for: finish it here.
			if err := d.drv.MemsetD8.Call3(uintptr(ptr), 0, uintptr(n)); err != nil {
				d.drv.MemFree.Call1(uintptr(ptr))
				return err
			}
			return d.drv.ctxSynchronize()
		})
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		return d.track(&buffer{size: bytes, mem: mem, kind: kindGlobal, ptr: ptr, owner: d.opts.Rank}), nil
	case ir.Host:
		var host unsafe.Pointer
		var ptr uint64
		err := d.withCtx(func() error {
			if err := d.drv.MemHostAlloc.Call3(uintptr(unsafe.Pointer(&host)), uintptr(n), memHostAllocPortable|memHostAllocDeviceMap); err != nil {
				return d.tooLarge("host alloc", bytes, err)
			}
			if err := d.drv.MemHostGetDevicePointer.Call3(uintptr(unsafe.Pointer(&ptr)), uintptr(host), 0); err != nil {
				d.drv.MemFreeHost.Call1(uintptr(host))
				return err
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		clear(unsafe.Slice((*byte)(host), n))
		return d.track(&buffer{size: bytes, mem: mem, kind: kindHost, ptr: ptr, host: host, owner: d.opts.Rank}), nil
	case ir.Symmetric:
		b, err := d.allocSymmetric(bytes)
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("cuda: rank %d: alloc in unknown memory type %v", d.opts.Rank, mem)
}

// Free releases a buffer; freeing a symmetric buffer is collective.
func (d *gpuDevice) Free(rb runtime.Buffer) error {
	if err := d.refuseInCapture("Free", whyHost); err != nil {
		return err
	}
	b, err := d.own(rb)
	if err != nil {
		return err
	}
	if b.kind == kindPeer || b.kind == kindView {
		return fmt.Errorf("cuda: rank %d: buffer #%d is a view; free the symmetric buffer it maps", d.opts.Rank, b.id)
	}
	if b.kind == kindSym {
		// Work queued on any stream may still touch the shard or its
		// mappings. Peers need not be waited for: each holds its own
		// imported handle to our shard, and the driver keeps physical
		// memory alive until every handle is released and every mapping
		// unmapped. So, as on the CPU runtime, every rank frees each
		// symmetric buffer, in any order and without meeting the others
		// (a barrier per allocation deadlocked ranks that freed two
		// symmetric buffers in different orders).
		if err := d.withCtx(d.drv.ctxSynchronize); err != nil {
			return errors.Join(fmt.Errorf("cuda: rank %d: free: %w", d.opts.Rank, err), d.release(b))
		}
	}
	return d.release(b)
}

// release frees b locally (no collective step).
func (d *gpuDevice) release(b *buffer) error {
	if b.freed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	delete(d.live, b.id)
	d.mu.Unlock()
	switch b.kind {
	case kindGlobal:
		return d.withCtx(func() error { return d.drv.MemFree.Call1(uintptr(b.ptr)) })
	case kindHost:
		return d.withCtx(func() error { return d.drv.MemFreeHost.Call1(uintptr(b.host)) })
	case kindSym:
		return d.teardown(b.sym)
	}
	return nil
}

// unsafeSlice is a pinned host buffer's bytes.
func unsafeSlice(b *buffer) []byte {
	if b.kind != kindHost || b.host == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.host), b.size)
}
