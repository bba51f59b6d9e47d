package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/fdpass"
	"github.com/hirlab/hir/runtime/store"
)

// Symmetric memory: the collective allocation (cuMemCreate, every rank's
// shard exported, exchanged through the store and mapped here), its
// teardown, and the views of it (a peer's shard, every shard contiguous).

// mapping is one reserved range with one handle mapped at its start.
type mapping struct {
	ptr, size uint64
}

// symAlloc is one collective symmetric allocation as this rank sees it:
// its own handle, every peer's imported handle, each mapped into its own
// range (the peer-pointer table), and, once asked for, the contiguous view.
type symAlloc struct {
	seq     uint64
	size    uint64   // per shard, a multiple of the granularity
	handles []uint64 // by rank; handles[rank] is ours (cuMemCreate)
	maps    []mapping
	shards  []*buffer // by rank: our shard, then peer views, made on demand

	mu       sync.Mutex
	view     *buffer
	viewSpan mapping // D × size, every shard mapped at r × size
}

// handleInfo is what a rank publishes about its shard through the store.
type handleInfo struct {
	OK      bool
	Size    uint64 // bytes asked for
	Rounded uint64
	Fabric  bool // Handle holds a fabric handle; else the fd comes over the socket
	Handle  memFabricHandle
	Err     string
}

func (h handleInfo) encode() []byte {
	b := make([]byte, 0, 96+len(h.Err))
	flags := byte(0)
	if h.OK {
		flags |= 1
	}
	if h.Fabric {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, h.Size)
	b = binary.LittleEndian.AppendUint64(b, h.Rounded)
	b = append(b, h.Handle.Data[:]...)
	return append(b, h.Err...)
}

func decodeHandleInfo(b []byte) (handleInfo, error) {
	var h handleInfo
	if len(b) < 1+16+64 {
		return h, fmt.Errorf("malformed handle record of %d bytes", len(b))
	}
	h.OK, h.Fabric = b[0]&1 != 0, b[0]&2 != 0
	h.Size = binary.LittleEndian.Uint64(b[1:])
	h.Rounded = binary.LittleEndian.Uint64(b[9:])
	copy(h.Handle.Data[:], b[17:81])
	h.Err = string(b[81:])
	return h, nil
}

// testHookAfterHandleExchange runs (in tests) once the handle records are
// exchanged and before any descriptor is sent: the place a peer dies.
var testHookAfterHandleExchange func(seq uint64)

// allocSymmetric makes this rank's shard of the seq-th symmetric
// allocation, shares it with every peer and maps every peer's shard.
//
// Every rank ends in the same state: the records exchanged through the
// store say whether each rank's cuMemCreate worked (one rank out of memory
// fails all of them, naming it), and a last exchange agrees that every
// rank imported and mapped everything; otherwise all roll back.
func (d *gpuDevice) allocSymmetric(bytes int64) (*buffer, error) {
	seq := d.symSeq.Add(1) - 1
	what := fmt.Sprintf("symmetric alloc #%d", seq)
	world, rank := d.opts.WorldSize, d.opts.Rank
	g := d.granularity
	rounded := (uint64(max(bytes, 1)) + g - 1) / g * g
	a := &symAlloc{seq: seq, size: rounded, handles: make([]uint64, world), maps: make([]mapping, world), shards: make([]*buffer, world)}

	// 1. Create, zero and export our shard.
	info := handleInfo{Size: uint64(bytes), Rounded: rounded}
	fd := -1
	createErr := d.withCtx(func() error {
		prop := d.allocProp(d.handleTypes.Load())
		h, err := d.drv.memCreate(rounded, &prop)
		if err != nil && d.handleTypes.Load() != handleTypePosix && !IsResult(err, errOutOfMemory) {
			// Asking for a fabric handle can fail where the IMEX service
			// is absent: share by fd from now on.
			d.fabricOK.Store(false)
			d.handleTypes.Store(handleTypePosix)
			prop = d.allocProp(d.handleTypes.Load())
			h, err = d.drv.memCreate(rounded, &prop)
		}
		if err != nil {
			return d.tooLarge(what, bytes, err)
		}
		a.handles[rank] = h
		d.liveHandles.Add(1)
		if err := d.mapHandle(a, rank); err != nil {
			return err
		}
		if err := d.drv.MemsetD8.Call3(uintptr(a.maps[rank].ptr), 0, uintptr(rounded)); err != nil {
			return err
		}
		if err := d.drv.ctxSynchronize(); err != nil {
			return err
		}
		if world == 1 {
			return nil
		}
		// Peers on this host always get a POSIX fd; a fabric handle is
		// offered too where it exports, and importers prefer it.
		if d.fabricOK.Load() {
			if fh, err := d.drv.exportFabric(h); err == nil {
				info.Fabric, info.Handle = true, fh
			} else {
				d.fabricOK.Store(false) // fabric needs the IMEX service
			}
		}
		if fd, err = d.drv.exportPosixFD(h); err != nil {
			return err
		}
		d.openFDs.Add(1)
		return nil
	})
	info.OK = createErr == nil
	if createErr != nil {
		info.Err = createErr.Error()
	}
	closeFD := func() {
		if fd >= 0 {
			fdpass.CloseFD(fd)
			d.openFDs.Add(-1)
			fd = -1
		}
	}
	if world == 1 {
		if createErr != nil {
			d.teardown(a)
			return nil, createErr
		}
		return d.finishSym(a, bytes), nil
	}

	// 2. Agree on sizes and learn how each peer shares its handle.
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	raw, err := store.ExchangeAll(ctx, d.opts.Store, fmt.Sprintf("cuda/sym/%d", seq), rank, world, info.encode(), d.opts.Timeout)
	if err != nil {
		closeFD()
		d.teardown(a)
		return nil, fmt.Errorf("rank %d: %s: handle exchange: %w", rank, what, err)
	}
	infos := make([]handleInfo, world)
	var bad []string
	for r, b := range raw {
		if infos[r], err = decodeHandleInfo(b); err != nil {
			bad = append(bad, fmt.Sprintf("rank %d: %v", r, err))
		} else if !infos[r].OK {
			bad = append(bad, infos[r].Err)
		} else if infos[r].Size != uint64(bytes) || infos[r].Rounded != rounded {
			bad = append(bad, fmt.Sprintf("rank %d asked for %d bytes (%d rounded) where rank %d asked for %d (%d)",
				r, infos[r].Size, infos[r].Rounded, rank, bytes, rounded))
		}
	}
	if len(bad) > 0 {
		closeFD()
		d.teardown(a)
		return nil, fmt.Errorf("rank %d: %s failed: %s", rank, what, strings.Join(bad, "; "))
	}
	if testHookAfterHandleExchange != nil {
		testHookAfterHandleExchange(seq)
	}

	// 3. Send our fd to every peer (if we share by fd), then close it.
	var errs []error
	if fd >= 0 {
		for p := 0; p < world; p++ {
			if p != rank {
				errs = append(errs, d.fdx.Send(p, seq, fd))
			}
		}
		closeFD()
	}
	// 4. Import and map every peer's shard.
	if err := errors.Join(errs...); err == nil {
		for p := 0; p < world && err == nil; p++ {
			if p != rank {
				err = d.importPeer(a, p, infos[p], what)
			}
		}
		errs = append(errs, err)
	}
	failure := errors.Join(errs...)
	// 5. Agree that everyone succeeded (a rank whose peer died knows it
	// already and does not wait for the store to say so).
	if failure == nil || !strings.Contains(failure.Error(), "did its process die") {
		status := []byte{1}
		if failure != nil {
			status = append([]byte{0}, failure.Error()...)
		}
		all, err := store.ExchangeAll(ctx, d.opts.Store, fmt.Sprintf("cuda/sym/%d/mapped", seq), rank, world, status, d.opts.Timeout)
		if err != nil {
			failure = errors.Join(failure, err)
		} else if failure == nil {
			for r, s := range all {
				if len(s) == 0 || s[0] != 1 {
					failure = fmt.Errorf("rank %d could not map every shard: %s", r, s[min(1, len(s)):])
					break
				}
			}
		}
	}
	if failure != nil {
		d.teardown(a)
		return nil, fmt.Errorf("%s: %w", what, failure)
	}
	return d.finishSym(a, bytes), nil
}

func (d *gpuDevice) finishSym(a *symAlloc, bytes int64) *buffer {
	b := d.track(&buffer{size: int64(a.size), mem: ir.Symmetric, kind: kindSym, ptr: a.maps[d.opts.Rank].ptr, sym: a, owner: d.opts.Rank})
	_ = bytes // Size() is the rounded shard size, as on the CPU runtime
	a.shards[d.opts.Rank] = b
	return b
}

// importPeer imports peer p's handle and maps it into a range of its own.
func (d *gpuDevice) importPeer(a *symAlloc, p int, info handleInfo, what string) error {
	fd, err := d.fdx.Recv(p, a.seq, d.opts.Timeout, what)
	if err != nil {
		return err
	}
	d.openFDs.Add(1)
	var h uint64
	err = d.withCtx(func() error {
		if info.Fabric && d.fabricImport.Load() {
			if h, err = d.drv.importFabric(&info.Handle); err == nil {
				d.fabricImports.Add(1)
				return nil
			}
			d.fabricImport.Store(false) // e.g. no IMEX channel: fds from now on
		}
		h, err = d.drv.importPosixFD(fd)
		if err == nil {
			d.fdImports.Add(1)
		}
		return err
	})
	fdpass.CloseFD(fd) // the imported handle holds its own reference
	d.openFDs.Add(-1)
	if err != nil {
		return fmt.Errorf("rank %d: %s: import rank %d's handle: %w", d.opts.Rank, what, p, err)
	}
	a.handles[p] = h
	d.liveHandles.Add(1)
	return d.withCtx(func() error { return d.mapHandle(a, p) })
}

// mapHandle reserves a range for rank r's handle, maps it and opens it to
// this device. Runs under withCtx.
func (d *gpuDevice) mapHandle(a *symAlloc, r int) error {
	ptr, err := d.drv.addressReserve(a.size, d.granularity)
	if err != nil {
		return err
	}
	d.liveReservations.Add(1)
	if err := d.drv.memMap(ptr, a.size, a.handles[r]); err != nil {
		d.drv.addressFree(ptr, a.size)
		d.liveReservations.Add(-1)
		return err
	}
	d.liveMappings.Add(1)
	a.maps[r] = mapping{ptr, a.size}
	if err := d.drv.setAccess(ptr, a.size, d.dev); err != nil {
		return err // teardown unmaps it
	}
	return nil
}

// teardown undoes a symmetric allocation in order: unmap every mapping
// (the view's and each shard's), free the reserved ranges, then release
// the handles. Safe on a half-built allocation.
func (d *gpuDevice) teardown(a *symAlloc) error {
	var errs []error
	err := d.withCtx(func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		var spans []mapping
		if a.viewSpan.ptr != 0 {
			for r := range a.handles {
				off := uint64(r) * a.size
				errs = append(errs, d.drv.memUnmap(a.viewSpan.ptr+off, a.size))
				d.liveMappings.Add(-1)
			}
			spans = append(spans, a.viewSpan)
			a.viewSpan = mapping{}
		}
		for r, m := range a.maps {
			if m.ptr != 0 {
				errs = append(errs, d.drv.memUnmap(m.ptr, m.size))
				d.liveMappings.Add(-1)
				spans = append(spans, m)
				a.maps[r] = mapping{}
			}
		}
		for _, s := range spans {
			errs = append(errs, d.drv.addressFree(s.ptr, s.size))
			d.liveReservations.Add(-1)
		}
		for r, h := range a.handles {
			if h != 0 {
				errs = append(errs, d.drv.memRelease(h))
				d.liveHandles.Add(-1)
				a.handles[r] = 0
			}
		}
		for _, s := range a.shards {
			if s != nil {
				s.freed.Store(true)
			}
		}
		if a.view != nil {
			a.view.freed.Store(true)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// PeerBuffer is peer's shard of b, through this rank's mapping of it.
func (d *gpuDevice) PeerBuffer(rb runtime.Buffer, peer int) (runtime.Buffer, error) {
	b, err := d.own(rb)
	if err != nil {
		return nil, err
	}
	if b.sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: PeerBuffer of buffer #%d, which is %v, not symmetric", d.opts.Rank, b.id, b.mem)
	}
	if peer < 0 || peer >= d.opts.WorldSize {
		return nil, fmt.Errorf("cuda: rank %d: peer %d out of range [0, %d)", d.opts.Rank, peer, d.opts.WorldSize)
	}
	a := b.sym
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shards[peer] == nil {
		a.shards[peer] = d.track(&buffer{size: int64(a.size), mem: ir.Symmetric, kind: kindPeer, ptr: a.maps[peer].ptr, sym: a, owner: peer})
	}
	return a.shards[peer], nil
}

// PeerPointers is the peer-pointer table of b: rank r's shard's address
// in this process, for kernels that load and store remotely.
func (d *gpuDevice) PeerPointers(rb runtime.Buffer) ([]uint64, error) {
	b, err := d.own(rb)
	if err != nil {
		return nil, err
	}
	if b.sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: buffer #%d is not symmetric", d.opts.Rank, b.id)
	}
	ptrs := make([]uint64, len(b.sym.maps))
	for r, m := range b.sym.maps {
		ptrs[r] = m.ptr
	}
	return ptrs, nil
}

// ContiguousView maps every rank's shard of b back to back, rank r at
// r × b.Size(), into one range of this process: made on first use, then
// cached until b is freed.
func (d *gpuDevice) ContiguousView(rb runtime.Buffer) (runtime.Buffer, error) {
	b, err := d.own(rb)
	if err != nil {
		return nil, err
	}
	if b.sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: ContiguousView of buffer #%d, which is %v, not symmetric", d.opts.Rank, b.id, b.mem)
	}
	a := b.sym
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.view != nil {
		return a.view, nil
	}
	world := uint64(d.opts.WorldSize)
	span := a.size * world
	err = d.withCtx(func() error {
		base, err := d.drv.addressReserve(span, d.granularity)
		if err != nil {
			return err
		}
		d.liveReservations.Add(1)
		var mapped uint64
		fail := func(err error) error {
			for r := uint64(0); r < mapped; r++ {
				d.drv.memUnmap(base+r*a.size, a.size)
				d.liveMappings.Add(-1)
			}
			d.drv.addressFree(base, span)
			d.liveReservations.Add(-1)
			return err
		}
		for r := uint64(0); r < world; r++ {
			if err := d.drv.memMap(base+r*a.size, a.size, a.handles[r]); err != nil {
				return fail(err)
			}
			d.liveMappings.Add(1)
			mapped++
		}
		if err := d.drv.setAccess(base, span, d.dev); err != nil {
			return fail(err)
		}
		a.viewSpan = mapping{base, span}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: contiguous view of symmetric alloc #%d: %w", d.opts.Rank, a.seq, err)
	}
	a.view = d.track(&buffer{size: int64(span), mem: ir.Symmetric, kind: kindView, ptr: a.viewSpan.ptr, sym: a, owner: -1})
	return a.view, nil
}
