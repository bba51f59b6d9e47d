package cuda

import "github.com/hirlab/hir/runtime"

// Compute kernels (fusions, pointwise ops, reductions, matmul) come with the
// codegen issue.

func (d *Device) Compile(spec *runtime.KernelSpec) (runtime.Kernel, error) {
	op := "kernel"
	if spec != nil && spec.Op != nil {
		op = spec.Op.Code.String()
	}
	return nil, unsupported("compiling compute kernels (" + op + ")")
}

func (d *Device) Launch(k runtime.Kernel, args []runtime.Tensor, s runtime.Stream) error {
	return unsupported("launching compute kernels")
}
