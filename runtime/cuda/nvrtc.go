package cuda

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NVRTCLibrary is the file name NVRTC is loaded by (HIR_CUDA_LIBNVRTC
// overrides it).
const NVRTCLibrary = "libnvrtc.so.13"

var (
	nvrtcOnce sync.Once
	nvrtcLib  *driver // same symbol cache; results are nvrtcResult, not CUresult
	nvrtcErr  error
)

func loadNVRTC() (*driver, error) {
	nvrtcOnce.Do(func() {
		path := NVRTCLibrary
		if p := os.Getenv("HIR_CUDA_LIBNVRTC"); p != "" {
			path = p
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			nvrtcErr = fmt.Errorf("cannot load %s: %v", path, err)
			return
		}
		nvrtcLib = &driver{path: path, handle: h, syms: map[string]uintptr{}}
	})
	return nvrtcLib, nvrtcErr
}

// nvrtcCall runs an NVRTC entry point; a failure names the call and
// nvrtcGetErrorString's text (e.g. NVRTC_ERROR_COMPILATION).
//
//go:uintptrescapes
func nvrtcCall(lib *driver, name string, args ...uintptr) error {
	p, err := lib.sym(name)
	if err != nil {
		return &Error{Call: name, Code: errNotSupported, Name: "symbol not found", Desc: err.Error()}
	}
	r1, _, _ := purego.SyscallN(p, args...)
	code := Result(int32(r1))
	if code == 0 {
		return nil
	}
	e := &Error{Call: name, Code: code, Name: fmt.Sprintf("nvrtcResult(%d)", code)}
	if gs, err := lib.sym("nvrtcGetErrorString"); err == nil {
		r, _, _ := purego.SyscallN(gs, uintptr(code))
		if r != 0 {
			e.Name = goString(*(**byte)(unsafe.Pointer(&r)))
		}
	}
	return e
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
	lib, err := loadNVRTC()
	if err != nil {
		return 0, 0, err
	}
	var major, minor int32
	err = nvrtcCall(lib, "nvrtcVersion", uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))
	return int(major), int(minor), err
}

// CompileCUDA compiles CUDA C++ source to a cubin for the compute
// capability cc (e.g. [2]int{9, 0}). name is the program's file name in
// messages; opts are extra NVRTC options.
func CompileCUDA(src, name string, cc [2]int, opts ...string) ([]byte, error) {
	lib, err := loadNVRTC()
	if err != nil {
		return nil, &CompileError{Name: name, Err: err}
	}
	csrc, cname := cString(src), cString(name)
	var prog uintptr
	if err := nvrtcCall(lib, "nvrtcCreateProgram", uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); err != nil {
		return nil, &CompileError{Name: name, Err: err}
	}
	defer nvrtcCall(lib, "nvrtcDestroyProgram", uintptr(unsafe.Pointer(&prog)))

	all := append([]string{fmt.Sprintf("--gpu-architecture=sm_%d%d", cc[0], cc[1]), "--std=c++17"}, opts...)
	cOpts := make([][]byte, len(all))
	ptrs := make([]*byte, len(all))
	for i, o := range all {
		cOpts[i] = cString(o)
		ptrs[i] = &cOpts[i][0]
	}
	compileErr := nvrtcCall(lib, "nvrtcCompileProgram", prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	log := programLog(lib, prog)
	if compileErr != nil {
		return nil, &CompileError{Name: name, Err: compileErr, Log: log}
	}
	var size uint64
	if err := nvrtcCall(lib, "nvrtcGetCUBINSize", prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, &CompileError{Name: name, Err: err, Log: log}
	}
	cubin := make([]byte, size)
	if size > 0 {
		if err := nvrtcCall(lib, "nvrtcGetCUBIN", prog, uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
			return nil, &CompileError{Name: name, Err: err, Log: log}
		}
	}
	return cubin, nil
}

func programLog(lib *driver, prog uintptr) string {
	var size uint64
	if nvrtcCall(lib, "nvrtcGetProgramLogSize", prog, uintptr(unsafe.Pointer(&size))) != nil || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if nvrtcCall(lib, "nvrtcGetProgramLog", prog, uintptr(unsafe.Pointer(&buf[0]))) != nil {
		return ""
	}
	return goString(&buf[0])
}
