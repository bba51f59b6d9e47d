
// Device loops in graph mode (graph_loop.go): a loop body captured once
// into the body graph of a WHILE conditional node ends with hir_loop_next,
// which counts the trip and keeps the loop going while trips remain;
// hir_loop_start, just before the node, zeroes the count and opens the
// condition. Both live on the device, so every replay, and every trip of
// an enclosing device loop, runs the loop from its first trip. (A
// handle's default value is assigned when the top graph launches, not
// when an enclosing loop's body runs again: a nested loop would find its
// condition closed by its last trip.)

typedef unsigned long long hir_cond_handle;

#ifndef HIR_BUILTIN_SET_CONDITIONAL
// The device runtime's setter (cuda_device_runtime_api.h declares it the
// same way; ptxas resolves it, no device runtime library is linked).
extern "C" __device__ void cudaGraphSetConditional(hir_cond_handle handle, unsigned int value);
#endif

extern "C" __global__ void hir_loop_start(hir_cond_handle handle, unsigned long long *trip) {
  *trip = 0;
  cudaGraphSetConditional(handle, 1u);
}

extern "C" __global__ void hir_loop_next(hir_cond_handle handle, unsigned long long *trip, unsigned long long trips) {
  unsigned long long t = *trip + 1;
  *trip = t;
  cudaGraphSetConditional(handle, t < trips ? 1u : 0u);
}
