// emu.h: just enough of CUDA to run the generated kernels on the CPU
// (TestKernelsOnCPU, cpuexec_test.go): blocks one after another, a block's
// 256 threads as threads where the kernel meets across them (warp
// shuffles through a slot per lane and a barrier, __syncthreads as a
// barrier), else one after another; bf16 rounding as the PTX cvt does.
// Buf is a tensor placed at an aligned or a misaligned address (one
// element off, so the kernels take their one-element-a-thread paths),
// with outputs prefilled with a byte pattern that differs between runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <thread>
#include <barrier>
#include <vector>
#include <functional>
#include <random>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
struct U3 { unsigned x, y, z; };
static U3 blockIdx, blockDim, gridDim;
static thread_local U3 threadIdx;
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double f; memcpy(&f, &x, 8); return f; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline float __double2float_rz(double a) { return (float)a; }
struct hir_bf16 { unsigned short bits; };
static inline unsigned short emu_bf16(float a) { unsigned u; memcpy(&u, &a, 4); if (a != a) return 0x7fc0; u += 0x7fff + ((u >> 16) & 1); return u >> 16; }
static std::barrier<> *blockBar;
static std::barrier<> *warpBar[8];
static unsigned long long warpSlot[8][32];
static inline void __syncthreads() { blockBar->arrive_and_wait(); }
template <class T> static T __shfl_xor_sync(unsigned, T v, int off) {
  int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  memcpy(&warpSlot[w][l], &v, sizeof v);
  warpBar[w]->arrive_and_wait();
  T r; memcpy(&r, &warpSlot[w][l ^ off], sizeof r);
  warpBar[w]->arrive_and_wait();
  return r;
}
template <class T> static T lit(unsigned long long bits) {
  if constexpr (sizeof(T) == 4) { unsigned b = (unsigned)bits; T t; memcpy(&t, &b, 4); return t; }
  else { T t; memcpy(&t, &bits, 8); return t; }
}
static void launch(unsigned grid, bool threads, std::function<void()> fn) {
  gridDim = {grid, 1, 1}; blockDim = {256, 1, 1};
  if (!blockBar) { blockBar = new std::barrier<>(256); for (auto& w : warpBar) w = new std::barrier<>(32); }
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 0, 0};
    if (!threads) { for (unsigned t = 0; t < 256; ++t) { threadIdx = {t, 0, 0}; fn(); } continue; }
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < 256; ++t) ts.emplace_back([t, &fn] { threadIdx = {t, 0, 0}; fn(); });
    for (auto& t : ts) t.join();
  }
}
static std::mt19937_64 rng(7);
struct Buf {
  long long n; int size, dt; bool input;
  unsigned char* base; unsigned char* p;
  std::vector<unsigned char> data, res[2];
  void init(long long n_, int size_, int dt_, bool in) {
    n = n_; size = size_; dt = dt_; input = in;
    base = (unsigned char*)aligned_alloc(64, ((n + 2) * size + 63) / 64 * 64 + 64);
    data.resize(n * size);
    std::uniform_real_distribution<double> U(-2, 2);
    for (long long i = 0; i < n; ++i) {
      unsigned char* d = &data[i * size];
      double v = U(rng);
      switch (dt) {
        case 0: { float f = (float)v; memcpy(d, &f, 4); break; }
        case 1: memcpy(d, &v, 8); break;
        case 2: { unsigned short h = emu_bf16((float)v); memcpy(d, &h, 2); break; }
        case 3: { int x = (int)(v * 1000); memcpy(d, &x, 4); break; }
        case 4: { long long x = (long long)(v * 100000); memcpy(d, &x, 8); break; }
        case 5: { unsigned char x = v > 0; memcpy(d, &x, 1); break; }
      }
    }
  }
  void place(int mis) {
    p = base + mis * size;
    if (input) memcpy(p, data.data(), n * size);
    else memset(p, mis ? 0xAB : 0x55, n * size);
  }
  void save(int mis) { res[mis].assign(p, p + n * size); }
  double val(const std::vector<unsigned char>& r, long long i) {
    const unsigned char* d = &r[i * size];
    switch (dt) {
      case 0: { float f; memcpy(&f, d, 4); return f; }
      case 1: { double f; memcpy(&f, d, 8); return f; }
      case 2: { unsigned short h; memcpy(&h, d, 2); unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }
      case 3: { int x; memcpy(&x, d, 4); return x; }
      default: { long long x; memcpy(&x, d, 8); return (double)x; }
    }
  }
  int cmp(const char* desc, int arg) {
    if (res[0] == res[1]) return 0;
    long long nd = 0, first = -1; double maxe = 0;
    for (long long i = 0; i < n; ++i) {
      if (memcmp(&res[0][i * size], &res[1][i * size], size) == 0) continue;
      double a = val(res[0], i), b = val(res[1], i);
      double e = fabs(a - b) / (1 + fabs(b));
      if (!(e <= 1e-3) || dt >= 3) { if (first < 0) first = i; nd++; }
      if (e > maxe || e != e) maxe = e;
    }
    if (nd == 0) return 0;
    printf("MISMATCH %s: arg %d: %lld of %lld elements differ, first %lld (vec %g scalar %g), max rel %g\n", desc, arg, nd, n, first, val(res[0], first), val(res[1], first), maxe);
    return 1;
  }
};
