package gpu

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime/cuda/internal/cu"
)

// NVRTCLibrary is the file name NVRTC is loaded by (HIR_CUDA_LIBNVRTC
// overrides it).
const NVRTCLibrary = "libnvrtc.so.13"

var (
	nvrtcOnce sync.Once
	nvrtcLib  *cu.NVRTC
	nvrtcErr  error
)

func LoadNVRTC() (*cu.NVRTC, error) {
	nvrtcOnce.Do(func() {
		path := NVRTCLibrary
		if p := os.Getenv("HIR_CUDA_LIBNVRTC"); p != "" {
			path = p
		}
		nvrtcLib, nvrtcErr = cu.OpenNVRTC(path)
	})
	return nvrtcLib, nvrtcErr
}

// CompileError is a failed NVRTC compilation with the compiler's log.
type CompileError struct {
	Name string
	Err  error
	Log  string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("nvrtc: compiling %s: %v\n%s", e.Name, e.Err, strings.TrimSpace(e.Log))
}

func (e *CompileError) Unwrap() error { return e.Err }

// NVRTCVersion is the loaded NVRTC's version (major, minor).
func NVRTCVersion() (int, int, error) {
	lib, err := LoadNVRTC()
	if err != nil {
		return 0, 0, err
	}
	var major, minor int32
	err = lib.Version.Call(uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))
	return int(major), int(minor), err
}

// CompileCUDA compiles CUDA C++ source to a cubin for the compute
// capability cc (e.g. [2]int{9, 0}). name is the program's file name in
// messages; opts are extra NVRTC options.
func CompileCUDA(src, name string, cc [2]int, opts ...string) ([]byte, error) {
	return compileCUDA(src, name, cc, false, opts...)
}

// CompileCUDAToPTX is CompileCUDA to PTX text (NUL-terminated, as
// cuModuleLoadData takes it): the driver then finishes the compilation
// when the module loads.
func CompileCUDAToPTX(src, name string, cc [2]int, opts ...string) ([]byte, error) {
	return compileCUDA(src, name, cc, true, opts...)
}

func compileCUDA(src, name string, cc [2]int, ptx bool, opts ...string) ([]byte, error) {
	lib, err := LoadNVRTC()
	if err != nil {
		return nil, &CompileError{Name: name, Err: err}
	}
	csrc, cname := cu.CString(src), cu.CString(name)
	var prog uintptr
	if err := lib.CreateProgram.Call(uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); err != nil {
		return nil, &CompileError{Name: name, Err: err}
	}
	defer lib.DestroyProgram.Call(uintptr(unsafe.Pointer(&prog)))

	arch := fmt.Sprintf("--gpu-architecture=sm_%d%d", cc[0], cc[1])
	if ptx {
		arch = fmt.Sprintf("--gpu-architecture=compute_%d%d", cc[0], cc[1])
	}
	all := append([]string{arch, "--std=c++17"}, opts...)
	cOpts := make([][]byte, len(all))
	ptrs := make([]*byte, len(all))
	for i, o := range all {
		cOpts[i] = cu.CString(o)
		ptrs[i] = &cOpts[i][0]
	}
	compileErr := lib.CompileProgram.Call(prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	log := programLog(lib, prog)
	if compileErr != nil {
		return nil, &CompileError{Name: name, Err: compileErr, Log: log}
	}
	getSize, get := &lib.GetCUBINSize, &lib.GetCUBIN
	if ptx {
		getSize, get = &lib.GetPTXSize, &lib.GetPTX
	}
	var size uint64
	if err := getSize.Call(prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, &CompileError{Name: name, Err: err, Log: log}
	}
	cubin := make([]byte, size)
	if size > 0 {
		if err := get.Call(prog, uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
			return nil, &CompileError{Name: name, Err: err, Log: log}
		}
	}
	return cubin, nil
}

func programLog(lib *cu.NVRTC, prog uintptr) string {
	var size uint64
	if lib.GetProgramLogSize.Call(prog, uintptr(unsafe.Pointer(&size))) != nil || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if lib.GetProgramLog.Call(prog, uintptr(unsafe.Pointer(&buf[0]))) != nil {
		return ""
	}
	return cu.GoString(&buf[0])
}
