package nccl

import (
	"encoding/binary"
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Comm is one rank's communicator (ncclComm_t). Its methods enqueue work
// on the CUstream they are given and return once it is enqueued; the CUDA
// context that was current at InitRank must be current when they run.
type Comm struct {
	lib         *Lib
	h           uintptr
	rank, world int
	mu          sync.Mutex
	closed      bool
}

// InitRank joins the communicator named by id as rank of nranks. It blocks
// until every rank has joined (NCCL's own bootstrap, over the network
// address rank 0 put in the id).
func (l *Lib) InitRank(id UniqueID, nranks, rank int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: rank %d out of range for %d ranks", rank, nranks)
	}
	c := &Comm{lib: l, rank: rank, world: nranks}
	var err error
	if l.fn["ncclCommInitRankScalable"] != 0 {
		// Takes the id by pointer, so no struct travels by value.
		err = l.call("ncclCommInitRankScalable", uintptr(unsafe.Pointer(&c.h)), uintptr(nranks), uintptr(rank),
			1, uintptr(unsafe.Pointer(&id[0])), 0)
	} else {
		err = l.initRankByValue(&c.h, id, nranks, rank)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// initRankByValue calls ncclCommInitRank, whose 128-byte ncclUniqueId is
// passed by value: on x86-64 System V a struct that large goes on the
// stack (class MEMORY) and the int after it still takes the next integer
// register, so the arguments are comm, nranks, rank in the first three
// registers, three unused registers, then the id's sixteen words.
func (l *Lib) initRankByValue(h *uintptr, id UniqueID, nranks, rank int) error {
	if goruntime.GOARCH != "amd64" {
		return &Error{Call: "ncclCommInitRank", Code: InvalidUsage, Detail: "by-value ncclUniqueId is only bound on amd64"}
	}
	args := []uintptr{uintptr(unsafe.Pointer(h)), uintptr(nranks), uintptr(rank), 0, 0, 0}
	for i := 0; i < UniqueIDBytes; i += 8 {
		args = append(args, uintptr(binary.LittleEndian.Uint64(id[i:])))
	}
	return l.call("ncclCommInitRank", args...)
}

// Rank and World are the communicator's place and size.
func (c *Comm) Rank() int  { return c.rank }
func (c *Comm) World() int { return c.world }

func (c *Comm) handle() (uintptr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("nccl: rank %d: communicator already destroyed", c.rank)
	}
	return c.h, nil
}

// run calls a collective entry point and, on failure, asks the
// communicator for its last error too.
//
//go:uintptrescapes
func (c *Comm) run(name string, args ...uintptr) error {
	p := c.lib.fn[name]
	r1, _, _ := purego.SyscallN(p, args...)
	if res := Result(int32(r1)); res != Success {
		return c.lib.errorFor(name, res, c.h)
	}
	return nil
}

// AllReduce reduces count elements of send over the ranks into recv.
func (c *Comm) AllReduce(send, recv uintptr, count uint64, dt DataType, op RedOp, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclAllReduce", send, recv, uintptr(count), uintptr(dt), uintptr(op), h, stream)
}

// AllGather gathers sendCount elements from every rank into recv, rank r's
// at r×sendCount.
func (c *Comm) AllGather(send, recv uintptr, sendCount uint64, dt DataType, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclAllGather", send, recv, uintptr(sendCount), uintptr(dt), h, stream)
}

// ReduceScatter reduces send (world×recvCount elements) over the ranks and
// leaves block r in rank r's recv.
func (c *Comm) ReduceScatter(send, recv uintptr, recvCount uint64, dt DataType, op RedOp, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclReduceScatter", send, recv, uintptr(recvCount), uintptr(dt), uintptr(op), h, stream)
}

// Broadcast copies root's send into every rank's recv.
func (c *Comm) Broadcast(send, recv uintptr, count uint64, dt DataType, root int, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclBroadcast", send, recv, uintptr(count), uintptr(dt), uintptr(root), h, stream)
}

// Reduce reduces send over the ranks into root's recv.
func (c *Comm) Reduce(send, recv uintptr, count uint64, dt DataType, op RedOp, root int, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclReduce", send, recv, uintptr(count), uintptr(dt), uintptr(op), uintptr(root), h, stream)
}

// Send sends count elements to peer (matched with peer's Recv in order).
func (c *Comm) Send(buf uintptr, count uint64, dt DataType, peer int, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclSend", buf, uintptr(count), uintptr(dt), uintptr(peer), h, stream)
}

// Recv receives count elements from peer.
func (c *Comm) Recv(buf uintptr, count uint64, dt DataType, peer int, stream uintptr) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	return c.run("ncclRecv", buf, uintptr(count), uintptr(dt), uintptr(peer), h, stream)
}

// Group runs f between ncclGroupStart and ncclGroupEnd, so the sends and
// receives f posts progress together (all-to-all, gather, scatter). The
// group is ended even when f fails.
func (c *Comm) Group(f func() error) error {
	if err := c.lib.call("ncclGroupStart"); err != nil {
		return err
	}
	ferr := f()
	if err := c.lib.call("ncclGroupEnd"); err != nil && ferr == nil {
		ferr = err
	}
	return ferr
}

// AsyncError is ncclCommGetAsyncError: an error a running operation met
// (a peer that failed, a network error), or nil.
func (c *Comm) AsyncError() error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	var res int32
	if err := c.lib.call("ncclCommGetAsyncError", h, uintptr(unsafe.Pointer(&res))); err != nil {
		return err
	}
	if Result(res) != Success && Result(res) != InProgress {
		return c.lib.errorFor("ncclCommGetAsyncError", Result(res), h)
	}
	return nil
}

// Destroy frees the communicator once its work has run (ncclCommDestroy).
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.lib.call("ncclCommDestroy", c.h)
}

// Abort frees the communicator at once, abandoning work in flight
// (ncclCommAbort): for a rank whose peers are gone.
func (c *Comm) Abort() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.lib.call("ncclCommAbort", c.h)
}
