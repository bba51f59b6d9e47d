package codegen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clangShim gives clang's CUDA front end (with no CUDA installation) what
// NVRTC provides implicitly: the attribute keywords, the math functions
// (as libdevice calls, left unresolved in the PTX) and the intrinsics the
// kernels use.
const clangShim = `#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(n) __attribute__((launch_bounds(n)))
#include <__clang_cuda_builtin_vars.h>
extern "C" __device__ float __nv_expf(float); extern "C" __device__ double __nv_exp(double);
extern "C" __device__ float __nv_logf(float); extern "C" __device__ double __nv_log(double);
extern "C" __device__ float __nv_tanhf(float); extern "C" __device__ double __nv_tanh(double);
extern "C" __device__ float __nv_erff(float); extern "C" __device__ double __nv_erf(double);
__device__ inline float expf(float x) { return __nv_expf(x); }
__device__ inline double exp(double x) { return __nv_exp(x); }
__device__ inline float logf(float x) { return __nv_logf(x); }
__device__ inline double log(double x) { return __nv_log(x); }
__device__ inline float tanhf(float x) { return __nv_tanhf(x); }
__device__ inline double tanh(double x) { return __nv_tanh(x); }
__device__ inline float erff(float x) { return __nv_erff(x); }
__device__ inline double erf(double x) { return __nv_erf(x); }
__device__ inline float fabsf(float x) { return __builtin_fabsf(x); }
__device__ inline double fabs(double x) { return __builtin_fabs(x); }
__device__ inline float __int_as_float(int x) { return __nvvm_bitcast_i2f(x); }
__device__ inline int __float_as_int(float x) { return __nvvm_bitcast_f2i(x); }
__device__ inline double __longlong_as_double(long long x) { return __nvvm_bitcast_ll2d(x); }
__device__ inline long long __double_as_longlong(double x) { return __nvvm_bitcast_d2ll(x); }
__device__ inline float __double2float_rz(double x) { return __nvvm_d2f_rz(x); }
__device__ inline int __shfl_xor_sync(unsigned m, int v, int l) { return __nvvm_shfl_sync_bfly_i32(m, v, l, 0x1f); }
__device__ inline float __shfl_xor_sync(unsigned m, float v, int l) { return __nvvm_shfl_sync_bfly_f32(m, v, l, 0x1f); }
__device__ inline long long __shfl_xor_sync(unsigned m, long long v, int l) {
  int lo = __nvvm_shfl_sync_bfly_i32(m, (int)v, l, 0x1f), hi = __nvvm_shfl_sync_bfly_i32(m, (int)(v >> 32), l, 0x1f);
  return ((long long)hi << 32) | (unsigned)lo;
}
__device__ inline double __shfl_xor_sync(unsigned m, double v, int l) { return __longlong_as_double(__shfl_xor_sync(m, __double_as_longlong(v), l)); }
`

// TestKernelsCompileWithClang compiles every golden kernel (fusions and
// the tiled matmul) to PTX with clang's CUDA front end where clang is
// installed: the GPU machine compiles them with NVRTC, and this catches a
// kernel that is not valid CUDA C++ before that.
func TestKernelsCompileWithClang(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang is not installed")
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "shim.h")
	require.NoError(t, os.WriteFile(shim, []byte(clangShim), 0o600))
	files, _ := filepath.Glob(filepath.Join("testdata", "*.cu"))
	more, _ := filepath.Glob(filepath.Join("testdata", "matmul", "*.cu"))
	files = append(files, more...)
	require.GreaterOrEqual(t, len(files), 30, "golden kernels")
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".cu"), func(t *testing.T) {
			t.Parallel()
			ptx := filepath.Join(dir, filepath.Base(f)+".ptx")
			out, err := exec.Command(clang, "-x", "cuda", "--cuda-gpu-arch=sm_80", "-nocudainc", "-nocudalib",
				"--cuda-device-only", "-std=c++17", "-Xclang", "-target-feature", "-Xclang", "+ptx70",
				"-include", shim, "-S", "-o", ptx, f).CombinedOutput()
			require.NoError(t, err, "%s", out)
			text, _ := os.ReadFile(ptx)
			assert.True(t, strings.Contains(string(text), ".entry hir_"), "the PTX has no hir_ entry point")
		})
	}
}
