__device__ __forceinline__ float hir_narrow(double a) {
  float t = __double2float_rz(a);
  if (t == t && (double)t != a) t = __int_as_float(__float_as_int(t) | 1);
  return t;
}
