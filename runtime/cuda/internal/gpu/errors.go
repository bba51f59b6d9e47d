package gpu

import (
	"errors"
	"fmt"

	"github.com/hirlab/hir/runtime/cuda/internal/cu"
)

// Result is a CUresult, the status every driver call returns.
type Result = cu.Result

// The results this package branches on (the bindings, internal/cu, hold
// the full name table; the driver's own cuGetErrorName is preferred).
const (
	success             = cu.Success
	ErrInvalidValue     = cu.ErrInvalidValue
	ErrOutOfMemory      = cu.ErrOutOfMemory
	errNotInitialized   = cu.ErrNotInitialized
	ErrNoDevice         = cu.ErrNoDevice
	errInvalidDevice    = cu.ErrInvalidDevice
	errNotReady         = cu.ErrNotReady
	errPeerAccessUnsupp = cu.ErrPeerAccessUnsupp
	errNotPermitted     = cu.ErrNotPermitted
	errNotSupported     = cu.ErrNotSupported
)

// Error is a failed driver or NVRTC call: the call's name, the code and
// the code's name as cuda.h (or nvrtc.h) spells it:
//
//	type Error struct {
//		Call string // e.g. "cuMemCreate"
//		Code Result
//		Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
//		Desc string // the driver's description, when it gave one
//	}
type Error = cu.Error

// IsResult reports whether err is (or wraps) a driver error with code.
func IsResult(err error, code Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// resultName is the cuda.h name of code without asking the driver.
func ResultName(code Result) string { return cu.ResultName(code) }

// ErrUnsupported marks operations the CUDA runtime does not do yet.
var ErrUnsupported = errors.New("unsupported on cuda yet")

func Unsupported(what string) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, what)
}
