package cuda

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/ir"
)

// The collective kernels: CUDA C compiled with NVRTC on first use, one
// module for data movement (copies, the all_gather ring, barriers,
// point-to-point) and one per reduced dtype (one instantiation per reduce
// op). Every kernel takes one collArgs by value; its layout is checked on
// both sides (static_assert in the source, collArgsLayout in Go).
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

// Pad geometry (mirrored in the source below).
const (
	maxRanks    = 16  // symmetric-memory collectives handle up to 16 ranks
	maxBlocks   = 256 // blocks per collective launch (signal slots per plane)
	numPlanes   = 3   // barrier, data, ack
	maxChannels = 16  // streams that may run collectives concurrently
	planeBytes  = maxBlocks * maxRanks * 8
	channelPad  = numPlanes * planeBytes
	// Status words: [0] any fault; then one word per (channel, block, peer)
	// for the collective channels and two p2p channels (send, recv).
	statusChannels = maxChannels + 2
	statusWords    = 1 + statusChannels*maxBlocks*maxRanks
	chanP2PSend    = maxChannels
	chanP2PRecv    = maxChannels + 1
)

// Kernel mode bits (collArgs.Mode).
const (
	modeTmp       = 1  // reduce: write to Work, end barrier, then copy Work to the outputs
	modeAllGather = 8  // ring: run the all-gather half after the reduce-scatter half
	modeWave      = 16 // ring: run the steps in waves (ringWaveSlots)
)

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

// LL staging (hir_ar_ll): per channel and rank, 2 slots × world senders ×
// llSeg bytes; each 16-byte line carries 8 bytes of data and two flags.
const (
	llCapBytes = 256 << 10      // the most data one LL all_reduce moves
	llSeg      = 2 * llCapBytes // staging bytes per (slot, sender)
	llThreads  = 256
)

// lay is a block of a tensor in units (elements or 16-byte vectors): unit
// i lies at (i/Run)*Pitch + i%Run; Run == 0 means contiguous.
type lay struct{ Run, Pitch int64 }

// collArgs is the kernel argument, byte for byte the CollArgs of the
// source. Addresses are device addresses in this process.
type collArgs struct {
	Src       [maxRanks]uint64
	Dst       [maxRanks]uint64
	Pad       [maxRanks]uint64 // each rank's signal pad for this channel
	Stage     [maxRanks]uint64 // ring: each rank's staging for this channel
	Status    uint64           // host-mapped status words
	Work      uint64           // local scratch (modeTmp)
	Base      uint64           // signal values base+1.. are this launch's
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
	Xtra      int32 // LL: the staging slot; ring: 1 where src and dst allow 16-byte vectors
}

const collArgsSize = 784

func (a *collArgs) bytes() []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(a)), unsafe.Sizeof(*a))...)
}

// collectiveSource is the common part of every module.
const collectiveSource = `
typedef unsigned long long u64;
typedef long long i64;
#define MAXR 16
#define MAXB 256
#define PL_BAR 0
#define PL_DATA 1
#define PL_ACK 2
#define STATUS_SIZE_MISMATCH 3
#define MODE_TMP 1
#define MODE_ALLGATHER 8
#define P2P_BLOCKS 16
#define P2P_SLOT (256 * 1024)
#define P2P_HEADER 4096
#define CH_P2P_SEND 16
#define CH_P2P_RECV 17

struct Lay { i64 run, pitch; };

struct CollArgs {
  u64 src[MAXR];
  u64 dst[MAXR];
  u64 pad[MAXR];
  u64 stage[MAXR];
  u64 status;
  u64 work;
  u64 base;
  u64 timeout_ns;
  i64 n;
  i64 tail_start;
  i64 tail_end;
  i64 seg;
  i64 nseg;
  i64 chunk[MAXR + 1];
  Lay ls, ld;
  int rank, world, channel, ntask;
  int mode, nout, peer, xtra;
};
%LAYOUT_ASSERTS%

__device__ __forceinline__ i64 imin(i64 a, i64 b) { return a < b ? a : b; }

// Only the compiler's own builtins are relied on (threadIdx, __syncthreads):
// the 16-byte vector, bit casts, the block-wide AND and the fences are
// spelled out here, so the source needs no header.
struct alignas(16) vec16 { unsigned int x, y, z, w; };
// 128-bit global accesses, spelled out so they are never split.
__device__ __forceinline__ vec16 ld16(u64 p) {
  vec16 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st16(u64 p, const vec16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
template <typename U> __device__ __forceinline__ U ld_unit(u64 base, i64 i) { return ((const U*)base)[i]; }
template <> __device__ __forceinline__ vec16 ld_unit<vec16>(u64 base, i64 i) { return ld16(base + 16 * (u64)i); }
template <typename U> __device__ __forceinline__ void st_unit(u64 base, i64 i, const U& v) { ((U*)base)[i] = v; }
template <> __device__ __forceinline__ void st_unit<vec16>(u64 base, i64 i, const vec16& v) { st16(base + 16 * (u64)i, v); }
__device__ __forceinline__ unsigned f2u(float f) { unsigned u; asm("mov.b32 %0, %1;" : "=r"(u) : "f"(f)); return u; }
__device__ __forceinline__ float u2f(unsigned u) { float f; asm("mov.b32 %0, %1;" : "=f"(f) : "r"(u)); return f; }
__device__ __forceinline__ long long d2l(double d) { long long l; asm("mov.b64 %0, %1;" : "=l"(l) : "d"(d)); return l; }
__device__ __forceinline__ double l2d(long long l) { double d; asm("mov.b64 %0, %1;" : "=d"(d) : "l"(l)); return d; }
__device__ __forceinline__ void fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }
// block_and: __syncthreads that also tells every thread whether ok held
// in all of them (bar.red.and, as __syncthreads_and).
__device__ __forceinline__ bool block_and(bool ok) {
  unsigned r;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\tbar.red.and.pred q, 0, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
               : "=r"(r) : "r"((unsigned)ok) : "memory");
  return r != 0;
}

// ---- system-scope memory operations (PTX) ----
__device__ __forceinline__ u64 ld_relaxed_sys(const u64* p) {
  u64 v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys(u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ u64 gtimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A peer's release: everything this block did before (the caller's
// __syncthreads orders the other threads' accesses before this thread's
// fence) becomes visible to whoever sees v.
__device__ __forceinline__ void put_signal(u64* p, u64 v) {
  fence_sys();
  st_relaxed_sys(p, v);
}

// report records a wait that timed out: the value waited for, tagged with
// the plane, in this (channel, block, peer)'s status word; then word 0.
__device__ void report(const CollArgs& a, int channel, int plane, int peer, u64 want) {
  volatile u64* st = (volatile u64*)a.status;
  st[1 + ((u64)channel * MAXB + blockIdx.x) * MAXR + peer] = ((u64)(plane + 1) << 56) | (want & ((1ull << 56) - 1));
  fence_sc_sys();
  st[0] = 1;
  fence_sc_sys();
}

// wait_ge spins until *p >= want, or the timeout passes (then it reports
// and returns false). It also gives up early once another wait of this
// rank has already failed (status word 0), looked at now and then only,
// since that is host memory.
__device__ bool wait_ge(const CollArgs& a, const u64* p, u64 want, int channel, int plane, int peer) {
  if (ld_relaxed_sys(p) >= want) { fence_sys(); return true; }
  u64 t0 = gtimer(), tcheck = t0;
  for (unsigned spin = 1;; spin++) {
    if (ld_relaxed_sys(p) >= want) { fence_sys(); return true; }
    if ((spin & 127) == 0) {
      u64 now = gtimer();
      if (now - t0 > a.timeout_ns) { report(a, channel, plane, peer, want); return false; }
      if (now - tcheck > 200000) {
        tcheck = now;
        if (*(volatile u64*)a.status != 0) return false;
      }
    }
  }
}

__device__ __forceinline__ u64* slot(u64 pad, int plane, int blk, int peer) {
  return (u64*)(pad + (((u64)plane * MAXB + blk) * MAXR + peer) * 8);
}

// barrier: block b of every rank reaches it before block b of any rank
// passes. Thread t < world signals peer t and waits for it.
__device__ bool barrier(const CollArgs& a, u64 v) {
  __syncthreads();
  bool ok = true;
  int t = threadIdx.x;
  if (t < a.world && t != a.rank) {
    put_signal(slot(a.pad[t], PL_BAR, blockIdx.x, a.rank), v);
    ok = wait_ge(a, slot(a.pad[a.rank], PL_BAR, blockIdx.x, t), v, a.channel, PL_BAR, t);
  }
  return block_and(ok);
}

// signal_peer / wait_peer: one thread of the block, point to point.
__device__ bool wait_peer(const CollArgs& a, int plane, int from, u64 v) {
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0) ok = wait_ge(a, slot(a.pad[a.rank], plane, blockIdx.x, from), v, a.channel, plane, from);
  return block_and(ok);
}
__device__ void signal_peer(const CollArgs& a, int plane, int to, u64 v) {
  __syncthreads();
  if (threadIdx.x == 0) put_signal(slot(a.pad[to], plane, blockIdx.x, a.rank), v);
}

__device__ __forceinline__ i64 lay(const Lay& L, i64 i) {
  return L.run == 0 ? i : (i / L.run) * L.pitch + (i % L.run);
}

// copy_units copies units [lo, hi) of a block from src (layout ls) to dst
// (layout ld), thread by thread of the calling block, four at a time for
// memory-level parallelism.
template <typename U>
__device__ __forceinline__ void copy_units(u64 dst, const Lay& ld, u64 src, const Lay& ls, i64 lo, i64 hi, i64 tid, i64 nthr) {
  i64 i = lo + tid;
  for (; i + 3 * nthr < hi; i += 4 * nthr) {
    U v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = ld_unit<U>(src, lay(ls, i + u * nthr));
#pragma unroll
    for (int u = 0; u < 4; u++) st_unit<U>(dst, lay(ld, i + u * nthr), v[u]);
  }
  for (; i < hi; i += nthr) st_unit<U>(dst, lay(ld, i), ld_unit<U>(src, lay(ls, i)));
}

__device__ __forceinline__ void copy_bytes(u64 dst, u64 src, i64 lo, i64 hi, i64 tid, i64 nthr) {
  for (i64 i = lo + tid; i < hi; i += nthr) ((unsigned char*)dst)[i] = ((const unsigned char*)src)[i];
}

// copy_units2 is copy_units into two destinations of the same layout at
// once (each unit loaded once, stored twice).
template <typename U>
__device__ __forceinline__ void copy_units2(u64 dst0, u64 dst1, const Lay& ld, u64 src, i64 lo, i64 hi, i64 tid, i64 nthr) {
  i64 i = lo + tid;
  for (; i + 3 * nthr < hi; i += 4 * nthr) {
    U v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = ld_unit<U>(src, i + u * nthr);
#pragma unroll
    for (int u = 0; u < 4; u++) st_unit<U>(dst1, lay(ld, i + u * nthr), v[u]);
#pragma unroll
    for (int u = 0; u < 4; u++) st_unit<U>(dst0, lay(ld, i + u * nthr), v[u]);
  }
  for (; i < hi; i += nthr) {
    U v = ld_unit<U>(src, i);
    st_unit<U>(dst1, lay(ld, i), v);
    st_unit<U>(dst0, lay(ld, i), v);
  }
}

__device__ __forceinline__ void copy_bytes2(u64 dst0, u64 dst1, u64 src, i64 lo, i64 hi, i64 tid, i64 nthr) {
  for (i64 i = lo + tid; i < hi; i += nthr) {
    unsigned char v = ((const unsigned char*)src)[i];
    ((unsigned char*)dst1)[i] = v;
    ((unsigned char*)dst0)[i] = v;
  }
}

// ---- data movement ----

// hir_copy: start barrier, task t copies n units from src[t] (ls) to
// dst[t] (ld) plus bytes [tail_start, tail_end) of contiguous tasks, end
// barrier. Used by all_gather one_shot, all_to_all, broadcast, scatter
// and gather. Blocks start on different tasks so that peers' links are
// used at once.
template <typename U>
__device__ void copy_kernel(const CollArgs& a) {
  if (!barrier(a, a.base + 1)) return;
  i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < a.ntask; k++) {
    int t = (blockIdx.x + k) % a.ntask;
    copy_units<U>(a.dst[t], a.ld, a.src[t], a.ls, 0, a.n, tid, nthr);
    copy_bytes(a.dst[t], a.src[t], a.tail_start, a.tail_end, tid, nthr);
  }
  barrier(a, a.base + 2);
}

// hir_ag_ring: all_gather around the ring into the peers' outputs. Each
// block moves its slice [n*b/G, n*(b+1)/G) of every rank's block (plus
// the byte tail, in the last block): it writes its own block into its
// right neighbour's output and its own in one pass (each unit loaded
// once; the local stores ride along with the remote ones instead of
// taking a pass of their own before them), then forwards what its left
// neighbour wrote, signalling the right neighbour after each block.
template <typename U>
__device__ void ag_ring_kernel(const CollArgs& a) {
  if (!barrier(a, a.base + 1)) return;
  int D = a.world, r = a.rank, right = (r + 1) % D, left = (r + D - 1) % D;
  i64 G = gridDim.x, b = blockIdx.x;
  i64 lo = a.n * b / G, hi = a.n * (b + 1) / G;
  bool tail = b == G - 1;
  i64 stride = a.seg; // bytes between blocks of the output
  u64 mine = a.dst[r], next = a.dst[right];
  if (D == 1) {
    Lay contig = {0, 0};
    copy_units<U>(mine + r * stride, a.ld, a.src[0], contig, lo, hi, threadIdx.x, blockDim.x);
    if (tail) copy_bytes(mine + r * stride, a.src[0], a.tail_start, a.tail_end, threadIdx.x, blockDim.x);
    return;
  }
  copy_units2<U>(mine + r * stride, next + r * stride, a.ld, a.src[0], lo, hi, threadIdx.x, blockDim.x);
  if (tail) copy_bytes2(mine + r * stride, next + r * stride, a.src[0], a.tail_start, a.tail_end, threadIdx.x, blockDim.x);
  signal_peer(a, PL_DATA, right, a.base + 1);
  for (int s = 1; s < D - 1; s++) {
    if (!wait_peer(a, PL_DATA, left, a.base + s)) return;
    int c = (r - s + D) % D;
    copy_units<U>(next + c * stride, a.ld, mine + c * stride, a.ld, lo, hi, threadIdx.x, blockDim.x);
    if (tail) copy_bytes(next + c * stride, mine + c * stride, a.tail_start, a.tail_end, threadIdx.x, blockDim.x);
    signal_peer(a, PL_DATA, right, a.base + s + 1);
  }
  wait_peer(a, PL_DATA, left, a.base + D - 1);
}

extern "C" __global__ void hir_barrier(const __grid_constant__ CollArgs a) { barrier(a, a.base + 1); }

extern "C" __global__ void __launch_bounds__(512) hir_copy_v16(const __grid_constant__ CollArgs a) { copy_kernel<vec16>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s1(const __grid_constant__ CollArgs a) { copy_kernel<unsigned char>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s2(const __grid_constant__ CollArgs a) { copy_kernel<unsigned short>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s4(const __grid_constant__ CollArgs a) { copy_kernel<unsigned int>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s8(const __grid_constant__ CollArgs a) { copy_kernel<u64>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_v16(const __grid_constant__ CollArgs a) { ag_ring_kernel<vec16>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s1(const __grid_constant__ CollArgs a) { ag_ring_kernel<unsigned char>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s2(const __grid_constant__ CollArgs a) { ag_ring_kernel<unsigned short>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s4(const __grid_constant__ CollArgs a) { ag_ring_kernel<unsigned int>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s8(const __grid_constant__ CollArgs a) { ag_ring_kernel<u64>(a); }

// ---- point to point ----
// The inbox of a pair lives in the receiver's memory: data flags (one per
// block) at 0, ack flags at 256, message sizes [block][slot] at 512, and
// two staging slots per block from P2P_HEADER on. Transfer g of the pair
// (counted across messages by both sides) uses slot g % 2 of each block.

__device__ __forceinline__ u64* p2p_data(u64 inbox, int b) { return (u64*)(inbox + 8 * b); }
__device__ __forceinline__ u64* p2p_ack(u64 inbox, int b) { return (u64*)(inbox + 256 + 8 * b); }
__device__ __forceinline__ u64* p2p_size(u64 inbox, int b, int q) { return (u64*)(inbox + 512 + 16 * b + 8 * q); }
__device__ __forceinline__ u64 p2p_stage(u64 inbox, int b, int q) { return inbox + P2P_HEADER + ((u64)b * 2 + q) * P2P_SLOT; }

__device__ __forceinline__ void copy_span(u64 dst, u64 src, i64 n) {
  i64 nv = 0;
  if (((dst | src) & 15) == 0) {
    nv = n / 16;
    Lay c = {0, 0};
    copy_units<vec16>(dst, c, src, c, 0, nv, threadIdx.x, blockDim.x);
  }
  copy_bytes(dst, src, nv * 16, n, threadIdx.x, blockDim.x);
}

// hir_p2p_send: src[0] the tensor, dst[0] the receiver's inbox (mapped
// here), tail_end the message's bytes, n its transfers, base the pair's
// transfer count before it, peer the receiver.
extern "C" __global__ void __launch_bounds__(512) hir_p2p_send(const __grid_constant__ CollArgs a) {
  int b = blockIdx.x;
  u64 inbox = a.dst[0];
  for (i64 j = 0; j < a.n; j++) {
    u64 g = a.base + j;
    int q = (int)(g & 1);
    i64 lo = j * (i64)P2P_BLOCKS * P2P_SLOT + (i64)b * P2P_SLOT;
    i64 hi = imin(lo + (i64)P2P_SLOT, a.tail_end);
    bool ok = true;
    __syncthreads();
    if (threadIdx.x == 0 && g >= 2) ok = wait_ge(a, p2p_ack(inbox, b), g - 1, CH_P2P_SEND, PL_ACK, a.peer);
    if (!block_and(ok)) return;
    if (hi > lo) copy_span(p2p_stage(inbox, b, q), a.src[0] + lo, hi - lo);
    __syncthreads();
    if (threadIdx.x == 0) {
      st_relaxed_sys(p2p_size(inbox, b, q), (u64)a.tail_end);
      put_signal(p2p_data(inbox, b), g + 1);
    }
  }
}

// hir_p2p_recv: src[0] this rank's inbox for the sender, dst[0] the
// tensor; the rest as for send (peer is the sender).
extern "C" __global__ void __launch_bounds__(512) hir_p2p_recv(const __grid_constant__ CollArgs a) {
  int b = blockIdx.x;
  u64 inbox = a.src[0];
  for (i64 j = 0; j < a.n; j++) {
    u64 g = a.base + j;
    int q = (int)(g & 1);
    i64 lo = j * (i64)P2P_BLOCKS * P2P_SLOT + (i64)b * P2P_SLOT;
    i64 hi = imin(lo + (i64)P2P_SLOT, a.tail_end);
    bool ok = true;
    __syncthreads();
    if (threadIdx.x == 0) {
      ok = wait_ge(a, p2p_data(inbox, b), g + 1, CH_P2P_RECV, PL_DATA, a.peer);
      if (ok) {
        u64 sent = ld_relaxed_sys(p2p_size(inbox, b, q));
        if (sent != (u64)a.tail_end) {
          report(a, CH_P2P_RECV, STATUS_SIZE_MISMATCH, a.peer, sent);
          ok = false;
        }
      }
    }
    if (!block_and(ok)) return;
    if (hi > lo) copy_span(a.dst[0] + lo, p2p_stage(inbox, b, q), hi - lo);
    __syncthreads();
    if (threadIdx.x == 0) put_signal(p2p_ack(inbox, b), g + 1);
  }
}
`

// reduceSource is the per-dtype part: storage type T, compute type C, the
// reduce ops, and the reducing kernels (instantiated per op below).
const reduceSource = `
// ---- numerics: as the CPU runtime computes (docs/SEMANTICS.md) ----
// f16/bf16 compute in f32 and round to nearest even when stored (the
// same bit manipulations as host.F32ToBF16/F32ToF16, NaNs included);
// f32 in f32, f64 in f64; ints wrap. max/min propagate NaN (as the
// quiet NaN the CPU runtime produces) and order -0 below +0.
struct bf16_t { unsigned short x; };
struct f16_t { unsigned short x; };

__device__ __forceinline__ float load_c(bf16_t v) { return u2f(((unsigned)v.x) << 16); }
__device__ __forceinline__ float load_c(f16_t v) {
  unsigned h = v.x;
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
    return u2f(((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
  float f;
  unsigned short hs = v.x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(hs));
  return f;
}
__device__ __forceinline__ float load_c(float v) { return v; }
__device__ __forceinline__ double load_c(double v) { return v; }
__device__ __forceinline__ int load_c(int v) { return v; }
__device__ __forceinline__ long long load_c(long long v) { return v; }

template <typename T> struct Store;
template <> struct Store<bf16_t> {
  static __device__ __forceinline__ bf16_t st(float f) {
    unsigned b = f2u(f);
    bf16_t r;
    if (f != f) { r.x = (unsigned short)((b >> 16) | 0x40u); return r; }
    b += 0x7fffu + ((b >> 16) & 1u);
    r.x = (unsigned short)(b >> 16);
    return r;
  }
};
template <> struct Store<f16_t> {
  static __device__ __forceinline__ f16_t st(float f) {
    f16_t r;
    unsigned b = f2u(f);
    if (f != f) { r.x = (unsigned short)(((b >> 16) & 0x8000u) | 0x7e00u | ((b >> 13) & 0x3ffu)); return r; }
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    r.x = h;
    return r;
  }
};
template <> struct Store<float> { static __device__ __forceinline__ float st(float f) { return f; } };
template <> struct Store<double> { static __device__ __forceinline__ double st(double f) { return f; } };
template <> struct Store<int> { static __device__ __forceinline__ int st(int f) { return f; } };
template <> struct Store<long long> { static __device__ __forceinline__ long long st(long long f) { return f; } };

#define OP_SUM 0
#define OP_PROD 1
#define OP_MAX 2
#define OP_MIN 3
#define OP_AVG 4

__device__ __forceinline__ float qnan(float) { return u2f(0x7fc00000u); }
__device__ __forceinline__ double qnan(double) { return l2d(0x7ff8000000000001ll); }
__device__ __forceinline__ bool neg_bit(float x) { return (f2u(x) >> 31) != 0; }
__device__ __forceinline__ bool neg_bit(double x) { return d2l(x) < 0; }

template <typename C> __device__ __forceinline__ C fmax_h(C a, C b) {
  if (a != a || b != b) return qnan(a);
  if (a > b) return a;
  if (b > a) return b;
  return neg_bit(a) ? b : a;
}
template <typename C> __device__ __forceinline__ C fmin_h(C a, C b) {
  if (a != a || b != b) return qnan(a);
  if (a < b) return a;
  if (b < a) return b;
  return neg_bit(a) ? a : b;
}

template <int OP> struct Combine {
  static __device__ __forceinline__ float f(float a, float b) {
    if (OP == OP_SUM || OP == OP_AVG) return a + b;
    if (OP == OP_PROD) return a * b;
    if (OP == OP_MAX) return fmax_h(a, b);
    return fmin_h(a, b);
  }
  static __device__ __forceinline__ double f(double a, double b) {
    if (OP == OP_SUM || OP == OP_AVG) return a + b;
    if (OP == OP_PROD) return a * b;
    if (OP == OP_MAX) return fmax_h(a, b);
    return fmin_h(a, b);
  }
  static __device__ __forceinline__ int f(int a, int b) {
    if (OP == OP_SUM || OP == OP_AVG) return (int)((unsigned)a + (unsigned)b);
    if (OP == OP_PROD) return (int)((unsigned)a * (unsigned)b);
    if (OP == OP_MAX) return a > b ? a : b;
    return a < b ? a : b;
  }
  static __device__ __forceinline__ long long f(long long a, long long b) {
    if (OP == OP_SUM || OP == OP_AVG) return (long long)((u64)a + (u64)b);
    if (OP == OP_PROD) return (long long)((u64)a * (u64)b);
    if (OP == OP_MAX) return a > b ? a : b;
    return a < b ? a : b;
  }
};

template <int OP> __device__ __forceinline__ float finish(float x, int D) { return OP == OP_AVG ? x / (float)D : x; }
template <int OP> __device__ __forceinline__ double finish(double x, int D) { return OP == OP_AVG ? x / (double)D : x; }
template <int OP> __device__ __forceinline__ int finish(int x, int) { return x; }
template <int OP> __device__ __forceinline__ long long finish(long long x, int) { return x; }

// VecT is V elements of T: a 16-byte vector (loaded and stored as one
// vec16, so the compiler emits 128-bit accesses) or one element.
template <typename T, int V> struct VecT {
  union { vec16 u; T e[V]; };
  static __device__ __forceinline__ VecT load(u64 base, i64 i) { VecT v; v.u = ld16(base + 16 * (u64)i); return v; }
  __device__ __forceinline__ void store(u64 base, i64 i) const { st16(base + 16 * (u64)i, u); }
};
template <typename T> struct VecT<T, 1> {
  T e[1];
  static __device__ __forceinline__ VecT load(u64 base, i64 i) { VecT v; v.e[0] = ((const T*)base)[i]; return v; }
  __device__ __forceinline__ void store(u64 base, i64 i) const { ((T*)base)[i] = e[0]; }
};

// reduce_batch: units i0 + u*step (u < UN) of every rank's input (layout
// ls), reduced in rank order 0..D-1 and finished (avg); results stored to
// the NOut targets (layout ld), or to work (MODE_TMP). The UN loads of
// rank p+1 are issued before rank p's values are used, so 2*UN 16-byte
// loads per thread are in flight: remote loads over NVLink take
// microseconds, and only many loads in flight fill the link.
template <typename T, typename CT, int OP, int V, int UN>
__device__ __forceinline__ void reduce_batch(const CollArgs& a, i64 i0, i64 step) {
  typedef VecT<T, V> U;
  i64 si[UN];
#pragma unroll
  for (int u = 0; u < UN; u++) si[u] = lay(a.ls, i0 + u * step);
  U cur[UN];
  CT acc[UN][V];
#pragma unroll
  for (int u = 0; u < UN; u++) cur[u] = U::load(a.src[0], si[u]);
  for (int p = 1; p < a.world; p++) {
    U nxt[UN];
#pragma unroll
    for (int u = 0; u < UN; u++) nxt[u] = U::load(a.src[p], si[u]);
    if (p == 1) {
#pragma unroll
      for (int u = 0; u < UN; u++)
#pragma unroll
        for (int e = 0; e < V; e++) acc[u][e] = load_c(cur[u].e[e]);
    } else {
#pragma unroll
      for (int u = 0; u < UN; u++)
#pragma unroll
        for (int e = 0; e < V; e++) acc[u][e] = Combine<OP>::f(acc[u][e], (CT)load_c(cur[u].e[e]));
    }
#pragma unroll
    for (int u = 0; u < UN; u++) cur[u] = nxt[u];
  }
  if (a.world == 1) {
#pragma unroll
    for (int u = 0; u < UN; u++)
#pragma unroll
      for (int e = 0; e < V; e++) acc[u][e] = load_c(cur[u].e[e]);
  } else {
#pragma unroll
    for (int u = 0; u < UN; u++)
#pragma unroll
      for (int e = 0; e < V; e++) acc[u][e] = Combine<OP>::f(acc[u][e], (CT)load_c(cur[u].e[e]));
  }
#pragma unroll
  for (int u = 0; u < UN; u++) {
    U out;
#pragma unroll
    for (int e = 0; e < V; e++) out.e[e] = Store<T>::st(finish<OP>(acc[u][e], a.world));
    cur[u] = out;
  }
  if (a.mode & MODE_TMP) {
#pragma unroll
    for (int u = 0; u < UN; u++) cur[u].store(a.work, i0 + u * step);
  } else {
    i64 di[UN];
#pragma unroll
    for (int u = 0; u < UN; u++) di[u] = lay(a.ld, i0 + u * step);
    for (int t = 0; t < a.nout; t++) {
      int tt = (t + a.rank) % a.nout; // targets in a rotated order: peers' links busy at once
#pragma unroll
      for (int u = 0; u < UN; u++) cur[u].store(a.dst[tt], di[u]);
    }
  }
}

#define REDUCE_UN 4

// hir_reduce: start barrier; units [0, n) (vectors of V) and elements
// [tail_start, tail_end) of every rank's input reduced; end barrier (in
// MODE_TMP the results wait in work and are copied out after it, since
// the output aliases the input). one_shot all_reduce, reduce_scatter,
// reduce: src = every rank's input, one target; two_shot: src = every
// rank's chunk r, dst = chunk r of every rank's output.
template <typename T, typename CT, int OP, int V>
__device__ void reduce_kernel(const CollArgs& a) {
  if (!barrier(a, a.base + 1)) return;
  i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 i = tid;
  for (; i + (REDUCE_UN - 1) * nthr < a.n; i += REDUCE_UN * nthr) reduce_batch<T, CT, OP, V, REDUCE_UN>(a, i, nthr);
  for (; i < a.n; i += nthr) reduce_batch<T, CT, OP, V, 1>(a, i, nthr);
  for (i64 e = a.tail_start + tid; e < a.tail_end; e += nthr) reduce_batch<T, CT, OP, 1, 1>(a, e, nthr);
  if (!barrier(a, a.base + 2)) return;
  if (a.mode & MODE_TMP) {
    typedef VecT<T, V> U;
    for (i64 j = tid; j < a.n; j += nthr) {
      U v = U::load(a.work, j);
      i64 di = lay(a.ld, j);
      for (int t = 0; t < a.nout; t++) v.store(a.dst[t], di);
    }
    for (i64 e = a.tail_start + tid; e < a.tail_end; e += nthr) {
      T v = ((const T*)a.work)[e];
      for (int t = 0; t < a.nout; t++) ((T*)a.dst[t])[e] = v;
    }
  }
}

// hir_ar_ll: all_reduce of small tensors in one pass with no barrier
// (the LL protocol): every thread takes 8 bytes of its input, stores them
// with a flag word beside each 4 bytes (one 16-byte store; 8-byte stores
// are single-copy atomic, so data and flag arrive together) into every
// peer's staging, then polls its own staging for every peer's line
// carrying this launch's flag, reduces in rank order and writes its
// output. Staging: per channel and rank, [2 slots][world][seg bytes];
// launches alternate slots (xtra), so a slot is rewritten only two
// launches later, when every peer has finished reading it (a peer's
// next launch, whose data this launch waited for, started after its
// previous one ended). Flags are this launch's signal value, so a line
// left by an earlier launch never matches. n lines, tail_end elements.
__device__ __forceinline__ void st_ll(u64 p, unsigned d0, unsigned d1, unsigned flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag) : "memory");
}
// ll_wait polls one line until both its flags are flag. Every thread
// polls its own lines, so the look at the host-mapped status word (has
// another wait of this rank failed?) is rare and made by one lane per
// warp: thousands of threads reading host memory over PCIe at once would
// slow every poll down.
__device__ bool ll_wait(const CollArgs& a, u64 p, unsigned flag, int peer, unsigned* d0, unsigned* d1) {
  u64 t0 = 0, tcheck = 0;
  const bool lead = (threadIdx.x & 31) == 0;
  for (unsigned spin = 0;; spin++) {
    unsigned x, y, z, w;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "l"(p) : "memory");
    if (y == flag && w == flag) { *d0 = x; *d1 = z; return true; }
    if (spin == 0) {
      t0 = tcheck = gtimer();
    } else if ((spin & 127) == 0) {
      u64 now = gtimer();
      if (now - t0 > a.timeout_ns) { report(a, a.channel, PL_DATA, peer, a.base + 1); return false; }
      if (lead && now - tcheck > 2000000) {
        tcheck = now;
        if (*(volatile u64*)a.status != 0) return false;
      }
    }
  }
}

template <typename T, typename CT, int OP>
__device__ void ll_kernel(const CollArgs& a) {
  const int E = 8 / (int)sizeof(T);
  union Line { u64 u; unsigned w[2]; T e[8 / sizeof(T)]; };
  const unsigned flag = (unsigned)(a.base + 1);
  const int D = a.world, r = a.rank;
  const u64 slot = (u64)a.xtra * D;
  const bool aligned = ((a.src[0] | a.dst[0]) & 7) == 0;
  i64 nthr = (i64)gridDim.x * blockDim.x;
  for (i64 l = (i64)blockIdx.x * blockDim.x + threadIdx.x; l < a.n; l += nthr) {
    i64 e0 = l * E;
    int cnt = (int)imin(E, a.tail_end - e0);
    Line m;
    if (cnt == E && aligned) {
      m.u = ((const u64*)a.src[0])[l];
    } else {
      m.u = 0;
      for (int k = 0; k < cnt; k++) m.e[k] = ((const T*)a.src[0])[e0 + k];
    }
    for (int k = 1; k < D; k++) {
      int p = (r + k) % D;
      st_ll(a.stage[p] + (slot + r) * (u64)a.seg + 16 * (u64)l, m.w[0], m.w[1], flag);
    }
    CT acc[8 / sizeof(T)];
    for (int q = 0; q < D; q++) {
      Line v;
      if (q == r) {
        v.u = m.u;
      } else if (!ll_wait(a, a.stage[r] + (slot + q) * (u64)a.seg + 16 * (u64)l, flag, q, &v.w[0], &v.w[1])) {
        return;
      }
#pragma unroll
      for (int k = 0; k < E; k++) acc[k] = q == 0 ? (CT)load_c(v.e[k]) : Combine<OP>::f(acc[k], (CT)load_c(v.e[k]));
    }
    Line o;
#pragma unroll
    for (int k = 0; k < E; k++) o.e[k] = Store<T>::st(finish<OP>(acc[k], D));
    if (cnt == E && aligned) {
      ((u64*)a.dst[0])[l] = o.u;
    } else {
      for (int k = 0; k < cnt; k++) ((T*)a.dst[0])[e0 + k] = o.e[k];
    }
  }
}

// hir_ring: the ring of docs/RUNTIME.md, chunk c = [chunk[c], chunk[c+1])
// elements of the flat (packed) tensor: src holds this rank's values,
// final chunks go to dst (element i at dst + i*sizeof(T); for
// reduce_scatter the host shifts dst so that chunk r lands at the
// output's start), and data crosses to the right neighbour only through
// its staging. Chunk c is reduced in ring order c+1, c+2, ..., c with
// partials rounded to T at every hop, as the CPU runtime's ring does. For
// each segment a block runs these steps j, every one a single pass over
// the segment:
//
//	j = 0:          send own chunk r-1 to the right
//	j = 1 .. D-2:   receive chunk r-j-1, combine with own, send on
//	j = D-1:        receive chunk r, combine with own, finish (avg), store
//	                to dst and, with MODE_ALLGATHER, send on
//	MODE_ALLGATHER, j = D .. 2D-2: receive chunk r-(j-D)-1, store to dst,
//	                and send on unless j = 2D-2
//
// so nothing is stored locally but the final values, and the last
// reduce-scatter step and the first all-gather step are one pass (one
// handshake fewer per segment). Each block moves its part [len*b/G,
// len*(b+1)/G) of every chunk, nseg segments of seg elements each;
// transfers to the right neighbour go round nout slots per block (a slot
// is written again only after its ack), each with a data flag, and each
// received slot is acked once read. A block runs its (segment, step)
// pairs segment after segment, or with MODE_WAVE in waves: wave w runs
// step j of segment w-j for j = 0, 1, ..., so it sends segment w+1
// before it waits for the left's part of segment w (a transfer is
// received one wave after it was sent; needs more slots, see
// ringWaveSlots). Every rank runs the same order, so the k-th transfer
// a block sends is the k-th its right neighbour receives. The kernel
// ends once every transfer it made is acked, so the next launch finds
// the staging free. Segments move as 16-byte vectors (4 per thread in
// flight) where src and dst are 16-byte aligned (xtra), with at most V-1
// elements each side done singly; the segment's staging starts at its
// element lo's 16-byte phase.
#define RP_SEND 1    // store the value into the right neighbour's staging
#define RP_RECV 2    // the value comes from this rank's staging
#define RP_REDUCE 4  // combine the staged value with own (src)
#define RP_STORE 8   // store the value to dst
#define RP_FINISH 16 // finish (avg) after rounding the reduced value
#define MODE_WAVE 16
#define RING_UN 4

// ring_units: UN units (vectors of V elements, or elements with V = 1)
// j0 + u*step of a segment whose staging holds unit j at unit j - off of
// the slots in_st (this rank's, read) and out_st (the right neighbour's,
// written); f says what the step does (RP_*, the same in every thread).
template <typename T, typename CT, int OP, int V, int UN>
__device__ __forceinline__ void ring_units(const CollArgs& a, int f, i64 j0, i64 step, i64 off, u64 in_st, u64 out_st) {
  typedef VecT<T, V> U;
  U x[UN], y[UN];
  if (f & RP_RECV) {
#pragma unroll
    for (int u = 0; u < UN; u++) x[u] = U::load(in_st, j0 + u * step - off);
  }
  if (!(f & RP_RECV) || (f & RP_REDUCE)) {
#pragma unroll
    for (int u = 0; u < UN; u++) y[u] = U::load(a.src[0], j0 + u * step);
  }
  if (f & RP_REDUCE) {
#pragma unroll
    for (int u = 0; u < UN; u++)
#pragma unroll
      for (int e = 0; e < V; e++) {
        T t = Store<T>::st(Combine<OP>::f((CT)load_c(x[u].e[e]), (CT)load_c(y[u].e[e])));
        if (OP == OP_AVG && (f & RP_FINISH)) t = Store<T>::st(finish<OP>((CT)load_c(t), a.world));
        x[u].e[e] = t;
      }
  } else if (!(f & RP_RECV)) {
#pragma unroll
    for (int u = 0; u < UN; u++) x[u] = y[u];
  }
  if (f & RP_SEND) {
#pragma unroll
    for (int u = 0; u < UN; u++) x[u].store(out_st, j0 + u * step - off);
  }
  if (f & RP_STORE) {
#pragma unroll
    for (int u = 0; u < UN; u++) x[u].store(a.dst[0], j0 + u * step);
  }
}

// ring_pass: elements [lo, hi) through the block's threads.
template <typename T, typename CT, int OP>
__device__ __forceinline__ void ring_pass(const CollArgs& a, int f, i64 lo, i64 hi, u64 in_st, u64 out_st) {
  const int V = 16 / (int)sizeof(T);
  const i64 tid = threadIdx.x, nt = blockDim.x;
  const i64 base = lo - lo % V; // the slot's first element
  i64 vlo = (lo + V - 1) / V, vhi = hi / V;
  if (!a.xtra || vlo >= vhi) {
    i64 i = lo + tid;
    for (; i + (RING_UN - 1) * nt < hi; i += RING_UN * nt) ring_units<T, CT, OP, 1, RING_UN>(a, f, i, nt, base, in_st, out_st);
    for (; i < hi; i += nt) ring_units<T, CT, OP, 1, 1>(a, f, i, nt, base, in_st, out_st);
    return;
  }
  // At most V-1 elements before the first vector and after the last.
  i64 head = vlo * V - lo, tail = hi - vhi * V;
  if (tid < head + tail) ring_units<T, CT, OP, 1, 1>(a, f, tid < head ? lo + tid : vhi * V + (tid - head), nt, base, in_st, out_st);
  i64 j = vlo + tid;
  for (; j + (RING_UN - 1) * nt < vhi; j += RING_UN * nt) ring_units<T, CT, OP, V, RING_UN>(a, f, j, nt, base / V, in_st, out_st);
  for (; j < vhi; j += nt) ring_units<T, CT, OP, V, 1>(a, f, j, nt, base / V, in_st, out_st);
}

struct RingState {
  int D, r, right, left, b, G, K;
  bool gather;
  u64 tx, rx; // transfers sent to the right, received from the left (this block)
};

__device__ __forceinline__ u64 ring_slot(const CollArgs& a, u64 stage, const RingState& s, u64 t) {
  return stage + ((u64)s.b * s.K + t % s.K) * (u64)a.n;
}

// ring_op: step j of segment k: waits for the left's data (RP_RECV) and
// for the slot it writes on the right to be free (RP_SEND), makes the
// pass, then raises the right's data flag and acks the left.
template <typename T, typename CT, int OP>
__device__ __noinline__ bool ring_op(const CollArgs& a, RingState& s, int j, i64 k) {
  const int D = s.D, r = s.r;
  int f, c;
  if (j == 0) {
    f = RP_SEND, c = (r + D - 1) % D;
  } else if (j < D - 1) {
    f = RP_RECV | RP_REDUCE | RP_SEND, c = (r - j - 1 + 2 * D) % D;
  } else if (j == D - 1) {
    f = RP_RECV | RP_REDUCE | RP_STORE | RP_FINISH | (s.gather ? RP_SEND : 0), c = r;
  } else {
    f = RP_RECV | RP_STORE | (j < 2 * D - 2 ? RP_SEND : 0), c = (r - (j - D) - 1 + 2 * D) % D;
  }
  const bool recv = (f & RP_RECV) != 0, send = (f & RP_SEND) != 0;
  i64 c0 = a.chunk[c], len = a.chunk[c + 1] - c0;
  i64 plo = c0 + len * s.b / s.G, phi = c0 + len * (s.b + 1) / s.G;
  i64 lo = imin(plo + k * a.seg, phi), hi = imin(lo + a.seg, phi);
  bool ok = true;
  if (threadIdx.x == 0 && recv) ok = wait_ge(a, slot(a.pad[r], PL_DATA, s.b, s.left), a.base + s.rx + 1, a.channel, PL_DATA, s.left);
  if (threadIdx.x == 32 && send && s.tx >= (u64)s.K)
    ok = wait_ge(a, slot(a.pad[r], PL_ACK, s.b, s.right), a.base + s.tx - s.K + 1, a.channel, PL_ACK, s.right);
  if (!block_and(ok)) return false;
  ring_pass<T, CT, OP>(a, f, lo, hi, recv ? ring_slot(a, a.stage[r], s, s.rx) : 0, send ? ring_slot(a, a.stage[s.right], s, s.tx) : 0);
  __syncthreads();
  if (threadIdx.x == 0 && send) put_signal(slot(a.pad[s.right], PL_DATA, s.b, r), a.base + s.tx + 1);
  if (threadIdx.x == 32 && recv) put_signal(slot(a.pad[s.left], PL_ACK, s.b, r), a.base + s.rx + 1);
  s.tx += send;
  s.rx += recv;
  return true;
}

template <typename T, typename CT, int OP>
__device__ void ring_kernel(const CollArgs& a) {
  RingState s;
  s.D = a.world;
  s.r = a.rank;
  s.right = (s.r + 1) % s.D;
  s.left = (s.r + s.D - 1) % s.D;
  s.b = blockIdx.x;
  s.G = gridDim.x;
  s.K = a.nout;
  s.gather = (a.mode & MODE_ALLGATHER) != 0;
  s.tx = s.rx = 0;
  const int J = s.gather ? 2 * s.D - 1 : s.D; // steps per segment
  if (a.mode & MODE_WAVE) {
    for (i64 w = 0; w < a.nseg + J - 1; w++)
      for (int j = 0; j < J && j <= w; j++)
        if (w - j < a.nseg && !ring_op<T, CT, OP>(a, s, j, w - j)) return;
  } else {
    for (i64 k = 0; k < a.nseg; k++)
      for (int j = 0; j < J; j++)
        if (!ring_op<T, CT, OP>(a, s, j, k)) return;
  }
  // Every slot of the right neighbour is free again before the next launch.
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0 && s.tx > 0) ok = wait_ge(a, slot(a.pad[s.r], PL_ACK, s.b, s.right), a.base + s.tx, a.channel, PL_ACK, s.right);
  block_and(ok);
}
`

// reduceDTypes are the dtypes with reducing kernels, with their CUDA
// storage and compute types.
var reduceDTypes = map[ir.DType][2]string{
	ir.F32:  {"float", "float"},
	ir.F16:  {"f16_t", "float"},
	ir.BF16: {"bf16_t", "float"},
	ir.F64:  {"double", "double"},
	ir.I32:  {"int", "int"},
	ir.I64:  {"long long", "long long"},
}

// reduceOpCodes are the kernels' reduce op numbers (NCCL's order).
var reduceOpCodes = map[ir.ReduceOp]int{ir.ReduceSum: 0, ir.ReduceProd: 1, ir.ReduceMax: 2, ir.ReduceMin: 3, ir.ReduceAvg: 4}

// reduceModuleSource is the source of dt's reducing module: every reduce
// op (avg for floats only), each as a vector (16-byte) and a scalar reduce
// kernel and a ring kernel.
func reduceModuleSource(dt ir.DType) (string, error) {
	ty, ok := reduceDTypes[dt]
	if !ok {
		return "", fmt.Errorf("no reducing kernels for %v", dt)
	}
	var b strings.Builder
	b.WriteString(commonSource())
	b.WriteString(reduceSource)
	v := 16 / dt.Size()
	for _, op := range ir.ReduceOps() {
		if op == ir.ReduceAvg && !dt.IsFloat() {
			continue
		}
		code := reduceOpCodes[op]
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(512) %s(const __grid_constant__ CollArgs a) { reduce_kernel<%s, %s, %d, %d>(a); }\n",
			reduceKernelName(dt, op, true), ty[0], ty[1], code, v)
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(512) %s(const __grid_constant__ CollArgs a) { reduce_kernel<%s, %s, %d, 1>(a); }\n",
			reduceKernelName(dt, op, false), ty[0], ty[1], code)
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(512) %s(const __grid_constant__ CollArgs a) { ring_kernel<%s, %s, %d>(a); }\n",
			ringKernelName(dt, op), ty[0], ty[1], code)
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(512) %s(const __grid_constant__ CollArgs a) { ll_kernel<%s, %s, %d>(a); }\n",
			llKernelName(dt, op), ty[0], ty[1], code)
	}
	return b.String(), nil
}

// Kernel names are built by concatenation, not fmt: they are made on
// every launch.
func reduceKernelName(dt ir.DType, op ir.ReduceOp, vec bool) string {
	if vec {
		return "hir_reduce_" + dt.String() + "_" + op.String() + "_v"
	}
	return "hir_reduce_" + dt.String() + "_" + op.String() + "_s"
}

func ringKernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ring_" + dt.String() + "_" + op.String()
}

func llKernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ll_" + dt.String() + "_" + op.String()
}

// moveModuleSource is the data-movement module's source.
func moveModuleSource() string { return commonSource() }

// commonSource is collectiveSource with static_asserts that pin CollArgs
// to collArgs's layout as Go lays it out, field by field.
func commonSource() string {
	var a collArgs
	var b strings.Builder
	fmt.Fprintf(&b, "static_assert(sizeof(CollArgs) == %d, \"CollArgs size\");\n", unsafe.Sizeof(a))
	fmt.Fprintf(&b, "static_assert(MAXB == %d && MAXR == %d, \"pad geometry\");\n", maxBlocks, maxRanks)
	// Only the size is asserted in the source: NVRTC has no offsetof (nor
	// __builtin_offsetof), so the field offsets are checked against the Go
	// struct by the tests that compile the source with clang.
	return strings.Replace(collectiveSource, "%LAYOUT_ASSERTS%", b.String(), 1)
}

// commModules compiles (once per device) and caches the modules.
type commModules struct {
	mu   sync.Mutex
	mods map[string]*Module
	errs map[string]error
	fns  map[string]*Function
}

// function returns kernel name of module key, compiling the module on
// first use. src makes the module's source.
func (d *Device) commFunction(cm *commModules, key, name string, src func() (string, error)) (*Function, error) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if f, ok := cm.fns[name]; ok {
		return f, nil
	}
	m, ok := cm.mods[key]
	if !ok {
		if err, failed := cm.errs[key]; failed {
			return nil, err
		}
		text, err := src()
		if err == nil {
			m, err = d.loadCached(text, key+".cu")
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

// collNVRTCOptions are the options every collective module compiles with:
// IEEE division and no contraction, so results match the CPU runtime.
var collNVRTCOptions = []string{"--fmad=false", "--prec-div=true", "--prec-sqrt=true"}

// loadCached compiles src for this device through the kernel cache
// (kernelcache.go: memory, then disk, then NVRTC), so the ranks of a job
// and later runs do not compile again; a cached image the driver refuses
// is compiled anew.
func (d *Device) loadCached(src, name string) (*Module, error) {
	cc := d.info.ComputeCapability
	key := imageKey(src, cc, collNVRTCOptions, nvrtcVersionOnce())
	for attempt := 0; ; attempt++ {
		img, from, err := cachedImage(key, src, name, cc, collNVRTCOptions, attempt > 0)
		if err != nil {
			return nil, &SourceError{Kernel: name, SourcePath: saveSource(strings.TrimSuffix(name, ".cu"), src), Err: err}
		}
		m, err := d.LoadModule(img)
		if err == nil {
			return m, nil
		}
		if from == "nvrtc" || attempt > 0 {
			return nil, err
		}
		forgetImage(key)
	}
}
