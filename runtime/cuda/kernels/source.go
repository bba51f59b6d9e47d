package kernels

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hirlab/hir/ir"
)

// ReduceDTypes are the dtypes with reducing kernels, with their CUDA
// storage and compute types.
var ReduceDTypes = map[ir.DType][2]string{
	ir.F32:  {"float", "float"},
	ir.F16:  {"f16_t", "float"},
	ir.BF16: {"bf16_t", "float"},
	ir.F64:  {"double", "double"},
	ir.I32:  {"int", "int"},
	ir.I64:  {"long long", "long long"},
}

// reduceOpCodes are the kernels' reduce op numbers (NCCL's order).
var reduceOpCodes = map[ir.ReduceOp]int{ir.ReduceSum: 0, ir.ReduceProd: 1, ir.ReduceMax: 2, ir.ReduceMin: 3, ir.ReduceAvg: 4}

// ReduceSource is dt's reducing module: common (Collective as the
// runtime pins it), Reduce, then every reduce op's entry points (avg for
// floats only), each as a vector (16-byte) and a scalar reduce kernel, a
// ring kernel and the LL kernels.
func ReduceSource(common string, dt ir.DType) (string, error) {
	ty, ok := ReduceDTypes[dt]
	if !ok {
		return "", fmt.Errorf("no reducing kernels for %v", dt)
	}
	var b strings.Builder
	b.WriteString(common)
	b.WriteString(Reduce)
	var entries []ReduceEntry
	for _, op := range ir.ReduceOps() {
		if op == ir.ReduceAvg && !dt.IsFloat() {
			continue
		}
		entries = append(entries, ReduceEntry{DT: dt.String(), Op: op.String(),
			T: ty[0], C: ty[1], Code: reduceOpCodes[op], V: 16 / dt.Size(),
		})
	}
	if err := ReduceEntries.Execute(&b, entries); err != nil {
		return "", err
	}
	return b.String(), nil
}

// entryRE matches a kernel entry point of the CUDA C: extern "C"
// __global__ void, __launch_bounds__(n) maybe, and the name.
var entryRE = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(\w+)\s*\(`)

// Entries lists the entry points src defines, in order.
func Entries(src string) []string {
	var out []string
	for _, m := range entryRE.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1])
	}
	return out
}
