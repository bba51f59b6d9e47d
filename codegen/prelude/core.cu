template <typename T, int N> struct alignas(sizeof(T) * N) hir_vec { T v[N]; };

// Programmatic dependent launch (sm_90 and later): the runtime may start a
// kernel before the one ahead of it on the stream has ended. Every kernel
// begins here: wait until that one has ended and its writes are visible,
// then let the next kernel start early. Launched plainly, no-ops.
__device__ __forceinline__ void hir_pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename T>
__device__ __forceinline__ bool hir_aligned(const T* p, unsigned long long bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

__device__ __forceinline__ float hir_ld(float x) { return x; }
__device__ __forceinline__ double hir_ld(double x) { return x; }
__device__ __forceinline__ int hir_ld(int x) { return x; }
__device__ __forceinline__ long long hir_ld(long long x) { return x; }
__device__ __forceinline__ bool hir_ld(unsigned char x) { return x != 0; }

__device__ __forceinline__ float hir_add(float a, float b) { return a + b; }
__device__ __forceinline__ double hir_add(double a, double b) { return a + b; }
__device__ __forceinline__ int hir_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ long long hir_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ float hir_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double hir_sub(double a, double b) { return a - b; }
__device__ __forceinline__ int hir_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ long long hir_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ float hir_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double hir_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int hir_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ long long hir_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ float hir_neg(float a) { return -a; }
__device__ __forceinline__ double hir_neg(double a) { return -a; }
__device__ __forceinline__ int hir_neg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ long long hir_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
// Integer division truncates; x / 0 is 0 and MIN / -1 wraps to MIN.
__device__ __forceinline__ float hir_div(float a, float b) { return a / b; }
__device__ __forceinline__ double hir_div(double a, double b) { return a / b; }
__device__ __forceinline__ int hir_div(int a, int b) { return b == 0 ? 0 : b == -1 ? hir_neg(a) : a / b; }
__device__ __forceinline__ long long hir_div(long long a, long long b) { return b == 0 ? 0 : b == -1 ? hir_neg(a) : a / b; }
__device__ __forceinline__ float hir_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double hir_abs(double a) { return fabs(a); }
__device__ __forceinline__ int hir_abs(int a) { return a < 0 ? hir_neg(a) : a; }
__device__ __forceinline__ long long hir_abs(long long a) { return a < 0 ? hir_neg(a) : a; }

// max and min: a NaN operand gives NaN; of +0 and -0, max is +0 and min -0.
__device__ __forceinline__ float hir_max(float a, float b) { return a != a || b != b ? a + b : a > b ? a : b > a ? b : __float_as_int(a) < 0 ? b : a; }
__device__ __forceinline__ double hir_max(double a, double b) { return a != a || b != b ? a + b : a > b ? a : b > a ? b : __double_as_longlong(a) < 0 ? b : a; }
__device__ __forceinline__ int hir_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ long long hir_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ float hir_min(float a, float b) { return a != a || b != b ? a + b : a < b ? a : b < a ? b : __float_as_int(a) < 0 ? a : b; }
__device__ __forceinline__ double hir_min(double a, double b) { return a != a || b != b ? a + b : a < b ? a : b < a ? b : __double_as_longlong(a) < 0 ? a : b; }
__device__ __forceinline__ int hir_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ long long hir_min(long long a, long long b) { return a < b ? a : b; }
// relu is max(x, 0): NaN stays NaN, -0 gives +0.
__device__ __forceinline__ float hir_relu(float a) { return a > 0.0f || a != a ? a : 0.0f; }
__device__ __forceinline__ double hir_relu(double a) { return a > 0.0 || a != a ? a : 0.0; }
__device__ __forceinline__ int hir_relu(int a) { return a > 0 ? a : 0; }
__device__ __forceinline__ long long hir_relu(long long a) { return a > 0 ? a : 0; }

__device__ __forceinline__ float hir_exp(float a) { return expf(a); }
__device__ __forceinline__ double hir_exp(double a) { return exp(a); }
__device__ __forceinline__ float hir_log(float a) { return logf(a); }
__device__ __forceinline__ double hir_log(double a) { return log(a); }
__device__ __forceinline__ float hir_tanh(float a) { return tanhf(a); }
__device__ __forceinline__ double hir_tanh(double a) { return tanh(a); }
__device__ __forceinline__ float hir_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }
__device__ __forceinline__ double hir_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
// gelu, the exact form: x * (1 + erf(x / sqrt(2))) / 2.
__device__ __forceinline__ float hir_gelu(float a) { return a * (1.0f + erff(a * 0.70710678118654752f)) * 0.5f; }
__device__ __forceinline__ double hir_gelu(double a) { return a * (1.0 + erf(a * 0.70710678118654752)) * 0.5; }

// float -> int truncates toward zero; NaN is 0; out of range saturates.
__device__ __forceinline__ int hir_f2i32(double a) { return a != a ? 0 : a >= 2147483648.0 ? 2147483647 : a <= -2147483648.0 ? (-2147483647 - 1) : (int)a; }
__device__ __forceinline__ long long hir_f2i64(double a) { return a != a ? 0 : a >= 9223372036854775808.0 ? 9223372036854775807LL : a <= -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)a; }
