package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The kernels' numerics are tested in internal/compute; these tests are of
// compiling and launching them on a device.

func val(name string) *ir.Value { return &ir.Value{Name: name} }

func mkOp(code ir.Opcode, operands ...*ir.Value) *ir.Op {
	return &ir.Op{Code: code, Operands: operands, Results: []*ir.Value{val("out")}}
}

func out(dt ir.DType, shape ...int64) []runtime.TensorShape {
	return []runtime.TensorShape{{DType: dt, Shape: shape}}
}

// Inputs and outputs may be strided: here a transposed input and an output
// written into every other element.
func TestStridedTensors(t *testing.T) {
	rt := newRuntime(t, 1, 5*time.Second)
	d := rt.devices[0]
	k, err := d.Compile(&runtime.KernelSpec{Op: mkOp(ir.OpAdd, val("x"), ir.Float(100)),
		Inputs: out(ir.F32, 2, 3), Outputs: out(ir.F32, 2, 3)})
	require.NoError(t, err)
	// A 3x2 matrix [[1,2],[3,4],[5,6]] seen as its 2x3 transpose.
	in, err := upload(d, ir.Global, ir.F32, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	require.NoError(t, err)
	defer d.Free(in.Buf)
	ob, _ := d.Alloc(12*4, ir.Global)
	defer d.Free(ob)
	transposed := runtime.Tensor{Buf: in.Buf, DType: ir.F32, Shape: []int64{2, 3}, Strides: []int64{1, 2}}
	spread := runtime.Tensor{Buf: ob, DType: ir.F32, Shape: []int64{2, 3}, Strides: []int64{6, 2}}
	require.NoError(t, d.Launch(k, []runtime.Tensor{transposed, spread}, nil))
	got, err := download(d, tensorOf(ob, ir.F32, 12))
	require.NoError(t, err)
	want := []float64{101, 0, 103, 0, 105, 0, 102, 0, 104, 0, 106, 0}
	assert.Empty(t, floatsDiff(want, got), "strided launch (-want +got)")
	// Copy between strided tensors, and out of bounds strides refused.
	cb, _ := d.Alloc(6*4, ir.Global)
	defer d.Free(cb)
	require.NoError(t, d.Copy(tensorOf(cb, ir.F32, 2, 3), transposed, nil))
	got, err = download(d, tensorOf(cb, ir.F32, 6))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{1, 3, 5, 2, 4, 6}, got), "strided copy (-want +got)")
	bad := runtime.Tensor{Buf: in.Buf, DType: ir.F32, Shape: []int64{2, 3}, Strides: []int64{3, 2}}
	assert.ErrorContains(t, d.Launch(k, []runtime.Tensor{bad, spread}, nil), "reaches byte", "out-of-bounds strides")
}

func TestLaunchErrors(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	x := val("x")
	_, err := d.Compile(&runtime.KernelSpec{Op: &ir.Op{Code: ir.OpAlloc}})
	assert.ErrorContains(t, err, "rank 0: compile alloc", "a compile error names the rank and the op")
	k, err := d.Compile(&runtime.KernelSpec{Op: mkOp(ir.OpNeg, x), Inputs: out(ir.F32, 2), Outputs: out(ir.F32, 2)})
	require.NoError(t, err)
	b, _ := d.Alloc(8, ir.Global)
	defer d.Free(b)
	assert.ErrorContains(t, d.Launch(k, []runtime.Tensor{tensorOf(b, ir.F32, 2)}, nil), "1 arguments", "wrong argument count")
	assert.ErrorContains(t, d.Launch(k, []runtime.Tensor{tensorOf(b, ir.F32, 2), tensorOf(b, ir.F32, 1)}, nil), "compiled for", "wrong shape")
}
