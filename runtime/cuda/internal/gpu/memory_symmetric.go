package gpu

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
type Mapping struct {
	Ptr, Size uint64
}

// symAlloc is one collective symmetric allocation as this rank sees it:
// its own handle, every peer's imported handle, each mapped into its own
// range (the peer-pointer table), and, once asked for, the contiguous view.
type SymAlloc struct {
	Seq     uint64
	Size    uint64   // per shard, a multiple of the granularity
	handles []uint64 // by rank; handles[rank] is ours (cuMemCreate)
	Maps    []Mapping
	shards  []*Buffer // by rank: our shard, then peer views, made on demand

	mu       sync.Mutex
	view     *Buffer
	viewSpan Mapping // D × size, every shard mapped at r × size
}

// handleInfo is what a rank publishes about its shard through the store.
type HandleInfo struct {
	OK      bool
	Size    uint64 // bytes asked for
	Rounded uint64
	Fabric  bool // Handle holds a fabric handle; else the fd comes over the socket
	Handle  MemFabricHandle
	Err     string
}

func (h HandleInfo) Encode() []byte {
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

func DecodeHandleInfo(b []byte) (HandleInfo, error) {
	var h HandleInfo
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
var TestHookAfterHandleExchange func(seq uint64)

// allocSymmetric makes this rank's shard of the seq-th symmetric
// allocation, shares it with every peer and maps every peer's shard.
//
// Every rank ends in the same state: the records exchanged through the
// store say whether each rank's cuMemCreate worked (one rank out of memory
// fails all of them, naming it), and a last exchange agrees that every
// rank imported and mapped everything; otherwise all roll back.
func (d *Device) AllocSymmetric(bytes int64) (*Buffer, error) {
	seq := d.symSeq.Add(1) - 1
	what := fmt.Sprintf("symmetric alloc #%d", seq)
	world, rank := d.Opts.WorldSize, d.Opts.Rank
	g := d.Granularity
	rounded := (uint64(max(bytes, 1)) + g - 1) / g * g
	a := &SymAlloc{Seq: seq, Size: rounded, handles: make([]uint64, world), Maps: make([]Mapping, world), shards: make([]*Buffer, world)}

	// 1. Create, zero and export our shard.
	info := HandleInfo{Size: uint64(bytes), Rounded: rounded}
	fd := -1
	createErr := d.WithCtx(func() error {
		prop := d.AllocProp(d.handleTypes.Load())
		h, err := d.Drv.CreateMem(rounded, &prop)
		if err != nil && d.handleTypes.Load() != HandleTypePosix && !IsResult(err, ErrOutOfMemory) {
			// Asking for a fabric handle can fail where the IMEX service
			// is absent: share by fd from now on.
			d.fabricOK.Store(false)
			d.handleTypes.Store(HandleTypePosix)
			prop = d.AllocProp(d.handleTypes.Load())
			h, err = d.Drv.CreateMem(rounded, &prop)
		}
		if err != nil {
			return d.TooLarge(what, bytes, err)
		}
		a.handles[rank] = h
		d.LiveHandles.Add(1)
		if err := d.mapHandle(a, rank); err != nil {
			return err
		}
		if err := d.Drv.MemsetD8.Call3(uintptr(a.Maps[rank].Ptr), 0, uintptr(rounded)); err != nil {
			return err
		}
		if err := d.Drv.SyncCtx(); err != nil {
			return err
		}
		if world == 1 {
			return nil
		}
		// Peers on this host always get a POSIX fd; a fabric handle is
		// offered too where it exports, and importers prefer it.
		if d.fabricOK.Load() {
			if fh, err := d.Drv.exportFabric(h); err == nil {
				info.Fabric, info.Handle = true, fh
			} else {
				d.fabricOK.Store(false) // fabric needs the IMEX service
			}
		}
		if fd, err = d.Drv.ExportPosixFD(h); err != nil {
			return err
		}
		d.OpenFDs.Add(1)
		return nil
	})
	info.OK = createErr == nil
	if createErr != nil {
		info.Err = createErr.Error()
	}
	closeFD := func() {
		if fd >= 0 {
			fdpass.CloseFD(fd)
			d.OpenFDs.Add(-1)
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
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	raw, err := store.ExchangeAll(ctx, d.Opts.Store, fmt.Sprintf("cuda/sym/%d", seq), rank, world, info.Encode(), d.Opts.Timeout)
	if err != nil {
		closeFD()
		d.teardown(a)
		return nil, fmt.Errorf("rank %d: %s: handle exchange: %w", rank, what, err)
	}
	infos := make([]HandleInfo, world)
	var bad []string
	for r, b := range raw {
		if infos[r], err = DecodeHandleInfo(b); err != nil {
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
	if TestHookAfterHandleExchange != nil {
		TestHookAfterHandleExchange(seq)
	}

	// 3. Send our fd to every peer (if we share by fd), then close it.
	var errs []error
	if fd >= 0 {
		for p := 0; p < world; p++ {
			if p != rank {
				errs = append(errs, d.Fdx.Send(p, seq, fd))
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
		all, err := store.ExchangeAll(ctx, d.Opts.Store, fmt.Sprintf("cuda/sym/%d/mapped", seq), rank, world, status, d.Opts.Timeout)
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

func (d *Device) finishSym(a *SymAlloc, bytes int64) *Buffer {
	b := d.track(&Buffer{Bytes: int64(a.Size), MemType: ir.Symmetric, Kind: KindSym, Ptr: a.Maps[d.Opts.Rank].Ptr, Sym: a, Owner: d.Opts.Rank})
	_ = bytes // Size() is the rounded shard size, as on the CPU runtime
	a.shards[d.Opts.Rank] = b
	return b
}

// importPeer imports peer p's handle and maps it into a range of its own.
func (d *Device) importPeer(a *SymAlloc, p int, info HandleInfo, what string) error {
	fd, err := d.Fdx.Recv(p, a.Seq, d.Opts.Timeout, what)
	if err != nil {
		return err
	}
	d.OpenFDs.Add(1)
	var h uint64
	err = d.WithCtx(func() error {
		if info.Fabric && d.fabricImport.Load() {
			if h, err = d.Drv.importFabric(&info.Handle); err == nil {
				d.fabricImports.Add(1)
				return nil
			}
			d.fabricImport.Store(false) // e.g. no IMEX channel: fds from now on
		}
		h, err = d.Drv.ImportPosixFD(fd)
		if err == nil {
			d.fdImports.Add(1)
		}
		return err
	})
	fdpass.CloseFD(fd) // the imported handle holds its own reference
	d.OpenFDs.Add(-1)
	if err != nil {
		return fmt.Errorf("rank %d: %s: import rank %d's handle: %w", d.Opts.Rank, what, p, err)
	}
	a.handles[p] = h
	d.LiveHandles.Add(1)
	return d.WithCtx(func() error { return d.mapHandle(a, p) })
}

// mapHandle reserves a range for rank r's handle, maps it and opens it to
// this device. Runs under withCtx.
func (d *Device) mapHandle(a *SymAlloc, r int) error {
	ptr, err := d.Drv.AddressReserve(a.Size, d.Granularity)
	if err != nil {
		return err
	}
	d.LiveReservations.Add(1)
	if err := d.Drv.MapMem(ptr, a.Size, a.handles[r]); err != nil {
		d.Drv.AddressFree(ptr, a.Size)
		d.LiveReservations.Add(-1)
		return err
	}
	d.LiveMappings.Add(1)
	a.Maps[r] = Mapping{ptr, a.Size}
	if err := d.Drv.SetAccess(ptr, a.Size, d.Dev); err != nil {
		return err // teardown unmaps it
	}
	return nil
}

// teardown undoes a symmetric allocation in order: unmap every mapping
// (the view's and each shard's), free the reserved ranges, then release
// the handles. Safe on a half-built allocation.
func (d *Device) teardown(a *SymAlloc) error {
	var errs []error
	err := d.WithCtx(func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		var spans []Mapping
		if a.viewSpan.Ptr != 0 {
			for r := range a.handles {
				off := uint64(r) * a.Size
				errs = append(errs, d.Drv.UnmapMem(a.viewSpan.Ptr+off, a.Size))
				d.LiveMappings.Add(-1)
			}
			spans = append(spans, a.viewSpan)
			a.viewSpan = Mapping{}
		}
		for r, m := range a.Maps {
			if m.Ptr != 0 {
				errs = append(errs, d.Drv.UnmapMem(m.Ptr, m.Size))
				d.LiveMappings.Add(-1)
				spans = append(spans, m)
				a.Maps[r] = Mapping{}
			}
		}
		for _, s := range spans {
			errs = append(errs, d.Drv.AddressFree(s.Ptr, s.Size))
			d.LiveReservations.Add(-1)
		}
		for r, h := range a.handles {
			if h != 0 {
				errs = append(errs, d.Drv.ReleaseMem(h))
				d.LiveHandles.Add(-1)
				a.handles[r] = 0
			}
		}
		for _, s := range a.shards {
			if s != nil {
				s.Freed.Store(true)
			}
		}
		if a.view != nil {
			a.view.Freed.Store(true)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// PeerBuffer is peer's shard of b, through this rank's mapping of it.
func (d *Device) PeerBuffer(rb runtime.Buffer, peer int) (runtime.Buffer, error) {
	b, err := d.Own(rb)
	if err != nil {
		return nil, err
	}
	if b.Sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: PeerBuffer of buffer #%d, which is %v, not symmetric", d.Opts.Rank, b.BufID, b.MemType)
	}
	if peer < 0 || peer >= d.Opts.WorldSize {
		return nil, fmt.Errorf("cuda: rank %d: peer %d out of range [0, %d)", d.Opts.Rank, peer, d.Opts.WorldSize)
	}
	a := b.Sym
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shards[peer] == nil {
		a.shards[peer] = d.track(&Buffer{Bytes: int64(a.Size), MemType: ir.Symmetric, Kind: KindPeer, Ptr: a.Maps[peer].Ptr, Sym: a, Owner: peer})
	}
	return a.shards[peer], nil
}

// PeerPointers is the peer-pointer table of b: rank r's shard's address
// in this process, for kernels that load and store remotely.
func (d *Device) PeerPointers(rb runtime.Buffer) ([]uint64, error) {
	b, err := d.Own(rb)
	if err != nil {
		return nil, err
	}
	if b.Sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: buffer #%d is not symmetric", d.Opts.Rank, b.BufID)
	}
	ptrs := make([]uint64, len(b.Sym.Maps))
	for r, m := range b.Sym.Maps {
		ptrs[r] = m.Ptr
	}
	return ptrs, nil
}

// ContiguousView maps every rank's shard of b back to back, rank r at
// r × b.Size(), into one range of this process: made on first use, then
// cached until b is freed.
func (d *Device) ContiguousView(rb runtime.Buffer) (runtime.Buffer, error) {
	b, err := d.Own(rb)
	if err != nil {
		return nil, err
	}
	if b.Sym == nil {
		return nil, fmt.Errorf("cuda: rank %d: ContiguousView of buffer #%d, which is %v, not symmetric", d.Opts.Rank, b.BufID, b.MemType)
	}
	a := b.Sym
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.view != nil {
		return a.view, nil
	}
	world := uint64(d.Opts.WorldSize)
	span := a.Size * world
	err = d.WithCtx(func() error {
		base, err := d.Drv.AddressReserve(span, d.Granularity)
		if err != nil {
			return err
		}
		d.LiveReservations.Add(1)
		var mapped uint64
		fail := func(err error) error {
			for r := uint64(0); r < mapped; r++ {
				d.Drv.UnmapMem(base+r*a.Size, a.Size)
				d.LiveMappings.Add(-1)
			}
			d.Drv.AddressFree(base, span)
			d.LiveReservations.Add(-1)
			return err
		}
		for r := uint64(0); r < world; r++ {
			if err := d.Drv.MapMem(base+r*a.Size, a.Size, a.handles[r]); err != nil {
				return fail(err)
			}
			d.LiveMappings.Add(1)
			mapped++
		}
		if err := d.Drv.SetAccess(base, span, d.Dev); err != nil {
			return fail(err)
		}
		a.viewSpan = Mapping{base, span}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: contiguous view of symmetric alloc #%d: %w", d.Opts.Rank, a.Seq, err)
	}
	a.view = d.track(&Buffer{Bytes: int64(span), MemType: ir.Symmetric, Kind: KindView, Ptr: a.viewSpan.Ptr, Sym: a, Owner: -1})
	return a.view, nil
}
