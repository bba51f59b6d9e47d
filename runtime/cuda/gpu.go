package cuda

import (
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// The device layer (package internal/gpu: the driver, probe, NVRTC and the
// kernel cache, memory and VMM mappings, streams, events, graphs) is
// internal; what it offers the package's users is named here.

// Library names and the kernel cache's variable.
const (
	DriverLibrary  = gpu.DriverLibrary
	NVRTCLibrary   = gpu.NVRTCLibrary
	EnvKernelCache = gpu.EnvKernelCache
)

type (
	Result           = gpu.Result
	Error            = gpu.Error
	CompileError     = gpu.CompileError
	SourceError      = gpu.SourceError
	DeviceInfo       = gpu.DeviceInfo
	ProbeResult      = gpu.ProbeResult
	Stats            = gpu.Stats
	Module           = gpu.Module
	Function         = gpu.Function
	Dim3             = gpu.Dim3
	KernelCacheStats = gpu.KernelCacheStats
)

// ErrUnsupported marks operations the CUDA runtime does not do yet.
var ErrUnsupported = gpu.ErrUnsupported

// IsResult reports whether err is (or wraps) a driver error with code.
func IsResult(err error, code Result) bool { return gpu.IsResult(err, code) }

// Probe checks, once per process, that the driver loads, initialises and
// shows devices that support VMM and POSIX-fd handles (gpu.Probe).
func Probe() ProbeResult { return gpu.Probe() }

// ElapsedMillis is the time between two recorded events, in milliseconds.
func ElapsedMillis(start, end runtime.Event) (float32, error) { return gpu.ElapsedMillis(start, end) }

// KernelCache reports the process's kernel-cache counters.
func KernelCache() KernelCacheStats { return gpu.KernelCache() }

// NVRTCVersion is the loaded NVRTC's version (major, minor).
func NVRTCVersion() (int, int, error) { return gpu.NVRTCVersion() }

// CompileCUDA compiles CUDA C++ source to a cubin for the compute
// capability cc (gpu.CompileCUDA).
func CompileCUDA(src, name string, cc [2]int, opts ...string) ([]byte, error) {
	return gpu.CompileCUDA(src, name, cc, opts...)
}

// CompileCUDAToPTX is CompileCUDA to PTX text (gpu.CompileCUDAToPTX).
func CompileCUDAToPTX(src, name string, cc [2]int, opts ...string) ([]byte, error) {
	return gpu.CompileCUDAToPTX(src, name, cc, opts...)
}
