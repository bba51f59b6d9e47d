package cu

import (
	"fmt"
	"strings"
)

// Result is a CUresult, the status every driver call returns (NVRTC's
// nvrtcResult travels in it too).
type Result int32

// The results runtime/cuda branches on. The full name table is
// resultNames; the driver's own cuGetErrorName is preferred when loaded.
const (
	Success             Result = 0
	ErrInvalidValue     Result = 1
	ErrOutOfMemory      Result = 2
	ErrNotInitialized   Result = 3
	ErrNoDevice         Result = 100
	ErrInvalidDevice    Result = 101
	ErrNotReady         Result = 600
	ErrPeerAccessUnsupp Result = 217
	ErrNotPermitted     Result = 800
	ErrNotSupported     Result = 801
)

// resultNames maps CUresult codes to their cuda.h names, used when the
// driver is not loaded (or cuGetErrorName itself fails) so an error still
// reads as the header spells it.
var resultNames = map[Result]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED",
	34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT", 202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
	205: "CUDA_ERROR_MAP_FAILED", 206: "CUDA_ERROR_UNMAP_FAILED", 208: "CUDA_ERROR_ALREADY_MAPPED",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 211: "CUDA_ERROR_NOT_MAPPED", 217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	300: "CUDA_ERROR_INVALID_SOURCE", 301: "CUDA_ERROR_FILE_NOT_FOUND", 304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE", 401: "CUDA_ERROR_ILLEGAL_STATE", 500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT", 704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", 719: "CUDA_ERROR_LAUNCH_FAILED",
	800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED", 999: "CUDA_ERROR_UNKNOWN",
}

// Error is a failed driver or NVRTC call: the call's name, the code and
// the code's name as cuda.h (or nvrtc.h) spells it. runtime/cuda exports
// it as cuda.Error.
type Error struct {
	Call string // e.g. "cuMemCreate"
	Code Result
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // the driver's description, when it gave one
}

func (e *Error) Error() string {
	if e.Desc != "" && !strings.EqualFold(e.Desc, e.Name) {
		return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Desc)
	}
	return fmt.Sprintf("%s: %s", e.Call, e.Name)
}

// ResultName is the cuda.h name of code without asking the driver.
func ResultName(code Result) string {
	if n, ok := resultNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", int32(code))
}
