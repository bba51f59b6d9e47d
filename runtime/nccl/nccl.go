// Package nccl binds NCCL (libnccl.so.2) through purego, without cgo: the
// unique id, communicators, the collectives hir needs and grouped
// point-to-point transfers. It knows nothing of hir's devices: buffers are
// device addresses and streams are CUstream handles, so runtime/cuda (which
// imports this package) hands it what it already holds.
//
// NCCL runs inside whatever CUDA context is current on the calling thread;
// the caller makes its device's primary context current (runtime/cuda does
// every call inside its withCtx).
package nccl

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/internal/dl"
)

// Library is the file name NCCL is loaded by; HIR_NCCL_LIBRARY overrides it.
const Library = "libnccl.so.2"

// UniqueIDBytes is sizeof(ncclUniqueId).
const UniqueIDBytes = 128

// UniqueID is ncclUniqueId: rank 0 makes it, every rank passes it to
// InitRank. It is plain bytes, so it travels through the job's store.
type UniqueID [UniqueIDBytes]byte

// Result is ncclResult_t.
type Result int32

// ncclResult_t values (nccl.h).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

var resultNames = map[Result]string{
	Success: "ncclSuccess", UnhandledCudaError: "ncclUnhandledCudaError", SystemError: "ncclSystemError",
	InternalError: "ncclInternalError", InvalidArgument: "ncclInvalidArgument", InvalidUsage: "ncclInvalidUsage",
	RemoteError: "ncclRemoteError", InProgress: "ncclInProgress", Timeout: "ncclTimeout",
}

func (r Result) String() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("ncclResult_t(%d)", int32(r))
}

// Error is a failed NCCL call: the call, the result and NCCL's own words
// (ncclGetErrorString, and ncclGetLastError where it said more).
type Error struct {
	Call   string
	Code   Result
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Call, e.Code, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Call, e.Code)
}

// ErrUnavailable matches the error Load returns when NCCL cannot be used.
var ErrUnavailable = errors.New("nccl unavailable")

// DataType is ncclDataType_t.
type DataType int32

// ncclDataType_t values (nccl.h).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// RedOp is ncclRedOp_t.
type RedOp int32

// ncclRedOp_t values (nccl.h).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// DataTypeOf maps a hir dtype to NCCL's; bool moves as bytes (it is never
// reduced).
func DataTypeOf(dt ir.DType) (DataType, error) {
	switch dt {
	case ir.F32:
		return Float32, nil
	case ir.F16:
		return Float16, nil
	case ir.BF16:
		return Bfloat16, nil
	case ir.F64:
		return Float64, nil
	case ir.I32:
		return Int32, nil
	case ir.I64:
		return Int64, nil
	case ir.Bool:
		return Uint8, nil
	}
	return 0, fmt.Errorf("nccl has no data type for %v", dt)
}

// RedOpOf maps a hir reduce op to NCCL's (ir.ReduceUnset is sum).
func RedOpOf(op ir.ReduceOp) (RedOp, error) {
	switch op {
	case ir.ReduceSum, ir.ReduceUnset:
		return Sum, nil
	case ir.ReduceProd:
		return Prod, nil
	case ir.ReduceMax:
		return Max, nil
	case ir.ReduceMin:
		return Min, nil
	case ir.ReduceAvg:
		return Avg, nil
	}
	return 0, fmt.Errorf("nccl has no reduce op %q", op)
}

// Lib is the loaded library with its entry points resolved.
type Lib struct {
	path    string
	version int
	fn      map[string]uintptr
}

var (
	loadOnce sync.Once
	lib      *Lib
	loadErr  error
)

// entry points hir calls; those after the first group are optional.
var required = []string{
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommDestroy", "ncclCommAbort",
	"ncclGetErrorString", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
	"ncclBroadcast", "ncclReduce", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
	"ncclCommGetAsyncError",
}

var optional = []string{"ncclCommInitRankScalable", "ncclCommInitRank", "ncclGetLastError"}

// Load opens NCCL once per process. Before it does, it sets
// NCCL_NVLS_ENABLE=0 in the environment when unset: NVLink multicast must
// stay off on hir's machines.
func Load() (*Lib, error) {
	loadOnce.Do(func() {
		if _, set := os.LookupEnv("NCCL_NVLS_ENABLE"); !set {
			os.Setenv("NCCL_NVLS_ENABLE", "0")
		}
		path := Library
		if p := os.Getenv("HIR_NCCL_LIBRARY"); p != "" {
			path = p
		}
		h, err := dl.Open(path)
		if err != nil {
			loadErr = fmt.Errorf("%w: cannot load %s (%v); algo=nccl needs NCCL on the loader path, or HIR_NCCL_LIBRARY naming it", ErrUnavailable, path, err)
			return
		}
		l := &Lib{path: path, fn: map[string]uintptr{}}
		for _, name := range required {
			p, err := dl.Sym(h, name)
			if err != nil || p == 0 {
				loadErr = fmt.Errorf("%w: %s does not export %s (too old an NCCL?)", ErrUnavailable, path, name)
				return
			}
			l.fn[name] = p
		}
		for _, name := range optional {
			if p, err := dl.Sym(h, name); err == nil && p != 0 {
				l.fn[name] = p
			}
		}
		if l.fn["ncclCommInitRankScalable"] == 0 && (l.fn["ncclCommInitRank"] == 0 || goruntime.GOARCH != "amd64") {
			loadErr = fmt.Errorf("%w: %s has no ncclCommInitRankScalable (NCCL >= 2.23 is needed here)", ErrUnavailable, path)
			return
		}
		var v int32
		if err := l.call("ncclGetVersion", uintptr(unsafe.Pointer(&v))); err != nil {
			loadErr = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return
		}
		l.version = int(v)
		lib = l
	})
	return lib, loadErr
}

// Version is NCCL's version code (e.g. 22803 for 2.28.3).
func (l *Lib) Version() int { return l.version }

// VersionString is the version as major.minor.patch.
func (l *Lib) VersionString() string {
	v := l.version
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

// Path is the file the library was loaded from.
func (l *Lib) Path() string { return l.path }

// call runs an entry point returning ncclResult_t.
//
//go:uintptrescapes
func (l *Lib) call(name string, args ...uintptr) error {
	p := l.fn[name]
	if p == 0 {
		return &Error{Call: name, Code: InvalidUsage, Detail: "not exported by " + l.path}
	}
	r1, _, _ := purego.SyscallN(p, args...)
	if res := Result(int32(r1)); res != Success {
		return l.errorFor(name, res, 0)
	}
	return nil
}

func (l *Lib) errorFor(name string, res Result, comm uintptr) error {
	e := &Error{Call: name, Code: res}
	if p := l.fn["ncclGetErrorString"]; p != 0 {
		r, _, _ := purego.SyscallN(p, uintptr(res))
		e.Detail = cString(r)
	}
	if p := l.fn["ncclGetLastError"]; p != 0 {
		r, _, _ := purego.SyscallN(p, comm)
		if last := cString(r); last != "" && last != e.Detail {
			if e.Detail != "" {
				e.Detail += ": "
			}
			e.Detail += last
		}
	}
	return e
}

// cString copies the NUL-terminated string at address p (C memory).
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	// Reinterpret the integer as a pointer without a uintptr->Pointer
	// conversion (vet's unsafeptr check), as runtime/cuda does.
	base := *(**byte)(unsafe.Pointer(&p))
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(unsafe.Pointer(base), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(base, n))
}

// GetUniqueID makes a fresh id (rank 0 does this once per communicator).
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.call("ncclGetUniqueId", uintptr(unsafe.Pointer(&id[0])))
	return id, err
}
