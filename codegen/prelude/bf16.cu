struct hir_bf16 { unsigned short bits; };
__device__ __forceinline__ float hir_ld(hir_bf16 x) { return __int_as_float((int)((unsigned)x.bits << 16)); }
__device__ __forceinline__ hir_bf16 hir_st_bf16(float a) { hir_bf16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(a)); return h; }
__device__ __forceinline__ float hir_round_bf16(float a) { return hir_ld(hir_st_bf16(a)); }
__device__ __forceinline__ float hir_round_bf16(double a) { return hir_ld(hir_st_bf16(hir_narrow(a))); }
