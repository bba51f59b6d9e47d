package coll

import (
	"errors"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/fdpass"
)

// Send and Recv. Each ordered pair (sender a, receiver b) has an inbox in
// b's memory: flags and two staging slots per block (kernels/collective.cu
// lays it out). The sender's kernel copies the tensor into the inbox a
// chunk at a time and raises a data flag; the receiver's kernel waits for
// it, checks the size, copies the chunk out and acks, which frees the slot.
// Inboxes are made without a collective: at its first send or recv a rank
// makes its inbox for every peer and sends each peer its fd over the
// fd-exchange socket (that does not wait for the peer). A send maps the
// peer's inbox for this rank, waiting for that fd, the first time it needs
// it; a recv needs only this rank's own inbox. So no rank waits on a peer
// that is itself waiting: in a ring of sends each rank's first op
// announces its inboxes before it waits for the next rank's.
// (Setting up one pair at a time deadlocked a ring of three.)

// p2pKey is the fd-exchange key of inboxes (symmetric allocations use
// their sequence numbers, far below).
const p2pKey = 1 << 62

type p2pPair struct {
	peer int
	// Our inbox (peer writes it, we receive from it) and the peer's
	// inbox for us, mapped here.
	in, out     p2pMapping
	sendG, recv uint64 // transfers so far, each way
}

type p2pMapping struct {
	handle uint64
	m      gpu.Mapping
}

// pair returns the pair with peer; sending says the peer's inbox must be
// mapped. The first call of the rank makes every inbox (see above).
func (d *Comm) pair(peer int, sending bool) (*p2pPair, error) {
	c := &d.State
	c.p2pMu.Lock()
	defer c.p2pMu.Unlock()
	if c.p2p == nil {
		counts, err := d.Alloc(int64(d.Opts.WorldSize*epochWords*8), ir.Global) // zero-filled
		if err != nil {
			return nil, fmt.Errorf("cuda: rank %d: allocating the send/recv counters: %w", d.Opts.Rank, err)
		}
		c.p2pCounts = counts.(*gpu.Buffer)
		pairs := map[int]*p2pPair{}
		for q := 0; q < d.Opts.WorldSize; q++ {
			p := &p2pPair{peer: q}
			pairs[q] = p
			if err := d.makeInbox(p); err != nil {
				for _, p := range pairs {
					d.unmapPair(p)
				}
				d.Release(c.p2pCounts)
				c.p2pCounts = nil
				return nil, fmt.Errorf("cuda: rank %d: making the inbox for rank %d: %w", d.Opts.Rank, q, err)
			}
			if q == d.Opts.Rank {
				p.out = p2pMapping{m: p.in.m} // our own inbox: nothing more to map
			}
		}
		c.p2p = pairs
	}
	p := c.p2p[peer]
	if sending && p.out.m.Ptr == 0 {
		if err := d.mapPeerInbox(p); err != nil {
			return nil, fmt.Errorf("cuda: rank %d: setting up sends to rank %d: %w", d.Opts.Rank, peer, err)
		}
	}
	return p, nil
}

func (d *Comm) inboxSize() uint64 {
	g := d.Granularity
	return (uint64(p2pInboxSize) + g - 1) / g * g
}

// makeInbox creates, zeroes and maps this rank's inbox for p.peer and
// sends its fd to the peer.
func (d *Comm) makeInbox(p *p2pPair) error {
	size := d.inboxSize()
	fd := -1
	err := d.WithCtx(func() error {
		prop := d.AllocProp(gpu.HandleTypePosix)
		h, err := d.Drv.CreateMem(size, &prop)
		if err != nil {
			return d.TooLarge("point-to-point inbox", int64(size), err)
		}
		p.in.handle = h
		d.LiveHandles.Add(1)
		if p.in.m, err = d.mapLocal(h, size); err != nil {
			return err
		}
		if err := d.Drv.MemsetD8.Call3(uintptr(p.in.m.Ptr), 0, uintptr(size)); err != nil {
			return err
		}
		if err := d.Drv.SyncCtx(); err != nil {
			return err
		}
		if p.peer == d.Opts.Rank {
			return nil
		}
		if fd, err = d.Drv.ExportPosixFD(h); err != nil {
			return err
		}
		d.OpenFDs.Add(1)
		return nil
	})
	if fd >= 0 {
		if err == nil {
			err = d.Fdx.Send(p.peer, p2pKey, fd)
		}
		fdpass.CloseFD(fd)
		d.OpenFDs.Add(-1)
	}
	return err
}

// mapPeerInbox imports the peer's inbox for this rank and maps it.
func (d *Comm) mapPeerInbox(p *p2pPair) error {
	fd, err := d.Fdx.Recv(p.peer, p2pKey, d.Opts.Timeout, fmt.Sprintf("the first transfer with rank %d", p.peer))
	if err != nil {
		return err
	}
	d.OpenFDs.Add(1)
	defer func() { fdpass.CloseFD(fd); d.OpenFDs.Add(-1) }()
	return d.WithCtx(func() error {
		h, err := d.Drv.ImportPosixFD(fd)
		if err != nil {
			return err
		}
		p.out.handle = h
		d.LiveHandles.Add(1)
		p.out.m, err = d.mapLocal(h, d.inboxSize())
		return err
	})
}

// mapLocal reserves a range, maps h there and opens it to this device.
// Runs under withCtx.
func (d *Comm) mapLocal(h, size uint64) (gpu.Mapping, error) {
	ptr, err := d.Drv.AddressReserve(size, d.Granularity)
	if err != nil {
		return gpu.Mapping{}, err
	}
	d.LiveReservations.Add(1)
	if err := d.Drv.MapMem(ptr, size, h); err != nil {
		d.Drv.AddressFree(ptr, size)
		d.LiveReservations.Add(-1)
		return gpu.Mapping{}, err
	}
	d.LiveMappings.Add(1)
	m := gpu.Mapping{Ptr: ptr, Size: size}
	if err := d.Drv.SetAccess(ptr, size, d.Dev); err != nil {
		d.unmap(m)
		return gpu.Mapping{}, err
	}
	return m, nil
}

func (d *Comm) unmap(m gpu.Mapping) error {
	if m.Ptr == 0 {
		return nil
	}
	err := errors.Join(d.Drv.UnmapMem(m.Ptr, m.Size), d.Drv.AddressFree(m.Ptr, m.Size))
	d.LiveMappings.Add(-1)
	d.LiveReservations.Add(-1)
	return err
}

func (d *Comm) unmapPair(p *p2pPair) error {
	var errs []error
	errs = append(errs, d.WithCtx(func() error {
		var errs []error
		for _, x := range []*p2pMapping{&p.out, &p.in} {
			if x.handle == 0 {
				continue // the self pair's out shares in's mapping
			}
			errs = append(errs, d.unmap(x.m), d.Drv.ReleaseMem(x.handle))
			d.LiveHandles.Add(-1)
			*x = p2pMapping{}
		}
		return errors.Join(errs...)
	}))
	return errors.Join(errs...)
}

// releaseP2P unmaps every pair (the device's work has finished: callers
// synchronise first).
func (d *Comm) releaseP2P() error {
	c := &d.State
	c.p2pMu.Lock()
	defer c.p2pMu.Unlock()
	var errs []error
	if len(c.p2p) > 0 {
		errs = append(errs, d.WithCtx(d.Drv.SyncCtx))
	}
	for peer, p := range c.p2p {
		errs = append(errs, d.unmapPair(p))
		delete(c.p2p, peer)
	}
	if c.p2pCounts != nil {
		errs = append(errs, d.Release(c.p2pCounts))
		c.p2pCounts = nil
	}
	return errors.Join(errs...)
}

// p2pTransfer enqueues a send of t to peer, or a recv of t from it, on s.
func (d *Comm) P2pTransfer(t runtime.Tensor, peer int, rs runtime.Stream, sending bool) error {
	verb := "recv from"
	if sending {
		verb = "send to"
	}
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	if peer < 0 || peer >= d.Opts.WorldSize {
		return fmt.Errorf("cuda: rank %d: %s rank %d: out of range [0, %d)", d.Opts.Rank, verb, peer, d.Opts.WorldSize)
	}
	ptr, err := d.Span(t, verb)
	if err != nil {
		return err
	}
	if err := d.ensureStatus(); err != nil {
		return err
	}
	if err := d.FaultErr(); err != nil {
		return err
	}
	p, err := d.pair(peer, sending)
	if err != nil {
		return err
	}
	bytes := t.Bytes()
	if !t.IsContiguous() {
		// Move a packed copy: pack before a send, unpack after a recv.
		return d.Staged(int(max(bytes, 16)), s, func(tmp uint64) error {
			packed := runtime.Tensor{Buf: d.tempBuffer(tmp, bytes), DType: t.DType, Shape: t.Shape}
			if sending {
				if err := d.Copy(packed, t, s); err != nil {
					return err
				}
				return d.launchP2P(p, tmp, bytes, s, true)
			}
			if err := d.launchP2P(p, tmp, bytes, s, false); err != nil {
				return err
			}
			return d.Copy(t, packed, s)
		})
	}
	return d.launchP2P(p, ptr, bytes, s, sending)
}

func (d *Comm) launchP2P(p *p2pPair, ptr uint64, bytes int64, s *gpu.Stream, sending bool) error {
	c := &d.State
	chunks := max(1, (bytes+p2pChunk-1)/p2pChunk)
	// The kernel takes the pair's transfer count from the device (the
	// host's mirrors it), so a send replayed from a graph counts anew.
	counts := c.p2pCounts.Ptr + uint64(p.peer*epochWords*8)
	if !sending {
		counts += epochWords / 2 * 8
	}
	a := CollArgs{Status: c.status.Ptr, TimeoutNS: uint64(d.Opts.Timeout.Nanoseconds()), N: chunks, TailEnd: bytes,
		Epochs: counts, NSig: uint64(chunks),
		Rank: int32(d.Opts.Rank), World: int32(d.Opts.WorldSize), Peer: int32(p.peer)}
	name := "hir_p2p_recv"
	c.p2pMu.Lock()
	if sending {
		name = "hir_p2p_send"
		a.Src[0], a.Dst[0], a.Base = ptr, p.out.m.Ptr, p.sendG
		p.sendG += uint64(chunks)
	} else {
		a.Src[0], a.Dst[0], a.Base = p.in.m.Ptr, ptr, p.recv
		p.recv += uint64(chunks)
	}
	c.p2pMu.Unlock()
	f, err := d.commFunction(&c.mods, name)
	if err != nil {
		return err
	}
	return d.LaunchFunction(f, gpu.Dim3{X: p2pBlocks}, gpu.Dim3{X: collThreads}, 0, s, a.Bytes())
}

var _ = ir.Global
