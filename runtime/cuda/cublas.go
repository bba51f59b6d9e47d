package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/cu"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// cuBLAS through purego, like the driver: matmul runs as cublasGemmEx (or
// the strided-batched form) where a cuBLAS library loads, and as the
// generated tiled kernel (codegen.Matmul) where none does.
//
// The library is often not on the loader path of the GPU machines: it may
// only ship inside PyTorch's pip packages (site-packages/nvidia/cu13/lib,
// nvidia/cublas/lib). So besides the sonames, the usual CUDA and Python
// places are searched; HIR_CUDA_LIBCUBLAS names the file (or a directory
// holding it) and then only that is tried.

// CUBLASLibrary is the soname tried first.
const CUBLASLibrary = "libcublas.so.13"

const envLibCUBLAS = "HIR_CUDA_LIBCUBLAS" // a libcublas.so.N file, or a directory holding one

// BLASInfo says which cuBLAS this process loaded, or why none.
type BLASInfo struct {
	Path    string   // the file (or soname) that loaded
	Version string   // major.minor.patch from cublasGetProperty
	Tried   []string // every candidate tried, with why it failed
	Err     error    // nil when a library loaded
}

func (b BLASInfo) String() string {
	if b.Err != nil {
		return fmt.Sprintf("cuBLAS unavailable: %v", b.Err)
	}
	return fmt.Sprintf("cuBLAS %s from %s", b.Version, b.Path)
}

// cublasLib is the loaded library: its entry points (internal/cu.CUBLAS,
// every one resolved when it opened) and what loaded.
type cublasLib struct {
	*cu.CUBLAS
	info BLASInfo
}

var (
	cublasOnce sync.Once
	cublasL    *cublasLib
	cublasInfo BLASInfo
)

// CUBLAS loads cuBLAS once per process and says what loaded, from where,
// and what was tried. It never panics; without a library, Err says why.
func CUBLAS() BLASInfo {
	loadCUBLAS()
	return cublasInfo
}

func loadCUBLAS() (*cublasLib, error) {
	cublasOnce.Do(func() {
		cands := blasCandidates(os.Getenv, filepath.Glob)
		for _, c := range cands {
			lib, err := openCUBLAS(c)
			if err != nil {
				cublasInfo.Tried = append(cublasInfo.Tried, fmt.Sprintf("%s: %v", c, err))
				continue
			}
			cublasInfo.Path = c
			lib.info = cublasInfo
			cublasL = lib
			var v [3]int32
			for i := range v {
				lib.GetProperty.Call2(uintptr(i), uintptr(unsafe.Pointer(&v[i])))
			}
			cublasInfo.Version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
			lib.info = cublasInfo
			return
		}
		where := "the loader path and the CUDA and Python (site-packages/nvidia/*/lib) places"
		if p := os.Getenv(envLibCUBLAS); p != "" {
			where = envLibCUBLAS + "=" + p
		}
		cublasInfo.Err = fmt.Errorf("no loadable libcublas in %s (%d candidates tried); set %s to the file or its directory", where, len(cands), envLibCUBLAS)
	})
	return cublasL, cublasInfo.Err
}

// openCUBLAS dlopens one candidate and resolves every entry point
// (cu.OpenCUBLAS: a library lacking one is refused; for a path, the
// libcublasLt beside it is loaded first).
func openCUBLAS(path string) (*cublasLib, error) {
	b, err := cu.OpenCUBLAS(path)
	if err != nil {
		return nil, err
	}
	return &cublasLib{CUBLAS: b}, nil
}

// blasCandidates lists what to dlopen, best first: HIR_CUDA_LIBCUBLAS
// alone when set; else the sonames (loader path), then libcublas.so.* in
// the CUDA toolkit's and Python's usual directories. getenv and glob are
// parameters so tests can fake a machine.
func blasCandidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	inDir := func(dir string) {
		files, _ := glob(filepath.Join(dir, "libcublas.so.*"))
		sort.Slice(files, func(i, j int) bool { return blasRank(files[i]) < blasRank(files[j]) })
		for _, f := range files {
			add(f)
		}
	}
	if p := getenv(envLibCUBLAS); p != "" {
		if strings.HasSuffix(p, "/") || !strings.Contains(filepath.Base(p), ".so") {
			inDir(p)
		} else {
			add(p)
		}
		return out
	}
	add("libcublas.so.13")
	add("libcublas.so.12")
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"} {
		if r := getenv(env); r != "" {
			dirs = append(dirs, filepath.Join(r, "lib64"), filepath.Join(r, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64", "/usr/local/cuda-*/targets/x86_64-linux/lib",
		"/usr/lib/x86_64-linux-gnu")
	// Python: site-packages/nvidia/<cu13|cublas|cu12>/lib under the usual
	// prefixes (venv, conda, system, user, pyenv), and PYTHONPATH entries.
	var sites []string
	for _, pre := range []string{getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX"), "/usr", "/usr/local", "/opt/conda",
		filepath.Join(getenv("HOME"), ".local"), filepath.Join(getenv("HOME"), ".pyenv/versions/*"), "/root/.pyenv/versions/*", "/opt/*", "/opt/*/venv"} {
		if pre == "" || pre == ".local" {
			continue
		}
		sites = append(sites, filepath.Join(pre, "lib/python3*/site-packages"), filepath.Join(pre, "lib/python3*/dist-packages"))
	}
	sites = append(sites, "/usr/lib/python3/dist-packages")
	for _, p := range filepath.SplitList(getenv("PYTHONPATH")) {
		if p != "" {
			sites = append(sites, p)
		}
	}
	for _, s := range sites {
		for _, sub := range []string{"nvidia/cu13/lib", "nvidia/cublas/lib", "nvidia/cu12/lib"} {
			dirs = append(dirs, filepath.Join(s, sub))
		}
	}
	for _, d := range dirs {
		matches := []string{d}
		if strings.ContainsAny(d, "*?[") {
			matches, _ = glob(d)
		}
		for _, m := range matches {
			inDir(m)
		}
	}
	return out
}

// blasRank orders files of one directory: so.13 before so.12, and the
// soname (shortest) before fully versioned names.
func blasRank(path string) string {
	base := filepath.Base(path)
	major := strings.TrimPrefix(base, "libcublas.so.")
	if i := strings.IndexByte(major, '.'); i >= 0 {
		major = major[:i]
	}
	return fmt.Sprintf("%03d-%04d-%s", 999-atoiOr(major, 0), len(base), base)
}

func atoiOr(s string, def int) int {
	n := 0
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// The enums of library_types.h and cublas_api.h that matmul uses.
const (
	cudaR16F  = 2
	cudaR32F  = 0
	cudaR64F  = 1
	cudaR16BF = 14

	cublasCompute32F = 68
	cublasCompute64F = 70
	cublasOpN        = 0
)

// blasType is the cudaDataType of dt, or false when cuBLAS does not take it.
func blasType(dt ir.DType) (int, bool) {
	switch dt {
	case ir.F32:
		return cudaR32F, true
	case ir.F16:
		return cudaR16F, true
	case ir.BF16:
		return cudaR16BF, true
	case ir.F64:
		return cudaR64F, true
	}
	return 0, false
}

// blasHandle is one device's cuBLAS handle. cuBLAS binds a handle to the
// context current when it is made; calls go under withCtx and mu (the
// stream is set per call, and that must not interleave).
type blasHandle struct {
	lib *cublasLib
	h   uintptr
	mu  sync.Mutex
	// ws is each stream's workspace, wsSize bytes (Tuning.BlasWorkspace;
	// 0: none, cuBLAS's own pool): cublasSetStream resets it to cuBLAS's
	// pool, so gemm sets it again after each. One per stream, as cuBLAS
	// asks of a handle used on several: gemms on two streams run at once
	// (in a graph replay truly at once), and on Hopper a gemm keeps state
	// of its own in the workspace, so a shared one let one stream's
	// matmul overwrite another's (TestDecompositionsOnGPU, 2 streams).
	// Made at a stream's first gemm (the eager warm-up, or under relaxed
	// capture, where cuMemAlloc is allowed), freed when the stream closes
	// (releaseWorkspace).
	ws map[*gpu.Stream]uintptr
	// cur is the stream the handle was last set to (with its workspace)
	// and curH that stream's driver handle then: a gemm on the same
	// stream with the same handle sets neither again (two calls fewer per
	// matmul). Cleared when that stream closes, whose handle value a new
	// stream may get.
	cur    *gpu.Stream
	curH   uintptr
	wsSize uintptr
	alloc  func(*uintptr, uintptr) error
	free   func(uintptr) error
}

// blas returns the device's handle, made on first use; an error says why
// cuBLAS cannot be used here (matmul then runs the tiled kernel).
func (d *Device) blas() (*blasHandle, error) {
	c := &d.compute
	c.blasOnce.Do(func() {
		lib, err := loadCUBLAS()
		if err != nil {
			c.blasErr = err
			return
		}
		bh := &blasHandle{lib: lib, ws: map[*gpu.Stream]uintptr{}, wsSize: uintptr(max(d.Tune.BlasWorkspace, 0)), free: d.Drv.MemFree.Call1,
			alloc: func(p *uintptr, n uintptr) error { return d.Drv.MemAlloc.Call2(uintptr(unsafe.Pointer(p)), n) }}
		if err := d.WithCtx(func() error {
			return lib.Create.Call1(uintptr(unsafe.Pointer(&bh.h)))
		}); err != nil {
			c.blasErr = fmt.Errorf("%s loaded from %s but %w", lib.info.Version, lib.info.Path, err)
			return
		}
		c.blasH = bh
	})
	return c.blasH, c.blasErr
}

// blasMatrix is how cuBLAS sees one operand of a batched product: a
// batch of row-major matrices, row i of matrix j at addr + (j×batch + i×ld)
// elements. A view (a select of a chunk, every rank's block of it) is
// passed as it lies, with no staging copy, when it has this form.
type blasMatrix struct {
	addr      uint64
	ld, batch int64 // row stride and matrix stride, in elements
}

// blasLayout says whether t, a [batch dims..., rows, cols] operand, is a
// batch of row-major matrices with unit column stride, and its row and
// matrix strides. Batch dims must step as one (a select of one index of
// a middle axis keeps that); extents of 1 do not count.
func blasLayout(t runtime.Tensor) (ld, batch int64, ok bool) {
	r := len(t.Shape)
	if r < 2 {
		return 0, 0, false
	}
	st := t.EffectiveStrides()
	rows, cols := t.Shape[r-2], t.Shape[r-1]
	if cols > 1 && st[r-1] != 1 {
		return 0, 0, false
	}
	ld = max(cols, 1)
	if rows > 1 {
		ld = st[r-2]
	}
	if ld < max(cols, 1) || ld > 1<<31-1 {
		return 0, 0, false // rows overlap, or cuBLAS's int leading dimension cannot hold it
	}
	batch = rows * ld
	inner := int64(-1) // the stride the next outer batch dim must have
	for i := r - 3; i >= 0; i-- {
		if t.Shape[i] == 1 {
			continue
		}
		if st[i] < 0 {
			return 0, 0, false
		}
		if inner < 0 {
			batch = st[i]
		} else if st[i] != inner {
			return 0, 0, false
		}
		inner = st[i] * t.Shape[i]
	}
	return ld, batch, true
}

// gemm runs one matmul problem on stream s (under withCtx): out[batch][m][n]
// = a[batch][m][k] × b[(batch)][k][n] (+ out, accumulating), row-major,
// through cuBLAS's column-major interface as out^T = b^T × a^T. An
// unbatched b folds the batch into m when a's and out's matrices lie back
// to back, so that is one GEMM; otherwise b is shared through a matrix
// stride of 0.
func (bh *blasHandle) gemm(s *gpu.Stream, dt ir.DType, a, b, out blasMatrix, batch, m, k, n int64, bBatched, accumulate bool) error {
	typ, _ := blasType(dt)
	compute := uintptr(cublasCompute32F)
	// alpha and beta live on the host (the default pointer mode) and are
	// read during the call; they go to C as unsafe.Pointer conversions in
	// the call itself, which keeps them alive and in place.
	alpha32, beta32 := float32(1), float32(0)
	alpha64, beta64 := float64(1), float64(0)
	if accumulate { // beta = 1: the product is added to what out holds
		beta32, beta64 = 1, 1
	}
	alpha, beta := unsafe.Pointer(&alpha32), unsafe.Pointer(&beta32)
	if dt == ir.F64 {
		compute = cublasCompute64F
		alpha, beta = unsafe.Pointer(&alpha64), unsafe.Pointer(&beta64)
	}
	algo := int64(-1) // CUBLAS_GEMM_DEFAULT
	bh.mu.Lock()
	defer bh.mu.Unlock()
	// A stream's handle changes while a device loop's body is captured
	// (gpu.Device.BeginLoop): the body's gemms must go to the body.
	if bh.cur != s || bh.curH != s.H {
		bh.cur = nil
		if err := bh.lib.SetStream.Call2(bh.h, s.H); err != nil {
			return err
		}
		if ws := bh.workspace(s); ws != 0 {
			if err := bh.lib.SetWorkspace.Call3(bh.h, ws, bh.wsSize); err != nil {
				return err
			}
		}
		bh.cur, bh.curH = s, s.H
	}
	folds := !bBatched && (batch == 1 || (a.batch == m*a.ld && out.batch == m*out.ld))
	if folds {
		return bh.lib.GemmEx.Call(bh.h, cublasOpN, cublasOpN,
			uintptr(n), uintptr(batch*m), uintptr(k),
			uintptr(alpha), uintptr(b.addr), uintptr(typ), uintptr(b.ld),
			uintptr(a.addr), uintptr(typ), uintptr(a.ld),
			uintptr(beta), uintptr(out.addr), uintptr(typ), uintptr(out.ld),
			compute, uintptr(algo))
	}
	bStride := b.batch
	if !bBatched {
		bStride = 0
	}
	return bh.lib.GemmStridedBatchedEx.Call(bh.h, cublasOpN, cublasOpN,
		uintptr(n), uintptr(m), uintptr(k),
		uintptr(alpha), uintptr(b.addr), uintptr(typ), uintptr(b.ld), uintptr(bStride),
		uintptr(a.addr), uintptr(typ), uintptr(a.ld), uintptr(a.batch),
		uintptr(beta), uintptr(out.addr), uintptr(typ), uintptr(out.ld), uintptr(out.batch),
		uintptr(batch), compute, uintptr(algo))
}

// blasFits reports whether cuBLAS's int dimensions hold the problem.
func blasFits(batch, m, k, n int64, bBatched bool) bool {
	const lim = 1<<31 - 1
	rows := m
	if !bBatched {
		rows = batch * m
	}
	return rows <= lim && n <= lim && k <= lim && batch <= lim && k*n <= 1<<62 && m*k <= 1<<62
}

// workspace is stream s's workspace, made on its first gemm; 0 (cuBLAS's
// own pool) when none is asked for or the memory is not there, rather
// than fail the matmul. Called with mu held, under withCtx.
func (bh *blasHandle) workspace(s *gpu.Stream) uintptr {
	ws, ok := bh.ws[s]
	if !ok && bh.wsSize > 0 {
		if bh.alloc(&ws, bh.wsSize) != nil {
			ws = 0
		}
		bh.ws[s] = ws
	}
	return ws
}

// releaseWorkspace frees closing stream s's workspace (its work is done:
// the stream was destroyed first). Under withCtx.
func (bh *blasHandle) releaseWorkspace(s *gpu.Stream) error {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if bh.cur == s {
		bh.cur = nil
	}
	ws, ok := bh.ws[s]
	if !ok {
		return nil
	}
	delete(bh.ws, s)
	if ws == 0 {
		return nil
	}
	return bh.free(ws)
}

func (bh *blasHandle) destroy() error {
	err := bh.lib.Destroy.Call1(bh.h)
	bh.mu.Lock()
	defer bh.mu.Unlock()
	for s, ws := range bh.ws {
		if ws != 0 {
			err = errors.Join(err, bh.free(ws))
		}
		delete(bh.ws, s)
	}
	return err
}
