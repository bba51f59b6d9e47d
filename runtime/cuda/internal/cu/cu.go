// Package cu is runtime/cuda's binding of the CUDA driver API, NVRTC and
// cuBLAS through purego (no cgo): each library is opened with
// purego.Dlopen and every entry point the runtime uses is resolved once,
// when the library opens, into a Proc field of the library's table
// (Driver, NVRTC, CUBLAS). Calling a Proc is one purego.SyscallN on the
// resolved address: no lookup by name, no lock and no allocation of its
// own, so the launch and copy paths pay only for the C call.
//
// An entry point the library does not export leaves its Proc unresolved;
// calling it returns an *Error naming the symbol ("symbol not found"),
// so an optional entry point missing from an old driver fails only where
// it is used. cuBLAS is the exception: a candidate library lacking any of
// its entry points is refused at open (the runtime then tries another).
package cu

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hirlab/hir/runtime/internal/dl"
)

// library is an opened shared library and how its calls fail.
type library struct {
	path   string
	handle uintptr
	// fail turns a non-zero status r returned by entry point call into
	// the library's error.
	fail func(call string, r uintptr) error
}

// Path is the file (or soname) the library was opened by.
func (l *library) Path() string { return l.path }

// Proc is one entry point of a loaded library, resolved at open.
type Proc struct {
	name string // the entry point as errors name it, e.g. "cuMemAlloc"
	sym  string // the symbol tried first, e.g. "cuMemAlloc_v2"
	addr uintptr
	lib  *library
}

// Name is the entry point as errors name it (the plain name, without the
// _v2 suffix of the symbol it may resolve to).
func (p *Proc) Name() string { return p.name }

// Resolved reports whether the library exports the entry point.
func (p *Proc) Resolved() bool { return p.addr != 0 }

// Call runs the entry point with every argument as a uintptr and turns
// a non-zero status (the low 32 bits of the result) into the library's
// error. Go memory handed to C is passed as uintptr(unsafe.Pointer(...))
// directly in the call's argument list: //go:uintptrescapes keeps it
// alive and unmoved until Call returns.
//
// Call's variadic argument list is one small allocation per call (the
// compiler cannot keep a //go:uintptrescapes variadic slice on the
// stack); the hot paths use the fixed-arity Call1..Call4 and Call11,
// which allocate nothing.
//
//go:uintptrescapes
func (p *Proc) Call(args ...uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	r, _, _ := purego.SyscallN(p.addr, args...)
	return p.status(r)
}

// argBuf carries a fixed-arity call's arguments to purego.SyscallN
// without a fresh slice per call (SyscallN copies them out at once).
type argBuf [11]uintptr

var argBufs = sync.Pool{New: func() any { return new(argBuf) }}

// callBuf runs the entry point on b[:n] and returns b to the pool. The
// callers' //go:uintptrescapes keeps any Go memory in b alive and in
// place until they return.
func (p *Proc) callBuf(b *argBuf, n int) error {
	r, _, _ := purego.SyscallN(p.addr, b[:n]...)
	*b = argBuf{}
	argBufs.Put(b)
	return p.status(r)
}

func (p *Proc) status(r uintptr) error {
	if int32(r) == 0 {
		return nil
	}
	return p.lib.fail(p.name, r)
}

// Call1 is Call with one argument, without allocating.
//
//go:uintptrescapes
func (p *Proc) Call1(a1 uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	b := argBufs.Get().(*argBuf)
	b[0] = a1
	return p.callBuf(b, 1)
}

// Call2 is Call with two arguments, without allocating.
//
//go:uintptrescapes
func (p *Proc) Call2(a1, a2 uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	b := argBufs.Get().(*argBuf)
	b[0], b[1] = a1, a2
	return p.callBuf(b, 2)
}

// Call3 is Call with three arguments, without allocating.
//
//go:uintptrescapes
func (p *Proc) Call3(a1, a2, a3 uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	b := argBufs.Get().(*argBuf)
	b[0], b[1], b[2] = a1, a2, a3
	return p.callBuf(b, 3)
}

// Call4 is Call with four arguments, without allocating.
//
//go:uintptrescapes
func (p *Proc) Call4(a1, a2, a3, a4 uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	b := argBufs.Get().(*argBuf)
	b[0], b[1], b[2], b[3] = a1, a2, a3, a4
	return p.callBuf(b, 4)
}

// Call11 is Call with eleven arguments (cuLaunchKernel's), without
// allocating.
//
//go:uintptrescapes
func (p *Proc) Call11(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 uintptr) error {
	if p.addr == 0 {
		return p.missing()
	}
	b := argBufs.Get().(*argBuf)
	*b = argBuf{a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}
	return p.callBuf(b, 11)
}

// missing is the error of calling an entry point the library lacks.
func (p *Proc) missing() error {
	return &Error{Call: p.name, Code: ErrNotSupported, Name: "symbol not found",
		Desc: fmt.Sprintf("%s does not export %s", p.lib.path, p.sym)}
}

// open dlopens path; the error is purego's, unwrapped (off linux,
// dl.ErrNeedsLinux).
func open(path string) (uintptr, error) { return dl.Open(path) }

// resolve fills every Proc field of table (a pointer to a struct) from
// its `cu` tag: the symbols to try, best first, the last being the plain
// name errors use (`cu:"cuMemAlloc_v2 cuMemAlloc"`: cuda.h maps the
// plain name to the _v2 entry point, which is resolved where exported).
func (l *library) resolve(table any) {
	v := reflect.ValueOf(table).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, ok := t.Field(i).Tag.Lookup("cu")
		if !ok {
			continue
		}
		names := strings.Fields(tag)
		p := v.Field(i).Addr().Interface().(*Proc)
		*p = Proc{name: names[len(names)-1], sym: names[0], lib: l}
		for _, n := range names {
			if a, err := dl.Sym(l.handle, n); err == nil && a != 0 {
				p.addr = a
				break
			}
		}
	}
}

// procs lists table's Proc fields in declaration order.
func procs(table any) []*Proc {
	v := reflect.ValueOf(table).Elem()
	var out []*Proc
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Type() == reflect.TypeFor[Proc]() {
			out = append(out, f.Addr().Interface().(*Proc))
		}
	}
	return out
}

// GoString copies a NUL-terminated C string.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CString is s with a terminating NUL, for passing to C.
func CString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
