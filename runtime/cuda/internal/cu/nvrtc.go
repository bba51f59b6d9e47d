package cu

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NVRTC is libnvrtc: one Proc per entry point runtime/cuda uses. Its
// calls fail with an *Error whose Code is the nvrtcResult and whose Name
// is nvrtcGetErrorString's text (e.g. NVRTC_ERROR_COMPILATION).
type NVRTC struct {
	library

	Version           Proc `cu:"nvrtcVersion"`
	CreateProgram     Proc `cu:"nvrtcCreateProgram"`
	DestroyProgram    Proc `cu:"nvrtcDestroyProgram"`
	CompileProgram    Proc `cu:"nvrtcCompileProgram"`
	GetCUBINSize      Proc `cu:"nvrtcGetCUBINSize"`
	GetCUBIN          Proc `cu:"nvrtcGetCUBIN"`
	GetPTXSize        Proc `cu:"nvrtcGetPTXSize"`
	GetPTX            Proc `cu:"nvrtcGetPTX"`
	GetProgramLogSize Proc `cu:"nvrtcGetProgramLogSize"`
	GetProgramLog     Proc `cu:"nvrtcGetProgramLog"`
	GetErrorString    Proc `cu:"nvrtcGetErrorString"`
}

// OpenNVRTC opens NVRTC at path and resolves its entry points.
func OpenNVRTC(path string) (*NVRTC, error) {
	h, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %w", path, err)
	}
	n := &NVRTC{library: library{path: path, handle: h}}
	n.fail = n.errorFor
	n.resolve(n)
	return n, nil
}

func (n *NVRTC) errorFor(call string, r uintptr) error {
	code := Result(int32(r))
	e := &Error{Call: call, Code: code, Name: fmt.Sprintf("nvrtcResult(%d)", code)}
	if gs := n.GetErrorString.addr; gs != 0 {
		r, _, _ := purego.SyscallN(gs, uintptr(code))
		if r != 0 {
			e.Name = GoString(*(**byte)(unsafe.Pointer(&r)))
		}
	}
	return e
}
