
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
#define LL_FAST_SRC 1
#define LL_FAST_DST 2
#define LL_SPREAD 4
#define LL128_UNITS 15 // 8-byte units of data in an LL128 line (120 bytes of 128)

struct Lay { i64 run, pitch; };

struct CollArgs {
  u64 src[MAXR];
  u64 dst[MAXR];
  u64 pad[MAXR];
  u64 stage[MAXR];
  u64 status;
  u64 work;
  u64 base;
  u64 epochs;
  u64 nsig;
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
/* LAYOUT_ASSERTS */

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

// take_count returns this block's counter among words[0, MAXB) and
// advances it by `by`; block 0 advances the counters of the blocks this
// launch does not run, so all MAXB stay equal: one count per channel, kept
// and advanced on the device, so a launch replayed from a CUDA graph takes
// new values as an eager launch does. Only block b touches word b during
// a launch, and launches on a channel are ordered by its stream.
__device__ u64 take_count(u64* words, u64 by) {
  __shared__ u64 v;
  __syncthreads();
  if (threadIdx.x == 0) v = words[blockIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) words[blockIdx.x] = v + by;
  if (blockIdx.x == 0)
    for (unsigned i = gridDim.x + threadIdx.x; i < MAXB; i += blockDim.x) words[i] += by;
  return v;
}

// take_epoch is the launch's signal base: the values base+1..base+nsig are
// its own. From the channel's counters where the host gave them (the
// host's base mirrors them), else the host's (point-to-point pairs).
__device__ __forceinline__ u64 take_epoch(const CollArgs& a) {
  return a.epochs ? take_count((u64*)a.epochs, a.nsig) : a.base;
}

// take_epoch_slot is take_epoch(a) and, into *slot, ll_slot(a, by) at
// once: thread 0 loads both counters together, so an LL launch waits
// for one load of device memory before its first store, not two in a row
// (the same words, advanced the same way as the two calls would).
__device__ u64 take_epoch_slot(const CollArgs& a, u64 by, u64* slot) {
  if (!a.epochs) {
    *slot = 0;
    return a.base;
  }
  u64* ep = (u64*)a.epochs;
  u64* cn = ep + MAXB;
  __shared__ u64 v[2];
  __syncthreads();
  if (threadIdx.x == 0) {
    const u64 e = ep[blockIdx.x], c = cn[blockIdx.x];
    v[0] = e;
    v[1] = c;
    ep[blockIdx.x] = e + a.nsig;
    cn[blockIdx.x] = c + by;
  }
  if (blockIdx.x == 0)
    for (unsigned i = gridDim.x + threadIdx.x; i < MAXB; i += blockDim.x) {
      ep[i] += a.nsig;
      cn[i] += by;
    }
  __syncthreads();
  *slot = (v[1] & 1) * (u64)a.world;
  return v[0];
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
  const u64 base = take_epoch(a);
  if (!barrier(a, base + 1)) return;
  i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < a.ntask; k++) {
    int t = (blockIdx.x + k) % a.ntask;
    copy_units<U>(a.dst[t], a.ld, a.src[t], a.ls, 0, a.n, tid, nthr);
    copy_bytes(a.dst[t], a.src[t], a.tail_start, a.tail_end, tid, nthr);
  }
  barrier(a, base + 2);
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
  const u64 base = take_epoch(a);
  if (!barrier(a, base + 1)) return;
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
  signal_peer(a, PL_DATA, right, base + 1);
  for (int s = 1; s < D - 1; s++) {
    if (!wait_peer(a, PL_DATA, left, base + s)) return;
    int c = (r - s + D) % D;
    copy_units<U>(next + c * stride, a.ld, mine + c * stride, a.ld, lo, hi, threadIdx.x, blockDim.x);
    if (tail) copy_bytes(next + c * stride, mine + c * stride, a.tail_start, a.tail_end, threadIdx.x, blockDim.x);
    signal_peer(a, PL_DATA, right, base + s + 1);
  }
  wait_peer(a, PL_DATA, left, base + D - 1);
}

extern "C" __global__ void hir_barrier(const __grid_constant__ CollArgs a) { pdl_begin(); barrier(a, take_epoch(a) + 1); }

extern "C" __global__ void __launch_bounds__(512) hir_copy_v16(const __grid_constant__ CollArgs a) { pdl_begin(); copy_kernel<vec16>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s1(const __grid_constant__ CollArgs a) { pdl_begin(); copy_kernel<unsigned char>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s2(const __grid_constant__ CollArgs a) { pdl_begin(); copy_kernel<unsigned short>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s4(const __grid_constant__ CollArgs a) { pdl_begin(); copy_kernel<unsigned int>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_copy_s8(const __grid_constant__ CollArgs a) { pdl_begin(); copy_kernel<u64>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_v16(const __grid_constant__ CollArgs a) { pdl_begin(); ag_ring_kernel<vec16>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s1(const __grid_constant__ CollArgs a) { pdl_begin(); ag_ring_kernel<unsigned char>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s2(const __grid_constant__ CollArgs a) { pdl_begin(); ag_ring_kernel<unsigned short>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s4(const __grid_constant__ CollArgs a) { pdl_begin(); ag_ring_kernel<unsigned int>(a); }
extern "C" __global__ void __launch_bounds__(512) hir_ag_ring_s8(const __grid_constant__ CollArgs a) { pdl_begin(); ag_ring_kernel<u64>(a); }

// ---- LL: the low-latency protocol (algo=ll) ----
// A rank stores each 8 bytes it sends to a peer as one 16-byte line, a
// flag word beside each 4 bytes (one 16-byte store: the 8-byte halves are
// single-copy atomic, so data and flag arrive together), into the peer's
// staging; the peer polls its staging until the line carries this
// launch's flag. No barrier before or after: the data carries its own
// readiness. Staging: per channel and rank, [2 slots][world senders][seg
// bytes]; launches alternate slots (ll_slot), so a slot is rewritten only
// two LL launches later. That is safe because in every LL launch every
// rank receives at least one line from every peer (a line of no data where
// it has nothing to send, as broadcast's ranks do): a rank's launch k+1
// waited for its peer's launch k+1, which began after the peer's launch k,
// the last reader of the slot launch k+2 rewrites, had ended. Flags are the
// launch's signal value, so a line left by an earlier launch never matches.
__device__ __forceinline__ void st_ll(u64 p, unsigned d0, unsigned d1, unsigned flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag) : "memory");
}

// ll_slot is the launch's staging slot times the world (the slot's first
// sender region): from a count kept beside the signal counters
// (take_count), so graph replays alternate as eager launches do. A launch
// that exchanges `by` times (bulk rounds) takes that many: exchange j
// uses slot (count + j) & 1, ll_slot_at.
__device__ __forceinline__ u64 ll_slot(const CollArgs& a, u64 by = 1) {
  return (a.epochs ? take_count((u64*)a.epochs + MAXB, by) & 1 : 0) * (u64)a.world;
}
__device__ __forceinline__ u64 ll_slot_at(const CollArgs& a, u64 first, i64 j) {
  return ((first / (u64)a.world + (u64)j) & 1) * (u64)a.world;
}

// ll_wait polls one line until both its flags are flag. Every thread
// polls its own lines, so the look at the host-mapped status word (has
// another wait of this rank failed?) is rare and made by one lane per
// warp: thousands of threads reading host memory over PCIe at once would
// slow every poll down.
__device__ bool ll_wait(const CollArgs& a, u64 p, unsigned flag, u64 want, int peer, unsigned* d0, unsigned* d1) {
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
      if (now - t0 > a.timeout_ns) { report(a, a.channel, PL_DATA, peer, want); return false; }
      if (lead && now - tcheck > 2000000) {
        tcheck = now;
        if (*(volatile u64*)a.status != 0) return false;
      }
    }
  }
}

// ll_load / ll_store: bytes [8l, 8l+8) (fewer in the piece's last line) of
// a piece of `bytes` bytes at base, laid out by L in bytes; one 8-byte
// access where fast (base and L 8-byte aligned), else byte by byte.
__device__ __forceinline__ u64 ll_load(u64 base, const Lay& L, i64 l, i64 bytes, bool fast) {
  i64 b0 = 8 * l;
  if (fast && b0 + 8 <= bytes) return *(const u64*)(base + lay(L, b0));
  union { u64 u; unsigned char c[8]; } v;
  v.u = 0;
  for (int k = 0; k < 8 && b0 + k < bytes; k++) v.c[k] = *(const unsigned char*)(base + lay(L, b0 + k));
  return v.u;
}
__device__ __forceinline__ void ll_store(u64 base, const Lay& L, i64 l, i64 bytes, bool fast, u64 x) {
  i64 b0 = 8 * l;
  if (fast && b0 + 8 <= bytes) { *(u64*)(base + lay(L, b0)) = x; return; }
  union { u64 u; unsigned char c[8]; } v;
  v.u = x;
  for (int k = 0; k < 8 && b0 + k < bytes; k++) *(unsigned char*)(base + lay(L, b0 + k)) = v.c[k];
}

// hir_ll_copy: all_gather, all_to_all and broadcast through LL lines.
// For each peer p, chunk[p] holds the lines to send to p (low 32 bits)
// and to receive from p (high 32 bits), at least one each way; src[p] is
// the piece sent to p (0: lines of no data), dst[q] where q's lines go
// (0: dropped), src[rank] -> dst[rank] the rank's own piece, copied here
// (unless 0 or the same place). Every piece is tail_end bytes, laid out
// by ls (sources) and ld (destinations) in bytes; xtra says which of them
// allow whole 8-byte accesses (LL_FAST_SRC, LL_FAST_DST). The threads
// share out (peer, line) pairs, so a small piece still takes a block per
// peer (the grid is sized so): one block storing to every peer in turn
// was most of a 4-rank all_gather of 8 KiB.
extern "C" __global__ void __launch_bounds__(256) hir_ll_copy(const __grid_constant__ CollArgs a) { pdl_begin();
  u64 slot;
  const u64 base = take_epoch_slot(a, 1, &slot);
  const unsigned flag = (unsigned)(base + 1);
  const int D = a.world, r = a.rank;
  const i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 bytes = a.tail_end;
  const bool fs = (a.xtra & LL_FAST_SRC) != 0, fd = (a.xtra & LL_FAST_DST) != 0;
  i64 smax = 1, rmax = 1; // the most lines sent to, and received from, one peer
  for (int q = 0; q < D; q++) {
    if (q == r) continue;
    i64 sn = a.chunk[q] & 0xffffffffll, rn = a.chunk[q] >> 32;
    smax = sn > smax ? sn : smax;
    rmax = rn > rmax ? rn : rmax;
  }
  for (i64 i = tid; i < (D - 1) * smax; i += nthr) {
    int p = (r + 1 + (int)(i / smax)) % D;
    i64 l = i % smax;
    if (l >= (a.chunk[p] & 0xffffffffll)) continue;
    u64 v = a.src[p] ? ll_load(a.src[p], a.ls, l, bytes, fs) : 0;
    st_ll(a.stage[p] + (slot + r) * (u64)a.seg + 16 * (u64)l, (unsigned)v, (unsigned)(v >> 32), flag);
  }
  if (a.src[r] && a.dst[r] && a.src[r] != a.dst[r]) {
    for (i64 l = tid; 8 * l < bytes; l += nthr) ll_store(a.dst[r], a.ld, l, bytes, fd, ll_load(a.src[r], a.ls, l, bytes, fs));
  }
  for (i64 i = tid; i < (D - 1) * rmax; i += nthr) {
    int q = (r + 2 * D - 1 - (int)(i / rmax)) % D;
    i64 l = i % rmax;
    if (l >= (a.chunk[q] >> 32)) continue;
    unsigned d0, d1;
    if (!ll_wait(a, a.stage[r] + (slot + q) * (u64)a.seg + 16 * (u64)l, flag, base + 1, q, &d0, &d1)) return;
    if (a.dst[q]) ll_store(a.dst[q], a.ld, l, bytes, fd, (u64)d0 | ((u64)d1 << 32));
  }
}

// ---- LL128: the LL protocol's mode for mid-size pieces ----
// A line is 128 bytes: 120 bytes of data and, in its last 8, the flag
// (the launch's 32-bit flag twice). The 8 lanes of a quarter warp store a
// line with one instruction, 16 bytes each, and the receiver loads it the
// same way; NVLink carries an aligned 128-byte warp store as one packet
// and the load sees it whole (NCCL's LL128 rests on the same), so a line
// whose flag is this launch's carries this launch's data: 120 of every
// 128 bytes are data, where LL lines carry 8 of 16. Lane j of a line's
// quarter warp holds data bytes [16j, 16j+16) (the last lane [112, 120)
// and the flag): the 8-byte units 15l+2j and 15l+2j+1 of the piece, as
// ll_load counts them. LL128 has its own staging (same geometry as LL's:
// LL lines' data could read as LL128 flags, and the other way round); its
// slots alternate on the count LL lines and bulk launches take too, so
// the LL section's argument holds across the three. Loops run whole
// warps (four lines per warp and step) so every lane meets the warp-wide
// votes and syncs.
__device__ __forceinline__ void warp_sync() { asm volatile("bar.warp.sync %0;" :: "r"(0xffffffffu) : "memory"); }
__device__ __forceinline__ bool warp_all(bool p) {
  unsigned r;
  asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.all.pred q, p, %2; selp.u32 %0, 1, 0, q; }" : "=r"(r) : "r"((unsigned)p), "r"(0xffffffffu));
  return r != 0;
}
__device__ __forceinline__ bool warp_any(bool p) {
  unsigned r;
  asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.any.pred q, p, %2; selp.u32 %0, 1, 0, q; }" : "=r"(r) : "r"((unsigned)p), "r"(0xffffffffu));
  return r != 0;
}
__device__ __forceinline__ void st_ll128(u64 p, u64 w0, u64 w1) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" :: "l"(p), "l"(w0), "l"(w1) : "memory");
}
__device__ __forceinline__ void ld_ll128(u64 p, u64* w0, u64* w1) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*w0), "=l"(*w1) : "l"(p) : "memory");
}
// ll128_flag is the flag word of a launch whose 32-bit flag is f.
__device__ __forceinline__ u64 ll128_flag(unsigned f) { return (u64)f | ((u64)f << 32); }

// Ll128Lanes is where the calling lane stands: its quarter warp's line
// among the warp's four (q), its 16 bytes in the line (j), the warp and
// the grid's warps.
struct Ll128Lanes {
  int j;
  i64 q, warp, warps;
};
// Ll128Launch is what every LL128 kernel takes first: the launch's slot
// of the staging and its epoch (the flags' value, twice in one word).
struct Ll128Launch {
  u64 slot, epoch, flag;
};
__device__ __forceinline__ Ll128Launch ll128_launch(const CollArgs& a) {
  Ll128Launch e;
  e.epoch = take_epoch_slot(a, 1, &e.slot) + 1;
  e.flag = ll128_flag((unsigned)e.epoch);
  return e;
}
__device__ __forceinline__ Ll128Lanes ll128_lanes() {
  Ll128Lanes w;
  w.j = threadIdx.x & 7;
  w.q = (threadIdx.x >> 3) & 3;
  w.warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  w.warps = ((i64)gridDim.x * blockDim.x) >> 5;
  return w;
}

// ll128_send stores the calling lane's 16 bytes (w0, w1; the flag lane's
// w1 is replaced by the flag) of a line at p (the line plus 16j), where
// on: the warp first reconverges, so a line's 8 lanes store together.
__device__ __forceinline__ void ll128_send(u64 p, bool on, int j, u64 w0, u64 w1, u64 flag) {
  warp_sync();
  if (on) st_ll128(p, w0, j == 7 ? flag : w1);
}

// ll128_wait: every lane of the warp loads its 16 bytes of its line (at
// p, where on) until every line's flag lane sees flag; false for the
// whole warp on a timeout (each waiting lane reports) or once another
// wait of this rank has failed.
__device__ bool ll128_wait(const CollArgs& a, u64 p, bool on, u64 flag, u64 want, int peer, u64* w0, u64* w1) {
  const bool flag_lane = (threadIdx.x & 7) == 7;
  u64 t0 = 0, tcheck = 0;
  for (unsigned spin = 0;; spin++) {
    bool ok = true;
    if (on) {
      ld_ll128(p, w0, w1);
      ok = !flag_lane || *w1 == flag;
    }
    if (warp_all(ok)) return true;
    if (spin == 0) {
      t0 = tcheck = gtimer();
    } else if ((spin & 127) == 0) {
      u64 now = gtimer();
      if (warp_any(now - t0 > a.timeout_ns)) {
        if (!ok) report(a, a.channel, PL_DATA, peer, want);
        return false;
      }
      bool failed = false;
      if ((threadIdx.x & 31) == 0 && now - tcheck > 2000000) {
        tcheck = now;
        failed = *(volatile u64*)a.status != 0;
      }
      if (warp_any(failed)) return false;
    }
  }
}

// hir_ll128_copy: hir_ll_copy through LL128 lines. chunk[p] counts
// LL128 lines (sent to p low, received from p high); the rest as there.
extern "C" __global__ void __launch_bounds__(256) hir_ll128_copy(const __grid_constant__ CollArgs a) { pdl_begin();
  const Ll128Launch e = ll128_launch(a);
  const int D = a.world, r = a.rank;
  const Ll128Lanes w = ll128_lanes();
  const int j = w.j;
  const i64 bytes = a.tail_end;
  const bool fs = (a.xtra & LL_FAST_SRC) != 0, fd = (a.xtra & LL_FAST_DST) != 0;
  i64 smax = 1, rmax = 1;
  for (int q = 0; q < D; q++) {
    if (q == r) continue;
    i64 sn = a.chunk[q] & 0xffffffffll, rn = a.chunk[q] >> 32;
    smax = sn > smax ? sn : smax;
    rmax = rn > rmax ? rn : rmax;
  }
  const i64 sends = (D - 1) * smax, recvs = (D - 1) * rmax;
  for (i64 i0 = 4 * w.warp; i0 < sends; i0 += 4 * w.warps) {
    const i64 i = i0 + w.q;
    bool on = i < sends;
    u64 w0 = 0, w1 = 0, to = 0;
    if (on) {
      const int p = (r + 1 + (int)(i / smax)) % D;
      const i64 l = i % smax, u = LL128_UNITS * l + 2 * j;
      on = l < (a.chunk[p] & 0xffffffffll);
      if (on && a.src[p]) {
        w0 = ll_load(a.src[p], a.ls, u, bytes, fs);
        if (j < 7) w1 = ll_load(a.src[p], a.ls, u + 1, bytes, fs);
      }
      to = a.stage[p] + (e.slot + r) * (u64)a.seg + 128 * (u64)l + 16 * j;
    }
    ll128_send(to, on, j, w0, w1, e.flag);
  }
  if (a.src[r] && a.dst[r] && a.src[r] != a.dst[r]) {
    const i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 l = tid; 8 * l < bytes; l += nthr) ll_store(a.dst[r], a.ld, l, bytes, fd, ll_load(a.src[r], a.ls, l, bytes, fs));
  }
  for (i64 i0 = 4 * w.warp; i0 < recvs; i0 += 4 * w.warps) {
    const i64 i = i0 + w.q;
    bool on = i < recvs;
    int q = r;
    i64 l = 0;
    if (on) {
      q = (r + 2 * D - 1 - (int)(i / rmax)) % D;
      l = i % rmax;
      on = l < (a.chunk[q] >> 32);
    }
    u64 w0, w1;
    if (!ll128_wait(a, a.stage[r] + (e.slot + q) * (u64)a.seg + 128 * (u64)l + 16 * j, on, e.flag, e.epoch, q, &w0, &w1)) return;
    if (on && a.dst[q]) {
      const i64 u = LL128_UNITS * l + 2 * j;
      ll_store(a.dst[q], a.ld, u, bytes, fd, w0);
      if (j < 7) ll_store(a.dst[q], a.ld, u + 1, bytes, fd, w1);
    }
  }
}

// ---- bulk: the LL protocol's mode for large pieces ----
// A piece too large for LL lines moves as plain data into the peer's bulk
// staging (per channel and rank: [2 slots][world senders][seg bytes]):
// block b of rank r stores portion b of the piece it sends peer p there
// (slot, sender r), then raises p's data flag (block b, sender r) to the
// launch's first signal value, fencing first (signal_peer); p's block b
// waits for that flag and reads the portion from its own memory. No
// barrier before or after: slots alternate on the LL lines' count
// (ll_slot), and every block of a launch waits for a flag from every
// peer, the invariant the LL section relies on (a slot is rewritten two
// launches later, after its reader's launch ended). Flags only grow on a
// channel: one left by an earlier launch is below what this launch waits
// for, and one a peer raised in a later launch comes after this launch's
// data. Every rank cuts a piece into the same portions (bulk_cut), so
// block b of every rank handles the same bytes.

// bulk_cut is where portion b of G starts in a piece of total units, a
// multiple of align (total itself for b = G).
__device__ __forceinline__ i64 bulk_cut(i64 total, i64 b, i64 G, i64 align) {
  if (b >= G) return total;
  i64 x = total * b / G;
  return x - x % align;
}

// bulk_move copies bytes [lo, hi) of a piece from src (layout ls, in
// bytes) to dst (layout ld) with the calling block: units of w bytes
// (w divides both sides' addresses and layouts, and lo unless lo = hi),
// then the bytes after the last whole unit one by one.
__device__ void bulk_move(u64 dst, const Lay& ld, u64 src, const Lay& ls, i64 lo, i64 hi, int w) {
  const i64 t = threadIdx.x, nt = blockDim.x;
  i64 ulo = lo / w, uhi = hi / w;
  Lay lsu = {ls.run / w, ls.pitch / w}, ldu = {ld.run / w, ld.pitch / w};
  switch (w) {
  case 16: copy_units<vec16>(dst, ldu, src, lsu, ulo, uhi, t, nt); break;
  case 8: copy_units<u64>(dst, ldu, src, lsu, ulo, uhi, t, nt); break;
  case 4: copy_units<unsigned int>(dst, ldu, src, lsu, ulo, uhi, t, nt); break;
  case 2: copy_units<unsigned short>(dst, ldu, src, lsu, ulo, uhi, t, nt); break;
  default: copy_units<unsigned char>(dst, ldu, src, lsu, ulo, uhi, t, nt); break;
  }
  for (i64 i = (uhi * w > lo ? uhi * w : lo) + t; i < hi; i += nt) *(unsigned char*)(dst + lay(ld, i)) = *(const unsigned char*)(src + lay(ls, i));
}

// bulk_signal raises every peer's flag (this block, this rank) to v once
// every thread of the block has stored its data: threads 0..D-1 each
// fence and raise one, so the fences' waits overlap. bulk_wait waits
// until every peer's flag (this block) is at least v, polled likewise.
__device__ void bulk_signal(const CollArgs& a, u64 v) {
  __syncthreads();
  int t = threadIdx.x;
  if (t < a.world && t != a.rank) put_signal(slot(a.pad[t], PL_DATA, blockIdx.x, a.rank), v);
}
__device__ bool bulk_wait(const CollArgs& a, u64 v) {
  bool ok = true;
  int t = threadIdx.x;
  if (t < a.world && t != a.rank) ok = wait_ge(a, slot(a.pad[a.rank], PL_DATA, blockIdx.x, t), v, a.channel, PL_DATA, t);
  return block_and(ok);
}

// bulk_send: portion [lo, hi) (bytes) of the piece for each peer p
// (src[p], layout ls in bytes; 0: no data) into p's staging, then every
// peer's flag raised to v; where keep, this rank's own piece src[r] goes
// into its own staging too (the reducing kernels read every rank's piece
// from there). Peers in rotated order, so links are busy at once. xtra's
// low byte is the unit width of the sources.
__device__ void bulk_send(const CollArgs& a, u64 slot, u64 v, i64 lo, i64 hi, bool keep) {
  const int D = a.world, r = a.rank, w = a.xtra & 0xff;
  const Lay contig = {0, 0};
  for (int k = 1; k < D; k++) {
    int p = (r + k) % D;
    if (a.src[p]) bulk_move(a.stage[p] + (slot + r) * (u64)a.seg, contig, a.src[p], a.ls, lo, hi, w);
  }
  bulk_signal(a, v);
  if (keep) bulk_move(a.stage[r] + (slot + r) * (u64)a.seg, contig, a.src[r], a.ls, lo, hi, w);
}

// hir_bulk_copy: all_gather, all_to_all and broadcast in bulk. src[p] is
// the piece sent to p (0: none), dst[q] where q's piece goes (0: dropped),
// src[rank] -> dst[rank] the rank's own piece (unless 0 or the same
// place). Every piece is tail_end bytes, laid out by ls (sources) and ld
// (destinations); xtra's bytes are the unit widths of the sources and of
// the destinations.
extern "C" __global__ void __launch_bounds__(512) hir_bulk_copy(const __grid_constant__ CollArgs a) { pdl_begin();
  u64 slot;
  const u64 base = take_epoch_slot(a, 1, &slot);
  const int D = a.world, r = a.rank, wd = (a.xtra >> 8) & 0xff;
  const i64 lo = bulk_cut(a.tail_end, blockIdx.x, gridDim.x, 16), hi = bulk_cut(a.tail_end, blockIdx.x + 1, gridDim.x, 16);
  const Lay contig = {0, 0};
  bulk_send(a, slot, base + 1, lo, hi, false);
  if (a.src[r] && a.dst[r] && a.src[r] != a.dst[r]) bulk_move(a.dst[r], a.ld, a.src[r], a.ls, lo, hi, (int)imin(a.xtra & 0xff, wd));
  if (!bulk_wait(a, base + 1)) return;
  for (int k = 1; k < D; k++) {
    int q = (r + D - k) % D;
    if (a.dst[q]) bulk_move(a.dst[q], a.ld, a.stage[r] + (slot + q) * (u64)a.seg, contig, lo, hi, wd);
  }
}

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
// here), tail_end the message's bytes, n its transfers, epochs the pair's
// transfer counters (take_epoch: the count before it), peer the receiver.
extern "C" __global__ void __launch_bounds__(512) hir_p2p_send(const __grid_constant__ CollArgs a) { pdl_begin();
  int b = blockIdx.x;
  u64 inbox = a.dst[0];
  const u64 base = take_epoch(a);
  for (i64 j = 0; j < a.n; j++) {
    u64 g = base + j;
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
extern "C" __global__ void __launch_bounds__(512) hir_p2p_recv(const __grid_constant__ CollArgs a) { pdl_begin();
  int b = blockIdx.x;
  u64 inbox = a.src[0];
  const u64 base = take_epoch(a);
  for (i64 j = 0; j < a.n; j++) {
    u64 g = base + j;
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
