
// ---- numerics: as the CPU runtime computes (docs/SEMANTICS.md) ----
// f16/bf16 compute in f32 and round to nearest even when stored (the
// same bit manipulations as numeric.F32ToBF16/F32ToF16, NaNs included);
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
  const u64 base = take_epoch(a);
  if (!barrier(a, base + 1)) return;
  i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 i = tid;
  for (; i + (REDUCE_UN - 1) * nthr < a.n; i += REDUCE_UN * nthr) reduce_batch<T, CT, OP, V, REDUCE_UN>(a, i, nthr);
  for (; i < a.n; i += nthr) reduce_batch<T, CT, OP, V, 1>(a, i, nthr);
  for (i64 e = a.tail_start + tid; e < a.tail_end; e += nthr) reduce_batch<T, CT, OP, 1, 1>(a, e, nthr);
  if (!barrier(a, base + 2)) return;
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

// ll_kernel (hir_ll_*): all_reduce and reduce_scatter through the LL
// protocol of collective.cu (algo=ll, and all_reduce one_shot of small
// tensors): every thread takes 8 bytes (E elements) of the piece for each
// peer p (src[p], layout ls in elements: the whole input for all_reduce,
// block p for reduce_scatter), stores them as LL lines into p's staging;
// then, for each of its lines, reduces in rank order the pieces the peers
// sent it and its own, and writes the result to dst[0] (contiguous). n
// lines, tail_end elements per piece. Every thread handles the same lines
// in both phases, so an output that is the input itself is read before it
// is written; other overlaps are staged by the host. xtra & LL_FAST_SRC:
// src and ls allow whole 8-byte loads; xtra & LL_SPREAD (reduce_scatter,
// whose pieces sent are never the output): the sends are spread over
// (peer, line) pairs instead.
template <typename T, typename CT, int OP>
__device__ __forceinline__ u64 ll_piece(const CollArgs& a, u64 src, i64 l, bool fast) {
  const int E = 8 / (int)sizeof(T);
  union Line { u64 u; T e[8 / sizeof(T)]; } m;
  i64 e0 = l * E;
  if (fast && e0 + E <= a.tail_end) return *(const u64*)(src + sizeof(T) * (u64)lay(a.ls, e0));
  m.u = 0;
  for (int k = 0; k < E && e0 + k < a.tail_end; k++) m.e[k] = ((const T*)src)[lay(a.ls, e0 + k)];
  return m.u;
}

// ll_put_line stores line l (E elements, fewer at the tail) of the
// contiguous output dst[0].
template <typename T>
__device__ __forceinline__ void ll_put_line(const CollArgs& a, i64 l, u64 x, bool fast) {
  const int E = 8 / (int)sizeof(T);
  union { u64 u; T e[8 / sizeof(T)]; } o;
  o.u = x;
  i64 e0 = l * E;
  if (fast && e0 + E <= a.tail_end) {
    ((u64*)a.dst[0])[l] = x;
  } else {
    for (int k = 0; k < E && e0 + k < a.tail_end; k++) ((T*)a.dst[0])[e0 + k] = o.e[k];
  }
}

template <typename T, typename CT, int OP>
__device__ void ll_kernel(const CollArgs& a) {
  const int E = 8 / (int)sizeof(T);
  union Line { u64 u; unsigned w[2]; T e[8 / sizeof(T)]; };
  u64 slot;
  const u64 base = take_epoch_slot(a, 1, &slot);
  const unsigned flag = (unsigned)(base + 1);
  const int D = a.world, r = a.rank;
  const bool fast = (a.xtra & LL_FAST_SRC) != 0, out_fast = (a.dst[0] & 7) == 0;
  const i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (a.xtra & LL_SPREAD) {
    // reduce_scatter: the threads share out (peer, line) pairs, a block
    // per peer for a small piece (the grid is sized so); no piece sent is
    // block r, the only one the output may be.
    for (i64 i = tid; i < (D - 1) * a.n; i += nthr) {
      int p = (r + 1 + (int)(i / a.n)) % D;
      i64 l = i % a.n;
      u64 v = ll_piece<T, CT, OP>(a, a.src[p], l, fast);
      st_ll(a.stage[p] + (slot + r) * (u64)a.seg + 16 * (u64)l, (unsigned)v, (unsigned)(v >> 32), flag);
    }
  } else {
    for (int k = 1; k < D; k++) {
      int p = (r + k) % D;
      u64 to = a.stage[p] + (slot + r) * (u64)a.seg;
      for (i64 l = tid; l < a.n; l += nthr) {
        u64 v = ll_piece<T, CT, OP>(a, a.src[p], l, fast);
        st_ll(to + 16 * (u64)l, (unsigned)v, (unsigned)(v >> 32), flag);
      }
    }
  }
  for (i64 l = tid; l < a.n; l += nthr) {
    CT acc[8 / sizeof(T)];
    for (int q = 0; q < D; q++) {
      Line v;
      if (q == r) {
        v.u = ll_piece<T, CT, OP>(a, a.src[r], l, fast);
      } else if (!ll_wait(a, a.stage[r] + (slot + q) * (u64)a.seg + 16 * (u64)l, flag, base + 1, q, &v.w[0], &v.w[1])) {
        return;
      }
#pragma unroll
      for (int k = 0; k < E; k++) acc[k] = q == 0 ? (CT)load_c(v.e[k]) : Combine<OP>::f(acc[k], (CT)load_c(v.e[k]));
    }
    Line o;
#pragma unroll
    for (int k = 0; k < E; k++) o.e[k] = Store<T>::st(finish<OP>(acc[k], D));
    ll_put_line<T>(a, l, o.u, out_fast);
  }
}

// ll2_kernel (hir_ll2_*): all_reduce through LL lines in two hops, for
// larger tensors on more ranks (each rank sends 2(D-1)/D of the tensor
// rather than D-1 times it): chunk c is lines [chunk[c], chunk[c+1]) of
// the flat tensor (tail_end elements). Rank r sends chunk p of its input
// to rank p (the first half of each staging region), reduces chunk r in
// rank order as ll_kernel does, writes it to its output and sends it to
// every peer (the second half), then writes the peers' reduced chunks as
// they arrive. A line is read (hop one) and written (hop three) by the same
// thread, so the output may be the input itself.
template <typename T, typename CT, int OP>
__device__ void ll2_kernel(const CollArgs& a) {
  const int E = 8 / (int)sizeof(T);
  union Line { u64 u; unsigned w[2]; T e[8 / sizeof(T)]; };
  u64 slot;
  const u64 base = take_epoch_slot(a, 1, &slot);
  const unsigned flag = (unsigned)(base + 1);
  const int D = a.world, r = a.rank;
  const bool fast = (a.xtra & LL_FAST_SRC) != 0, out_fast = (a.dst[0] & 7) == 0;
  const i64 nthr = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const u64 half = (u64)a.seg / 2;
  for (int k = 1; k < D; k++) {
    int p = (r + k) % D;
    u64 to = a.stage[p] + (slot + r) * (u64)a.seg;
    for (i64 l = a.chunk[p] + tid; l < a.chunk[p + 1]; l += nthr) {
      u64 v = ll_piece<T, CT, OP>(a, a.src[0], l, fast);
      st_ll(to + 16 * (u64)(l - a.chunk[p]), (unsigned)v, (unsigned)(v >> 32), flag);
    }
  }
  for (i64 l = a.chunk[r] + tid; l < a.chunk[r + 1]; l += nthr) {
    const u64 at = 16 * (u64)(l - a.chunk[r]);
    CT acc[8 / sizeof(T)];
    for (int q = 0; q < D; q++) {
      Line v;
      if (q == r) {
        v.u = ll_piece<T, CT, OP>(a, a.src[0], l, fast);
      } else if (!ll_wait(a, a.stage[r] + (slot + q) * (u64)a.seg + at, flag, base + 1, q, &v.w[0], &v.w[1])) {
        return;
      }
#pragma unroll
      for (int k = 0; k < E; k++) acc[k] = q == 0 ? (CT)load_c(v.e[k]) : Combine<OP>::f(acc[k], (CT)load_c(v.e[k]));
    }
    Line o;
#pragma unroll
    for (int k = 0; k < E; k++) o.e[k] = Store<T>::st(finish<OP>(acc[k], D));
    for (int k = 1; k < D; k++) {
      int p = (r + k) % D;
      st_ll(a.stage[p] + (slot + r) * (u64)a.seg + half + at, o.w[0], o.w[1], flag);
    }
    ll_put_line<T>(a, l, o.u, out_fast);
  }
  for (int k = 1; k < D; k++) {
    int q = (r + D - k) % D;
    u64 from = a.stage[r] + (slot + q) * (u64)a.seg + half;
    for (i64 l = a.chunk[q] + tid; l < a.chunk[q + 1]; l += nthr) {
      Line v;
      if (!ll_wait(a, from + 16 * (u64)(l - a.chunk[q]), flag, base + 1, q, &v.w[0], &v.w[1])) return;
      ll_put_line<T>(a, l, v.u, out_fast);
    }
  }
}

// ---- LL128 (collective.cu): ll_kernel and ll2_kernel in 128-byte lines ----
// A lane holds 16 bytes of a line (the flag lane 8): 8-byte units u and
// u+1, u = 15l + 2j, as ll_piece and ll_put_line count them; its
// elements are reduced two units at a time.
template <typename T>
union Ll128Part {
  u64 u[2];
  T e[16 / sizeof(T)];
};

// ll128_piece is the calling lane's part of line l of the piece at src.
template <typename T, typename CT, int OP>
__device__ __forceinline__ Ll128Part<T> ll128_piece(const CollArgs& a, u64 src, i64 u, int j, bool fast) {
  Ll128Part<T> v;
  v.u[0] = ll_piece<T, CT, OP>(a, src, u, fast);
  v.u[1] = j < 7 ? ll_piece<T, CT, OP>(a, src, u + 1, fast) : 0;
  return v;
}

// ll128_fold folds v into acc (the first rank's part starts it).
template <typename T, typename CT, int OP>
__device__ __forceinline__ void ll128_fold(CT* acc, const Ll128Part<T>& v, bool first) {
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) acc[k] = first ? (CT)load_c(v.e[k]) : Combine<OP>::f(acc[k], (CT)load_c(v.e[k]));
}

template <typename T, typename CT, int OP>
__device__ __forceinline__ Ll128Part<T> ll128_finish(const CT* acc, int D) {
  Ll128Part<T> o;
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) o.e[k] = Store<T>::st(finish<OP>(acc[k], D));
  return o;
}

template <typename T>
__device__ __forceinline__ void ll128_put(const CollArgs& a, i64 u, int j, const Ll128Part<T>& o, bool fast) {
  ll_put_line<T>(a, u, o.u[0], fast);
  if (j < 7) ll_put_line<T>(a, u + 1, o.u[1], fast);
}

// ll128_reduce_line folds the calling lane's part (at, units u and u+1)
// of one line of every rank's piece into acc, in rank order: this rank's
// own read from own, each peer's waited for in this rank's staging.
// False when a wait failed (the kernel returns: the status says why).
template <typename T, typename CT, int OP>
__device__ __forceinline__ bool ll128_reduce_line(const CollArgs& a, const Ll128Launch& e, u64 own, i64 u, int j, u64 at, bool on, bool fast, CT* acc) {
  for (int q = 0; q < a.world; q++) {
    Ll128Part<T> v = {{0, 0}};
    if (q == a.rank) {
      if (on) v = ll128_piece<T, CT, OP>(a, own, u, j, fast);
    } else if (!ll128_wait(a, a.stage[a.rank] + (e.slot + q) * (u64)a.seg + at, on, e.flag, e.epoch, q, &v.u[0], &v.u[1])) {
      return false;
    }
    ll128_fold<T, CT, OP>(acc, v, q == 0);
  }
  return true;
}

// ll128_kernel (hir_ll128_*): ll_kernel's one hop through LL128 lines
// (a.n lines). A line's quarter warp sends it to every peer, then
// reduces it: the lane that reads a part of the input writes that part
// of the output, so the output may be the input itself.
template <typename T, typename CT, int OP>
__device__ void ll128_kernel(const CollArgs& a) {
  const Ll128Launch e = ll128_launch(a);
  const int D = a.world, r = a.rank;
  const Ll128Lanes w = ll128_lanes();
  const int j = w.j;
  const bool fast = (a.xtra & LL_FAST_SRC) != 0, out_fast = (a.dst[0] & 7) == 0;
  for (i64 l0 = 4 * w.warp; l0 < a.n; l0 += 4 * w.warps) {
    const i64 l = l0 + w.q, u = LL128_UNITS * l + 2 * j;
    const bool on = l < a.n;
    const u64 at = 128 * (u64)l + 16 * j;
    for (int k = 1; k < D; k++) {
      const int p = (r + k) % D;
      Ll128Part<T> v = {{0, 0}};
      if (on) v = ll128_piece<T, CT, OP>(a, a.src[p], u, j, fast);
      ll128_send(a.stage[p] + (e.slot + r) * (u64)a.seg + at, on, j, v.u[0], v.u[1], e.flag);
    }
    CT acc[16 / sizeof(T)];
    if (!ll128_reduce_line<T, CT, OP>(a, e, a.src[r], u, j, at, on, fast, acc)) return;
    if (on) ll128_put<T>(a, u, j, ll128_finish<T, CT, OP>(acc, D), out_fast);
  }
}

// ll128x2_kernel (hir_ll128x2_*): ll2_kernel's two hops through LL128
// lines: chunk c is lines [chunk[c], chunk[c+1]); hop one in the first
// half of each staging region, hop two in the second. Line l of chunk c
// is handled by the same lane in hop one and in hop two's receipt (the
// loops count lines from the chunk's start alike), so the output may be
// the input itself.
template <typename T, typename CT, int OP>
__device__ void ll128x2_kernel(const CollArgs& a) {
  const Ll128Launch e = ll128_launch(a);
  const int D = a.world, r = a.rank;
  const Ll128Lanes w = ll128_lanes();
  const int j = w.j;
  const bool fast = (a.xtra & LL_FAST_SRC) != 0, out_fast = (a.dst[0] & 7) == 0;
  const u64 half = (u64)a.seg / 2;
  for (int k = 1; k < D; k++) {
    const int p = (r + k) % D;
    const u64 to = a.stage[p] + (e.slot + r) * (u64)a.seg;
    const i64 len = a.chunk[p + 1] - a.chunk[p];
    for (i64 i0 = 4 * w.warp; i0 < len; i0 += 4 * w.warps) {
      const i64 i = i0 + w.q, u = LL128_UNITS * (a.chunk[p] + i) + 2 * j;
      const bool on = i < len;
      Ll128Part<T> v = {{0, 0}};
      if (on) v = ll128_piece<T, CT, OP>(a, a.src[0], u, j, fast);
      ll128_send(to + 128 * (u64)i + 16 * j, on, j, v.u[0], v.u[1], e.flag);
    }
  }
  {
    const i64 len = a.chunk[r + 1] - a.chunk[r];
    for (i64 i0 = 4 * w.warp; i0 < len; i0 += 4 * w.warps) {
      const i64 i = i0 + w.q, u = LL128_UNITS * (a.chunk[r] + i) + 2 * j;
      const bool on = i < len;
      const u64 at = 128 * (u64)i + 16 * j;
      CT acc[16 / sizeof(T)];
      if (!ll128_reduce_line<T, CT, OP>(a, e, a.src[0], u, j, at, on, fast, acc)) return;
      const Ll128Part<T> o = ll128_finish<T, CT, OP>(acc, D);
      for (int k = 1; k < D; k++) ll128_send(a.stage[(r + k) % D] + (e.slot + r) * (u64)a.seg + half + at, on, j, o.u[0], o.u[1], e.flag);
      if (on) ll128_put<T>(a, u, j, o, out_fast);
    }
  }
  for (int k = 1; k < D; k++) {
    const int q = (r + D - k) % D;
    const u64 from = a.stage[r] + (e.slot + q) * (u64)a.seg + half;
    const i64 len = a.chunk[q + 1] - a.chunk[q];
    for (i64 i0 = 4 * w.warp; i0 < len; i0 += 4 * w.warps) {
      const i64 i = i0 + w.q, u = LL128_UNITS * (a.chunk[q] + i) + 2 * j;
      const bool on = i < len;
      Ll128Part<T> v = {{0, 0}};
      if (!ll128_wait(a, from + 128 * (u64)i + 16 * j, on, e.flag, e.epoch, q, &v.u[0], &v.u[1])) return;
      if (on) ll128_put<T>(a, u, j, v, out_fast);
    }
  }
}

// ---- bulk: the LL protocol's large-piece mode (collective.cu) ----
#define BULK_VEC 0x10000 // xtra: every reduce target allows 16-byte vectors
#define MODE_DIRECT 32   // bulk2: hop two stores into the peers' outputs

// bulk_reduce_batch: units i0 + u*step (u < UN; vectors of V elements,
// or elements with V = 1) of the D pieces at from + q*seg, reduced in
// rank order q = 0..D-1 and finished (avg), stored at the same unit of
// out and, where fan, of every peer's target: its output at fan_off
// (MODE_DIRECT) or its staging (slot, this rank) at half. UN units of
// the next piece are loaded while the last piece's are combined.
template <typename T, typename CT, int OP, int V, int UN>
__device__ __forceinline__ void bulk_reduce_batch(const CollArgs& a, u64 from, i64 i0, i64 step, u64 out, bool fan, u64 fan_off, u64 half, u64 slot) {
  typedef VecT<T, V> U;
  const int D = a.world;
  U cur[UN];
  CT acc[UN][V];
#pragma unroll
  for (int u = 0; u < UN; u++) cur[u] = U::load(from, i0 + u * step);
  for (int q = 1; q < D; q++) {
    U nxt[UN];
#pragma unroll
    for (int u = 0; u < UN; u++) nxt[u] = U::load(from + (u64)q * a.seg, i0 + u * step);
#pragma unroll
    for (int u = 0; u < UN; u++)
#pragma unroll
      for (int e = 0; e < V; e++) acc[u][e] = q == 1 ? (CT)load_c(cur[u].e[e]) : Combine<OP>::f(acc[u][e], (CT)load_c(cur[u].e[e]));
#pragma unroll
    for (int u = 0; u < UN; u++) cur[u] = nxt[u];
  }
#pragma unroll
  for (int u = 0; u < UN; u++) {
    U o;
#pragma unroll
    for (int e = 0; e < V; e++) o.e[e] = Store<T>::st(finish<OP>(Combine<OP>::f(acc[u][e], (CT)load_c(cur[u].e[e])), D));
    cur[u] = o;
  }
#pragma unroll
  for (int u = 0; u < UN; u++) cur[u].store(out, i0 + u * step);
  if (!fan) return;
  for (int k = 1; k < D; k++) {
    int p = (a.rank + k) % D;
    u64 t = (a.mode & MODE_DIRECT) ? a.dst[p] + fan_off : a.stage[p] + (slot + a.rank) * (u64)a.seg + half;
#pragma unroll
    for (int u = 0; u < UN; u++) cur[u].store(t, i0 + u * step);
  }
}

// bulk_reduce: elements [lo, hi) of the pieces (lo a multiple of the
// vector width, hi too unless it ends the piece) through the block's
// threads, as bulk_reduce_batch; 16-byte vectors where xtra allows.
template <typename T, typename CT, int OP>
__device__ void bulk_reduce(const CollArgs& a, u64 from, i64 lo, i64 hi, u64 out, bool fan, u64 fan_off, u64 half, u64 slot) {
  const int V = 16 / (int)sizeof(T);
  const i64 t = threadIdx.x, nt = blockDim.x;
  if (a.xtra & BULK_VEC) {
    i64 vhi = hi / V;
    i64 i = lo / V + t;
    for (; i + (REDUCE_UN - 1) * nt < vhi; i += REDUCE_UN * nt) bulk_reduce_batch<T, CT, OP, V, REDUCE_UN>(a, from, i, nt, out, fan, fan_off, half, slot);
    for (; i < vhi; i += nt) bulk_reduce_batch<T, CT, OP, V, 1>(a, from, i, nt, out, fan, fan_off, half, slot);
    lo = vhi * V > lo ? vhi * V : lo;
  }
  for (i64 i = lo + t; i < hi; i += nt) bulk_reduce_batch<T, CT, OP, 1, 1>(a, from, i, nt, out, fan, fan_off, half, slot);
}

// bulk_kernel (hir_bulk_*): reduce_scatter and all_reduce of two ranks in
// bulk. src[p] is the piece for peer p (block p of the input, layout ls
// in bytes, for reduce_scatter; the whole input for all_reduce),
// tail_end its elements; every rank keeps its own piece in its staging
// too, and reduces the D pieces there in rank order into dst[0]. The
// output may be the input itself (each portion is staged before the
// block that staged it writes it).
template <typename T, typename CT, int OP>
__device__ void bulk_kernel(const CollArgs& a) {
  const i64 es = sizeof(T), V = 16 / sizeof(T);
  u64 slot;
  const u64 base = take_epoch_slot(a, 1, &slot);
  const int r = a.rank;
  const i64 lo = bulk_cut(a.tail_end, blockIdx.x, gridDim.x, V), hi = bulk_cut(a.tail_end, blockIdx.x + 1, gridDim.x, V);
  bulk_send(a, slot, base + 1, lo * es, hi * es, true);
  if (!bulk_wait(a, base + 1)) return;
  bulk_reduce<T, CT, OP>(a, a.stage[r] + slot * (u64)a.seg, lo, hi, a.dst[0], false, 0, 0, slot);
}

// bulk2_kernel (hir_bulk2_*): all_reduce in two hops in bulk (ll2_kernel's
// plan with plain data). Chunk c is elements [chunk[c], chunk[c+1]) of the
// flat input src[0]; in each of nseg rounds (a staging region's worth of
// every chunk) hop one sends chunk p's part to rank p (and keeps chunk
// r's), hop two reduces chunk r's part in rank order into dst[rank] and
// every peer's copy of it: straight into peer p's output dst[p]
// (MODE_DIRECT: the outputs are symmetric; p is inside this launch, since
// its hop one came, so nothing of p's reads its output now) or into p's
// staging at half (then in one round only); hop three waits for the
// peers' parts (and copies them out of the staging). Rounds alternate
// staging slots like launches (each takes a count of ll_slot) and raise
// flags 2j+1 and 2j+2. Each portion is read (hop one) before the block
// that read it writes it, so the output may be the input itself.
template <typename T, typename CT, int OP>
__device__ void bulk2_kernel(const CollArgs& a) {
  const i64 es = sizeof(T), V = 16 / sizeof(T);
  u64 first;
  const u64 base = take_epoch_slot(a, (u64)a.nseg, &first);
  const int D = a.world, r = a.rank;
  const i64 R = a.nseg;
  const i64 G = gridDim.x, b = blockIdx.x;
  const bool direct = (a.mode & MODE_DIRECT) != 0;
  const u64 half = direct ? 0 : (u64)a.seg / 2;
  const i64 S = (direct ? a.seg : a.seg / 2) / es; // elements of a chunk per round
  // Every round cuts its parts at the same places (those of the widest
  // part, Sc elements), so block b stages the same bytes in every round:
  // a block's own waits order its rounds, not its neighbours'.
  i64 W = 0;
  for (int c = 0; c < D; c++) W = a.chunk[c + 1] - a.chunk[c] > W ? a.chunk[c + 1] - a.chunk[c] : W;
  const i64 Sc = imin(S, W), plo = bulk_cut(Sc, b, G, V), phi = bulk_cut(Sc, b + 1, G, V);
  const Lay contig = {0, 0};
  for (i64 j = 0; j < R; j++) {
    const u64 slot = ll_slot_at(a, first, j), v = base + 1 + 2 * (u64)j;
    for (int k = 1; k <= D; k++) {
      int p = (r + k) % D; // this rank's own part last
      i64 c0 = imin(a.chunk[p] + j * S, a.chunk[p + 1]), len = imin(c0 + S, a.chunk[p + 1]) - c0;
      i64 lo = imin(plo, len), hi = imin(phi, len);
      bulk_move(a.stage[p] + (slot + r) * (u64)a.seg, contig, a.src[0] + c0 * es, contig, lo * es, hi * es, a.xtra & 0xff);
      if (k == D - 1) bulk_signal(a, v);
    }
    if (!bulk_wait(a, v)) return;
    {
      i64 c0 = imin(a.chunk[r] + j * S, a.chunk[r + 1]), len = imin(c0 + S, a.chunk[r + 1]) - c0;
      i64 lo = imin(plo, len), hi = imin(phi, len);
      bulk_reduce<T, CT, OP>(a, a.stage[r] + slot * (u64)a.seg, lo, hi, a.dst[r] + c0 * es, true, c0 * es, half, slot);
    }
    bulk_signal(a, v + 1);
    if (!direct) {
      if (!bulk_wait(a, v + 1)) return;
      for (int k = 1; k < D; k++) {
        int q = (r + D - k) % D;
        i64 c0 = imin(a.chunk[q] + j * S, a.chunk[q + 1]), len = imin(c0 + S, a.chunk[q + 1]) - c0;
        i64 lo = imin(plo, len), hi = imin(phi, len);
        bulk_move(a.dst[r] + c0 * es, contig, a.stage[r] + (slot + q) * (u64)a.seg + half, contig, lo * es, hi * es, (a.xtra >> 8) & 0xff);
      }
    }
  }
  if (direct) bulk_wait(a, base + 2 * (u64)R);
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
  u64 base; // the launch's signal base (take_epoch)
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
  if (threadIdx.x == 0 && recv) ok = wait_ge(a, slot(a.pad[r], PL_DATA, s.b, s.left), s.base + s.rx + 1, a.channel, PL_DATA, s.left);
  if (threadIdx.x == 32 && send && s.tx >= (u64)s.K)
    ok = wait_ge(a, slot(a.pad[r], PL_ACK, s.b, s.right), s.base + s.tx - s.K + 1, a.channel, PL_ACK, s.right);
  if (!block_and(ok)) return false;
  ring_pass<T, CT, OP>(a, f, lo, hi, recv ? ring_slot(a, a.stage[r], s, s.rx) : 0, send ? ring_slot(a, a.stage[s.right], s, s.tx) : 0);
  __syncthreads();
  if (threadIdx.x == 0 && send) put_signal(slot(a.pad[s.right], PL_DATA, s.b, r), s.base + s.tx + 1);
  if (threadIdx.x == 32 && recv) put_signal(slot(a.pad[s.left], PL_ACK, s.b, r), s.base + s.rx + 1);
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
  s.base = take_epoch(a);
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
  if (threadIdx.x == 0 && s.tx > 0) ok = wait_ge(a, slot(a.pad[s.r], PL_ACK, s.b, s.right), s.base + s.tx, a.channel, PL_ACK, s.right);
  block_and(ok);
}
