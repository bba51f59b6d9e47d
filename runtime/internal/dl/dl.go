// Package dl opens NVIDIA's shared libraries (libcuda, NVRTC, cuBLAS,
// NCCL) for runtime/cuda and runtime/nccl. On linux it is purego's
// dlopen and dlsym, no cgo; elsewhere Open fails with ErrNeedsLinux, so
// the CUDA backend builds on every platform Go does and says, when asked
// for, why it cannot run there.
package dl

import (
	"fmt"
	"runtime"
)

// ErrNeedsLinux is Open's error on a platform other than linux: the CUDA
// backend loads the NVIDIA driver's shared libraries, which hir uses on
// linux only.
var ErrNeedsLinux = fmt.Errorf("the cuda backend needs linux (this hirrun is built for %s/%s)", runtime.GOOS, runtime.GOARCH)
