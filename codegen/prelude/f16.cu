struct hir_f16 { unsigned short bits; };
__device__ __forceinline__ float hir_ld(hir_f16 x) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits)); return f; }
__device__ __forceinline__ hir_f16 hir_st_f16(float a) { hir_f16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(a)); return h; }
__device__ __forceinline__ float hir_round_f16(float a) { return hir_ld(hir_st_f16(a)); }
__device__ __forceinline__ float hir_round_f16(double a) { return hir_ld(hir_st_f16(hir_narrow(a))); }
