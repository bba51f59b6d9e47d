package cu

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libc stands in for a CUDA library on machines without one: its
// entry points are plain C functions purego can call.
func openLibc(t *testing.T) *library {
	t.Helper()
	h, err := open("libc.so.6")
	if err != nil {
		t.Skipf("libc does not load here: %v", err)
	}
	return &library{path: "libc.so.6", handle: h, fail: func(call string, r uintptr) error {
		return &Error{Call: call, Code: Result(int32(r)), Name: ResultName(Result(int32(r)))}
	}}
}

// A table of two entry points: one libc exports (sched_yield returns 0
// and ignores any arguments), one nobody does, and one found by its
// fallback name.
type fakeTable struct {
	library
	Yield    Proc `cu:"sched_yield"`
	Missing  Proc `cu:"cuNoSuchEntryPoint_v2 cuNoSuchEntryPoint"`
	Fallback Proc `cu:"sched_yield_v9 sched_yield"`
	Untagged int
}

func TestProcsResolveOnceAndNameTheirSymbol(t *testing.T) {
	lib := openLibc(t)
	tb := &fakeTable{library: *lib}
	tb.resolve(tb)
	require.True(t, tb.Yield.Resolved(), "sched_yield: %+v", tb.Yield)
	require.Equal(t, "sched_yield", tb.Yield.Name(), "sched_yield: %+v", tb.Yield)
	assert.True(t, tb.Fallback.Resolved(), "fallback name not used: %+v", tb.Fallback)
	assert.Equal(t, "sched_yield", tb.Fallback.Name(), "fallback name not used: %+v", tb.Fallback)
	assert.Equal(t, tb.Yield.addr, tb.Fallback.addr, "fallback name not used: %+v", tb.Fallback)
	assert.NoError(t, tb.Yield.Call(), "call")
	require.False(t, tb.Missing.Resolved(), "a symbol nobody exports resolved")
	err := tb.Missing.Call(1, 2)
	var e *Error
	if assert.True(t, asError(err, &e), "missing entry point: %#v", err) {
		assert.Equal(t, "cuNoSuchEntryPoint", e.Call, "missing entry point")
		assert.Equal(t, ErrNotSupported, e.Code, "missing entry point")
		assert.Equal(t, "symbol not found", e.Name, "missing entry point")
		assert.Equal(t, "libc.so.6 does not export cuNoSuchEntryPoint_v2", e.Desc, "missing entry point")
	}
	assert.Len(t, procs(tb), 3, "procs")
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// The hot paths (cuLaunchKernel, cuMemcpyAsync, ...) call a Proc with a
// fixed number of arguments, some of them pointers to Go memory the
// caller holds: the call itself must not allocate.
func TestFixedArityCallsDoNotAllocate(t *testing.T) {
	lib := openLibc(t)
	tb := &fakeTable{library: *lib}
	tb.resolve(tb)
	params := make([]unsafe.Pointer, 1)
	params[0] = unsafe.Pointer(new(uint64))
	p := &tb.Yield
	for name, call := range map[string]func() error{
		"Call1":  func() error { return p.Call1(1) },
		"Call2":  func() error { return p.Call2(1, 2) },
		"Call3":  func() error { return p.Call3(1, 2, 3) },
		"Call4":  func() error { return p.Call4(1, 2, 3, 4) },
		"Call11": func() error { return p.Call11(1, 2, 3, 4, 5, 6, 7, 8, 9, uintptr(unsafe.Pointer(&params[0])), 0) },
	} {
		require.NoError(t, call(), "%s", name)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { call() }), "%s: allocations per call", name)
	}
	assert.ErrorContains(t, tb.Missing.Call11(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), "symbol not found", "missing")
}

// A failing call (a non-zero status in the low 32 bits) is the library's
// error, naming the entry point; getpid's result is never 0.
func TestFailingCallIsTheLibrarysError(t *testing.T) {
	lib := openLibc(t)
	tb := &struct {
		library
		Getpid Proc `cu:"getpid"`
	}{library: *lib}
	tb.resolve(tb)
	for _, err := range []error{tb.Getpid.Call(), tb.Getpid.Call1(0), tb.Getpid.Call4(0, 0, 0, 0)} {
		var e *Error
		if assert.True(t, asError(err, &e), "getpid: %#v", err) {
			assert.Equal(t, "getpid", e.Call, "getpid: %#v", err)
			assert.NotZero(t, e.Code, "getpid: %#v", err)
		}
	}
}

// Every tag names its symbols well: cu/cublas/nvrtc prefixed, at most a
// versioned name and the plain one, the versioned one first.
func TestTablesTags(t *testing.T) {
	for _, table := range []any{Driver{}, NVRTC{}, CUBLAS{}} {
		ty := reflect.TypeOf(table)
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			tag, ok := f.Tag.Lookup("cu")
			if f.Type != reflect.TypeOf(Proc{}) {
				continue
			}
			names := strings.Fields(tag)
			if !assert.True(t, ok, "%s.%s: tag %q", ty.Name(), f.Name, tag) ||
				!assert.NotEmpty(t, names, "%s.%s: tag %q", ty.Name(), f.Name, tag) ||
				!assert.LessOrEqual(t, len(names), 2, "%s.%s: tag %q", ty.Name(), f.Name, tag) {
				continue
			}
			if len(names) == 2 {
				assert.Equal(t, names[1]+"_v2", names[0], "%s.%s: %q is not %q's _v2", ty.Name(), f.Name, names[0], names[1])
			}
			// a lone versioned name (cuGraphAddNode_v2, cuStreamGetCaptureInfo_v3):
			// the plain symbol keeps an older signature
			plain := regexp.MustCompile(`_v[0-9]$`).ReplaceAllString(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(names[len(names)-1], "cublas"), "nvrtc"), "cu"), "")
			if !(ty.Name() == "CUBLAS" && strings.HasSuffix(names[0], plain)) {
				assert.Equal(t, f.Name, plain, "%s.%s: field names %s", ty.Name(), f.Name, names[len(names)-1])
			}
		}
	}
}

func TestErrorNames(t *testing.T) {
	cases := map[Result]string{
		0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		600: "CUDA_ERROR_NOT_READY", 801: "CUDA_ERROR_NOT_SUPPORTED", 12345: "CUresult(12345)",
	}
	for code, want := range cases {
		assert.Equal(t, want, ResultName(code), "ResultName(%d)", code)
	}
}

func TestMissingLibrary(t *testing.T) {
	_, err := OpenDriver("/nonexistent/libcuda.so.1")
	assert.ErrorContains(t, err, "cannot load /nonexistent/libcuda.so.1", "driver")
	_, err = OpenNVRTC("/nonexistent/libnvrtc.so.13")
	assert.ErrorContains(t, err, "cannot load /nonexistent/libnvrtc.so.13", "nvrtc")
	_, err = OpenCUBLAS("/nonexistent/libcublas.so.13")
	assert.Error(t, err, "cublas loaded")
}
