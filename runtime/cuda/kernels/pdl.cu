// Programmatic dependent launch (gpu.Device.LaunchOwn, sm_90 and later),
// first in every module the runtime compiles of its own (kernels.go):
// a kernel may be started before the one ahead of it on its stream has
// ended. Every entry point begins here: it waits until that kernel has
// ended and its writes are visible (nothing before this line touches
// memory), then lets the next kernel on the stream start early, to wait
// in turn. Elsewhere, or launched plainly, these are no-ops.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
