package cu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hirlab/hir/runtime/internal/dl"
)

// CUBLAS is libcublas: one Proc per entry point runtime/cuda uses. Its
// calls fail with "<call>: CUBLAS_STATUS_..." errors.
type CUBLAS struct {
	library

	Create               Proc `cu:"cublasCreate_v2"`
	Destroy              Proc `cu:"cublasDestroy_v2"`
	SetStream            Proc `cu:"cublasSetStream_v2"`
	SetWorkspace         Proc `cu:"cublasSetWorkspace_v2"`
	GemmEx               Proc `cu:"cublasGemmEx"`
	GemmStridedBatchedEx Proc `cu:"cublasGemmStridedBatchedEx"`
	GetProperty          Proc `cu:"cublasGetProperty"`
}

// OpenCUBLAS dlopens one candidate and resolves every entry point; a
// library lacking one is closed and refused ("does not export ..."). For
// a path, libcublasLt of the same directory is loaded first: pip's wheels
// keep both side by side and the loader would not look there.
func OpenCUBLAS(path string) (*CUBLAS, error) {
	if strings.Contains(path, "/") {
		dir, base := filepath.Split(path)
		lt := filepath.Join(dir, strings.Replace(base, "libcublas.", "libcublasLt.", 1))
		if _, err := os.Stat(lt); err == nil {
			open(lt) // an error shows below
		}
	}
	h, err := open(path)
	if err != nil {
		return nil, err
	}
	b := &CUBLAS{library: library{path: path, handle: h, fail: cublasError}}
	b.resolve(b)
	for _, p := range procs(b) {
		if p.addr == 0 {
			dl.Close(h)
			return nil, fmt.Errorf("does not export %s", p.sym)
		}
	}
	return b, nil
}

// cublasStatusNames are cublasStatus_t's names.
var cublasStatusNames = map[uintptr]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func cublasError(call string, r uintptr) error {
	st := r & 0xffffffff
	n := cublasStatusNames[st]
	if n == "" {
		n = fmt.Sprintf("cublasStatus(%d)", st)
	}
	return fmt.Errorf("%s: %s", call, n)
}
