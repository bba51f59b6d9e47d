
// Device loops in graph mode (graph_loop.go): a loop body captured once
// into the body graph of a WHILE conditional node ends with this kernel,
// which counts the trip and keeps the loop going while trips remain. The
// count lives on the device (zeroed by a memset node before the loop), so
// every replay runs the loop from its first trip.

typedef unsigned long long hir_cond_handle;

#ifndef HIR_BUILTIN_SET_CONDITIONAL
// The device runtime's setter (cuda_device_runtime_api.h declares it the
// same way; ptxas resolves it, no device runtime library is linked).
extern "C" __device__ void cudaGraphSetConditional(hir_cond_handle handle, unsigned int value);
#endif

extern "C" __global__ void hir_loop_next(hir_cond_handle handle, unsigned long long *trip, unsigned long long trips) {
  unsigned long long t = *trip + 1;
  *trip = t;
  cudaGraphSetConditional(handle, t < trips ? 1u : 0u);
}
