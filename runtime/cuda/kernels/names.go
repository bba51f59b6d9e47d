package kernels

import "github.com/hirlab/hir/ir"

// The reducing kernels' names, as reduce_entries.cu.tmpl spells them: by
// concatenation, not fmt, as they are made on every launch.
func ReduceKernelName(dt ir.DType, op ir.ReduceOp, vec bool) string {
	if vec {
		return "hir_reduce_" + dt.String() + "_" + op.String() + "_v"
	}
	return "hir_reduce_" + dt.String() + "_" + op.String() + "_s"
}

func RingKernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ring_" + dt.String() + "_" + op.String()
}

func LlKernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ll_" + dt.String() + "_" + op.String()
}

func Ll2KernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ll2_" + dt.String() + "_" + op.String()
}

func Ll128KernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ll128_" + dt.String() + "_" + op.String()
}

func Ll128x2KernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_ll128x2_" + dt.String() + "_" + op.String()
}

func BulkKernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_bulk_" + dt.String() + "_" + op.String()
}

func Bulk2KernelName(dt ir.DType, op ir.ReduceOp) string {
	return "hir_bulk2_" + dt.String() + "_" + op.String()
}
