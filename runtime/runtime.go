// Package runtime is the interface between the evaluator and a backend: the
// embedded CPU runtime (runtime/sim) or GPUs (runtime/cuda). A backend hosts
// one or more ranks of a job; each rank is a Device with memory, streams,
// events, kernels and communication. The evaluator never names a backend: it
// opens one by name through Open.
package runtime

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hirlab/hir/ir"
)

// Config says what job to open a backend for.
type Config struct {
	// WorldSize is the number of ranks in the job (the mesh size).
	WorldSize int
	// Devices maps rank to device id (the program's mesh); nil means 0..n-1.
	Devices []int
	// Rank is this process's rank for backends that host one rank per
	// process; -1 means "take it from the environment" (RANK).
	Rank int
	// Timeout bounds every wait for peers (collectives, rendezvous). Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// Stalled, when set, hears once of every wait for peers that lasts
	// StallAfter (zero: DefaultStallAfter) and is still short of Timeout:
	// which rank waits, where, and for which ranks (Stall). The wait then
	// goes on until the peers come or Timeout ends it, as without the hook.
	// It is called on the waiting goroutine: it must return quickly (print,
	// log). The CPU runtime reports every wait; the CUDA runtime its host's
	// barriers (stall.go, docs/RUNTIME.md).
	Stalled    func(Stall)
	StallAfter time.Duration
}

// DefaultTimeout is how long a rank waits for its peers before it fails
// with an error naming the ranks that did not arrive.
const DefaultTimeout = 60 * time.Second

// EffectiveTimeout returns c.Timeout or the default.
func (c Config) EffectiveTimeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Runtime is an opened backend.
type Runtime interface {
	// Name is the backend's name ("sim", "cuda").
	Name() string
	// WorldSize is the number of ranks in the job.
	WorldSize() int
	// Ranks lists the ranks this process hosts: all of them on the CPU
	// runtime, one on the CUDA runtime.
	Ranks() []int
	// Device returns the device of a rank hosted here.
	Device(rank int) (Device, error)
	// Close frees everything the runtime still holds.
	Close() error
}

// HostReader is implemented by devices that read tensors back to the
// host faster than CopyToHost and a synchronisation (the cuda runtime:
// through pinned memory instead of pageable). ReadToHost copies each
// srcs[i] into dsts[i] (len(dsts[i]) == srcs[i].Bytes()) after the work
// enqueued on s, and returns once all of them are there.
type HostReader interface {
	ReadToHost(dsts [][]byte, srcs []Tensor, s Stream) error
}

// Device is one rank's view of the machine.
type Device interface {
	Rank() int
	WorldSize() int

	// Alloc returns a zero-filled buffer of at least bytes. Symmetric
	// allocation is collective: every rank calls it in the same order with
	// the same size.
	Alloc(bytes int64, mem ir.MemoryType) (Buffer, error)
	// Free releases a buffer (collective for symmetric buffers).
	Free(b Buffer) error
	// PeerBuffer returns peer's shard of the symmetric buffer b, mapped so
	// this rank can load from and store to it.
	PeerBuffer(b Buffer, peer int) (Buffer, error)
	// ContiguousView maps every rank's shard of symmetric buffer b back to
	// back, rank r at offset r×b.Size(): the sharded tensor as the whole one,
	// with no copy. The view stays valid until b is freed.
	ContiguousView(b Buffer) (Buffer, error)

	// CopyFromHost, CopyToHost and Copy are ordered on stream s. The host
	// slice must stay untouched until the stream has passed the copy.
	CopyFromHost(dst Tensor, src []byte, s Stream) error
	CopyToHost(dst []byte, src Tensor, s Stream) error
	// Copy copies src into dst elementwise (same dtype and element count;
	// either may be strided or another rank's buffer).
	Copy(dst, src Tensor, s Stream) error
	// Zero sets every element of t to all-zero bits, ordered on s, with no
	// host memory involved (so a graph can hold it).
	Zero(t Tensor, s Stream) error

	// DefaultStream is the stream ops run on unless the program says else.
	DefaultStream() Stream
	NewStream() (Stream, error)
	NewEvent() (Event, error)

	// Compile prepares a kernel for a compute op (pointwise, reduction,
	// matmul, fusion); the evaluator caches the result by KernelSpec.Key.
	Compile(spec *KernelSpec) (Kernel, error)
	// Launch runs a kernel on stream s: args are its inputs then outputs.
	Launch(k Kernel, args []Tensor, s Stream) error

	// Collective runs a collective on stream s. Every rank must call the
	// same collectives in the same order.
	Collective(c *CollectiveCall, s Stream) error
	// Send and Recv move a tensor to and from peer, ordered on s; a send is
	// matched with the peer's recv from this rank in order.
	Send(t Tensor, peer int, s Stream) error
	Recv(t Tensor, peer int, s Stream) error
	// Barrier returns once every rank has reached it (ordered on s).
	Barrier(s Stream) error
}

// Poisoner is a runtime that marks memory the program has not written:
// Poison fills t with all-one bits (NaN in every float dtype, -1 in the
// integers, true in bool), ordered on s. The evaluator poisons an
// `alloc uninit=true` where the runtime has it (the CPU runtime), so a
// program that reads such a tensor before writing it shows NaNs in tests
// instead of the zeros a fresh buffer happens to hold; the CUDA runtime
// leaves the memory as it is.
type Poisoner interface {
	Poison(t Tensor, s Stream) error
}

// StreamBarrierer is a device whose ranks can meet on a stream without the
// host waiting: no rank's s goes past the barrier before every rank's s has
// reached it, and the host goes on at once. The cuda runtime launches a
// barrier kernel on s's collective channel; the CPU runtime's Barrier is
// already one. A rank that never arrives fails the stream's work with a
// timeout, as a collective does.
type StreamBarrierer interface {
	StreamBarrier(s Stream) error
}

// CollectiveWarmer is a device that can prepare in the background what a
// job's collectives will need (the cuda runtime compiles their kernel
// modules), so its first collective does not wait for it. The evaluator
// calls it when a job opens whose program has collectives the runtime
// runs itself (not NCCL), with the dtypes its reducing ones reduce.
type CollectiveWarmer interface {
	WarmCollectives(reduced []ir.DType)
}

// OneSided is what one-sided transfers (package runtime/transfer) need from
// a device beyond Device. Both backends implement it; on a device that does
// not, the transfer agent reports itself unavailable.
type OneSided interface {
	// SymmetricAllocation names the symmetric allocation b is this rank's
	// own shard of: the same number on every rank, since symmetric
	// allocations are collective and matched in order. Any other buffer
	// (global or host memory, a view, a peer's shard, a freed buffer) is
	// an error saying what it is.
	SymmetricAllocation(b Buffer) (uint64, error)
	// Exchange is a host-side all-gather of small byte strings; it blocks
	// the caller, not a stream. The k-th Exchange of every rank meets the
	// others' k-th and returns every rank's value, by rank. On GPUs it goes
	// through the job's store (on the CPU runtime, its rendezvous), and a
	// rank's key is deleted only after every rank has read every key. No
	// rank returns before all have arrived, so it doubles as a barrier.
	Exchange(value []byte) ([][]byte, error)
	// PreparePeerCopy checks and resolves, once, a copy between local (a
	// tensor of this rank, in any memory) and remote: a contiguous window
	// of peer's shard of a symmetric allocation, given on this rank's own
	// shard of that allocation (remote.Buf) at the peer's offset. write
	// copies local into the peer's memory, otherwise the peer's into local.
	// The dtypes and element counts must match.
	PreparePeerCopy(local, remote Tensor, peer int, write bool) (PeerCopy, error)
	// NewHostWaitEvent makes an event whose Synchronize puts the calling
	// thread to sleep until the event completes, instead of spinning.
	NewHostWaitEvent() (Event, error)
}

// PeerCopy is a one-sided copy resolved by OneSided.PreparePeerCopy; it may
// be posted any number of times.
type PeerCopy interface {
	// Post enqueues the copy on s and returns at once.
	Post(s Stream) error
	// Err is a failure of the copy last posted that the runtime detected
	// when the copy ran (the CPU runtime checks that the peer still holds
	// its memory), nil otherwise. Other failures surface through the
	// stream, as CUDA's sticky errors do.
	Err() error
}

// Buffer is a device allocation or a view of one.
type Buffer interface {
	// ID identifies the allocation across the program run (cache keys).
	ID() uint64
	Size() int64
	Mem() ir.MemoryType
}

// Tensor is a typed, possibly strided window into a buffer.
type Tensor struct {
	Buf     Buffer
	Offset  int64 // bytes from the buffer's start
	DType   ir.DType
	Shape   []int64
	Strides []int64 // in elements; nil means contiguous row-major
}

// NumElements is the number of elements of the tensor.
func (t Tensor) NumElements() int64 { return ir.Product(t.Shape) }

// Bytes is the size of the tensor's elements laid out contiguously.
func (t Tensor) Bytes() int64 { return t.NumElements() * int64(t.DType.Size()) }

// ContiguousStrides returns the row-major strides of shape, in elements.
func ContiguousStrides(shape []int64) []int64 { return ir.ContiguousStrides(shape) }

// EffectiveStrides returns t.Strides, or the contiguous strides when nil.
func (t Tensor) EffectiveStrides() []int64 {
	if t.Strides != nil {
		return t.Strides
	}
	return ContiguousStrides(t.Shape)
}

// IsContiguous reports whether the tensor is laid out row-major with no gaps.
func (t Tensor) IsContiguous() bool {
	if t.Strides == nil {
		return true
	}
	want := ContiguousStrides(t.Shape)
	for i := range want {
		if t.Shape[i] != 1 && t.Strides[i] != want[i] {
			return false
		}
	}
	return true
}

// Stream orders work on one device.
type Stream interface {
	// Synchronize blocks until everything enqueued so far has run and
	// returns the first error any of it met.
	Synchronize() error
	// Record makes e complete once the stream passes this point.
	Record(e Event) error
	// WaitEvent makes later work on the stream wait for e, without blocking
	// the caller.
	WaitEvent(e Event) error
	// Close releases the stream after the work enqueued on it has run.
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Synchronize blocks until the event's point has been passed.
	Synchronize() error
	// Query reports whether it has, without blocking.
	Query() bool
	Close() error
}

// EventTimer is a Device that can tell the time between two events it made
// (on the GPU's clock for cuda): the trace's GPU times. Both events must
// have completed.
type EventTimer interface {
	Elapsed(start, end Event) (time.Duration, error)
}

// KernelSpec describes the compute a kernel does: one op of the program
// (a pointwise op, a reduction, matmul or a whole fusion) over local shapes.
type KernelSpec struct {
	Op      *ir.Op
	Inputs  []TensorShape // in operand order; literals are folded into Op
	Outputs []TensorShape
}

// TensorShape is a dtype and a local shape.
type TensorShape struct {
	DType ir.DType
	Shape []int64
}

// Key identifies the spec for the kernel cache: the op's text and shapes.
func (s *KernelSpec) Key() string {
	return fmt.Sprintf("%s|%v|%v", s.Op, s.Inputs, s.Outputs)
}

// Kernel is a compiled kernel.
type Kernel interface {
	Name() string
}

// CollectiveCall is one collective as the evaluator hands it to a backend.
// In and Out hold local shapes; for collectives whose algorithm touches
// them remotely (ir.LookupRule) they are views of symmetric buffers.
type CollectiveCall struct {
	Op       ir.Opcode
	Algo     ir.Algo     // a concrete algorithm or ir.AlgoAuto (the zero value)
	ReduceOp ir.ReduceOp // for the reducing collectives; ir.ReduceUnset means sum
	Root     int
	// Axis is the axis along which shards are gathered or scattered:
	// the input's DIDx axis for all_gather and gather, the output's for
	// reduce_scatter and scatter, the output's for all_to_all.
	Axis int
	// ConcatAxis is all_to_all's input DIDx axis, where received blocks are
	// placed.
	ConcatAxis int
	In, Out    Tensor
}

// Factory opens a backend.
type Factory func(cfg Config) (Runtime, error)

var (
	mu        sync.Mutex
	factories = map[string]Factory{}
)

// Register makes a backend available to Open under name.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	factories[name] = f
}

// Backends lists the registered backends.
func Backends() []string {
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownBackend is returned by Open for a name nobody registered.
var ErrUnknownBackend = errors.New("unknown backend")

// Open opens the backend called name.
func Open(name string, cfg Config) (Runtime, error) {
	mu.Lock()
	f, ok := factories[name]
	mu.Unlock()
	if !ok {
		hint := ""
		if name == "sim" {
			// A Go program registers the CPU runtime by importing it.
			hint = `; import _ "github.com/hirlab/hir/runtime/sim" to register it`
		}
		return nil, fmt.Errorf("%w %q (available: %v)%s", ErrUnknownBackend, name, Backends(), hint)
	}
	return f(cfg)
}
