
#define MAXD 8
struct Layout {
  long long n;
  int ndim;
  int pad;
  long long shape[MAXD];
  long long dst[MAXD];
  long long src[MAXD];
};
template <typename T>
__device__ void strided(T* d, const T* s, const Layout& l) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < l.n; i += step) {
    long long rem = i, so = 0, doff = 0;
    for (int k = l.ndim - 1; k >= 0; --k) {
      long long c = rem % l.shape[k];
      rem /= l.shape[k];
      so += c * l.src[k];
      doff += c * l.dst[k];
    }
    d[doff] = s[so];
  }
}
extern "C" __global__ void hir_strided_copy_1(unsigned char* d, const unsigned char* s, Layout l) { pdl_begin(); strided(d, s, l); }
extern "C" __global__ void hir_strided_copy_2(unsigned short* d, const unsigned short* s, Layout l) { pdl_begin(); strided(d, s, l); }
extern "C" __global__ void hir_strided_copy_4(unsigned int* d, const unsigned int* s, Layout l) { pdl_begin(); strided(d, s, l); }
extern "C" __global__ void hir_strided_copy_8(unsigned long long* d, const unsigned long long* s, Layout l) { pdl_begin(); strided(d, s, l); }
