package coll

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

// The collective kernels: CUDA C compiled with NVRTC on first use, one
// module for data movement (copies, the all_gather ring, barriers,
// point-to-point) and one per reduced dtype (one instantiation per reduce
// op). Every kernel takes one collArgs by value; its layout is checked on
// both sides (static_assert in the source, collArgsLayout in Go). The CUDA C
// is kernels/collective.cu, kernels/reduce.cu and kernels/reduce_entries.cu.tmpl
// (package kernels embeds them).
//
// Memory model. Cross-rank ordering goes through signal pads in symmetric
// memory: a block finishes its loads and stores, meets at __syncthreads,
// and one thread per peer does fence.acq_rel.sys then a relaxed system-
// scope store of a counter value into the peer's pad; the peer spins with
// relaxed system-scope loads on its own pad until the value is reached,
// fences (acq_rel, sys) and releases its block with __syncthreads. Values
// only grow (the host hands every launch a fresh range, base+1..), so a
// flag left by an earlier collective can never satisfy a later wait. Every
// spin is bounded: past the timeout the waiting thread writes what it
// waited for into host-mapped status memory and the block gives up.

// Pad geometry (mirrored in kernels/collective.cu).
const (
	maxRanks    = 16  // symmetric-memory collectives handle up to 16 ranks
	MaxBlocks   = 256 // blocks per collective launch (signal slots per plane)
	numPlanes   = 3   // barrier, data, ack
	MaxChannels = 16  // streams that may run collectives concurrently
	// epochWords: per channel, each block's signal count, then each
	// block's count of LL launches (all blocks' equal: kernels/collective.cu's
	// take_count); kept on the device so a graph replay advances them.
	epochWords = 2 * MaxBlocks
	planeBytes = MaxBlocks * maxRanks * 8
	ChannelPad = numPlanes * planeBytes
	// Status words: [0] any fault; then one word per (channel, block, peer)
	// for the collective channels and two p2p channels (send, recv).
	statusChannels = MaxChannels + 2
	StatusWords    = 1 + statusChannels*MaxBlocks*maxRanks
	chanP2PSend    = MaxChannels
	chanP2PRecv    = MaxChannels + 1
)

// Kernel mode bits (collArgs.Mode).
const (
	modeTmp       = 1  // reduce: write to Work, end barrier, then copy Work to the outputs
	modeAllGather = 8  // ring: run the all-gather half after the reduce-scatter half
	modeWave      = 16 // ring: run the steps in waves (ringWaveSlots)
	modeDirect    = 32 // bulk2: hop two stores into the peers' (symmetric) outputs
)

// LL kernel flags (collArgs.Xtra): which sides allow whole 8-byte
// accesses, and llSpread: the sends are shared out over (peer, line)
// pairs (reduce_scatter's ll kernel).
const (
	llFastSrc = 1
	llFastDst = 2
	llSpread  = 4
)

// Bulk kernel flags (collArgs.Xtra): the unit width (bytes) of the
// sources in the low byte, of the destinations in the next, and bulkVec.
const bulkVec = 0x10000 // every reduce target allows 16-byte vectors

// Point-to-point inbox geometry: one inbox per ordered pair, in the
// receiver's memory.
const (
	p2pBlocks    = 16
	p2pSlot      = 256 << 10
	p2pChunk     = p2pBlocks * p2pSlot // bytes moved per handshake
	p2pHeader    = 4096
	p2pInboxSize = p2pHeader + 2*p2pChunk
)

// Ring staging: per channel and rank, ringGeom.slots slots per block of
// ringGeom.seg bytes each, plus ringSlotPad: a segment starting at
// element lo lies in its slot from byte (lo mod 16/es)·es on, so the
// slot, the source and the destination share their 16-byte phase and the
// segment moves as 16-byte vectors wherever the tensors are aligned.
const ringSlotPad = 128

// LL staging (hir_ll_*): per channel and rank, 2 slots × world senders ×
// llSeg bytes; each 16-byte line carries 8 bytes of data and two flags.
// Larger pieces, up to ir.LLMaxBytes, go in bulk (plain data, a flag per
// block and peer) through the bulk staging: 2 slots × world senders ×
// bulkSeg bytes.
//
// LL128 lines (pieces past Tuning.LL128Min) have a staging of their own
// with the same geometry; each 128-byte line carries 120 bytes of data
// and a flag.
const (
	LlCapBytes   = 1 << 20                 // the most data LL lines carry to one peer
	ll128Cap     = llSeg / 128 * ll128Data // the most data LL128 lines carry to one peer
	ll128Data    = 120                     // data bytes per 128-byte LL128 line
	llSeg        = 2 * LlCapBytes          // staging bytes per (slot, sender)
	bulkSeg      = ir.LLMaxBytes           // bulk staging bytes per (slot, sender)
	oneShotLLMax = 256 << 10               // Tuning.LLMax's default
	llThreads    = 256
)

// lay is a block of a tensor in units (elements or 16-byte vectors): unit
// i lies at (i/Run)*Pitch + i%Run; Run == 0 means contiguous.
type lay struct{ Run, Pitch int64 }

// collArgs is the kernel argument, byte for byte the CollArgs of the
// source. Addresses are device addresses in this process.
type CollArgs struct {
	Src       [maxRanks]uint64
	Dst       [maxRanks]uint64
	Pad       [maxRanks]uint64 // each rank's signal pad for this channel
	Stage     [maxRanks]uint64 // ring: each rank's staging for this channel
	Status    uint64           // host-mapped status words
	Work      uint64           // local scratch (modeTmp)
	Base      uint64           // signal values base+1.. are this launch's (where Epochs is 0)
	Epochs    uint64           // the channel's device-side counters (epochWords): the kernel takes its base there
	NSig      uint64           // signal values the launch takes (the counters advance by it)
	TimeoutNS uint64
	N         int64 // units per task (per block for the all_gather ring); ring: bytes per staging slot
	TailStart int64 // copy kernels: bytes; reduce kernel: elements
	TailEnd   int64
	Seg       int64               // ring: elements per segment; all_gather ring: bytes between output blocks
	NSeg      int64               // ring: segments per block part
	Chunk     [maxRanks + 1]int64 // ring chunk bounds, in elements
	Ls, Ld    lay
	Rank      int32
	World     int32
	Channel   int32
	NTask     int32
	Mode      int32
	NOut      int32 // targets; ring: staging slots per block
	Peer      int32
	Xtra      int32 // ring: 1 where src and dst allow 16-byte vectors
}

const CollArgsSize = 800

func (a *CollArgs) Bytes() []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(a)), unsafe.Sizeof(*a))...)
}

// ReduceModuleSource is the source of dt's reducing module
// (kernels.ReduceSource over commonSource).
func ReduceModuleSource(dt ir.DType) (string, error) { return kernels.ReduceSource(commonSource(), dt) }

// moveModuleSource is the data-movement module's source.
func MoveModuleSource() string { return commonSource() }

// commonSource is kernels.Collective with static_asserts that pin CollArgs
// to collArgs's layout as Go lays it out, field by field.
func commonSource() string {
	var a CollArgs
	var b strings.Builder
	fmt.Fprintf(&b, "static_assert(sizeof(CollArgs) == %d, \"CollArgs size\");\n", unsafe.Sizeof(a))
	fmt.Fprintf(&b, "static_assert(MAXB == %d && MAXR == %d, \"pad geometry\");\n", MaxBlocks, maxRanks)
	fmt.Fprintf(&b, "static_assert(LL128_UNITS * 8 == %d, \"LL128 line data\");\n", ll128Data)
	// Only the size is asserted in the source: NVRTC has no offsetof (nor
	// __builtin_offsetof), so the field offsets are checked against the Go
	// struct by the tests that compile the source with clang.
	return strings.Replace(kernels.Collective, "/* LAYOUT_ASSERTS */", b.String(), 1)
}

// commModule is one NVRTC module of collective kernels: its key (the
// cache's name for it, and its file name in messages) and its source.
type commModule struct {
	Key string
	src func() (string, error)
}

// commModuleList is every collective module, the data-movement one first
// (a kernel several modules define, as every reducing module carries
// collective.cu's, belongs to the first), then one per reduced dtype.
func commModuleList() []commModule {
	mods := []commModule{{"hir_comm_move", func() (string, error) { return MoveModuleSource(), nil }}}
	for _, dt := range ir.AllDTypes {
		if _, ok := kernels.ReduceDTypes[dt]; ok {
			mods = append(mods, commModule{"hir_comm_reduce_" + dt.String(), func() (string, error) { return ReduceModuleSource(dt) }})
		}
	}
	return mods
}

// WarmCollectives compiles, in the background and all at once, the
// modules a job's collectives use (the data-movement one, and the
// reducing one of each dtype reduced) into the kernel cache, each once
// per device: on a freshly lent machine one NVRTC compile took 5-40 s,
// and a job's first collective of each dtype waited for its module in
// turn (RUNTIME-CUDA.md). A launch that needs a module still being
// compiled waits for that compile (gpu.CachedImage); errors are left to
// it. Nothing here touches the device.
func (d *Comm) WarmCollectives(reduced []ir.DType) {
	if d.Opts.WorldSize < 2 {
		return // one rank runs no collective kernels
	}
	want := map[string]bool{"hir_comm_move": true}
	for _, dt := range reduced {
		want["hir_comm_reduce_"+dt.String()] = true
	}
	c := &d.State
	c.warmMu.Lock() // not c.Mu: a collective's set-up holds that while it waits for the peers
	defer c.warmMu.Unlock()
	if c.warmed == nil {
		c.warmed = map[string]bool{}
	}
	for _, m := range commModuleList() {
		if !want[m.Key] || c.warmed[m.Key] {
			continue
		}
		c.warmed[m.Key] = true
		go func() {
			if src, err := m.src(); err == nil {
				d.CompileCached(src, m.Key+".cu", NVRTCOptions)
			}
		}()
	}
}

// commKernels maps every collective kernel to its module, read once per
// process from the modules' sources: a kernel is launched by name, and
// adding one to kernels/*.cu needs no list here.
var CommKernels = sync.OnceValues(func() (map[string]commModule, error) {
	index := map[string]commModule{}
	for _, m := range commModuleList() {
		src, err := m.src()
		if err != nil {
			return nil, err
		}
		for _, name := range kernels.Entries(src) {
			if _, ok := index[name]; !ok {
				index[name] = m
			}
		}
	}
	return index, nil
})

// commModules compiles (once per device) and caches the modules.
type commModules struct {
	mu   sync.Mutex
	mods map[string]*gpu.Module
	errs map[string]error
	fns  map[string]*gpu.Function
}

// commFunction returns collective kernel name, compiling its module (the
// one whose source defines it: commKernels) on first use.
func (d *Comm) commFunction(cm *commModules, name string) (*gpu.Function, error) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if f, ok := cm.fns[name]; ok {
		return f, nil
	}
	index, err := CommKernels()
	if err != nil {
		return nil, err
	}
	mod, ok := index[name]
	if !ok {
		return nil, fmt.Errorf("no collective kernel %s in runtime/cuda/kernels", name)
	}
	key := mod.Key
	m, ok := cm.mods[key]
	if !ok {
		if err, failed := cm.errs[key]; failed {
			return nil, err
		}
		text, err := mod.src()
		if err == nil {
			m, err = d.LoadCached(text, key+".cu", NVRTCOptions)
		}
		if err != nil {
			cm.errs[key] = err
			return nil, err
		}
		cm.mods[key] = m
	}
	f, err := m.Function(name)
	if err != nil {
		return nil, err
	}
	cm.fns[name] = f
	return f, nil
}

// NVRTCOptions are the options every collective module compiles with:
// IEEE division and no contraction, so results match the CPU runtime.
var NVRTCOptions = []string{"--fmad=false", "--prec-div=true", "--prec-sqrt=true"}
