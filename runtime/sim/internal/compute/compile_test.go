package compute

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

type arg struct {
	dt    ir.DType
	shape []int64
	xs    []float64
}

func val(name string) *ir.Value { return &ir.Value{Name: name} }

func mkOp(code ir.Opcode, operands ...*ir.Value) *ir.Op {
	return &ir.Op{Code: code, Operands: operands, Results: []*ir.Value{val("out")}}
}

// runKernel compiles op for the inputs and outputs and runs it over
// contiguous views of fresh bytes.
func runKernel(t *testing.T, op *ir.Op, ins []arg, outs []runtime.TensorShape) ([][]float64, error) {
	t.Helper()
	spec := &runtime.KernelSpec{Op: op, Outputs: outs}
	for _, a := range ins {
		spec.Inputs = append(spec.Inputs, runtime.TensorShape{DType: a.dt, Shape: a.shape})
	}
	k, err := Compile(spec, nil)
	if err != nil {
		return nil, err
	}
	view := func(dt ir.DType, shape []int64) *View {
		v := Flat(dt, make([]byte, ir.Product(shape)*int64(dt.Size())))
		v.Shape, v.Strides = shape, runtime.ContiguousStrides(shape)
		return v
	}
	var inViews, outViews []*View
	for _, a := range ins {
		v := view(a.dt, a.shape)
		v.StoreF(0, a.xs)
		inViews = append(inViews, v)
	}
	for _, o := range outs {
		outViews = append(outViews, view(o.DType, o.Shape))
	}
	if err := k.Run(inViews, outViews, &Arena{}); err != nil {
		return nil, err
	}
	var res [][]float64
	for _, v := range outViews {
		res = append(res, v.LoadF(0, v.N))
	}
	return res, nil
}

// floatsDiff is cmp.Diff(want, got) (empty when they are the same) with
// NaN equal to NaN, -0 to 0, and nil to empty.
func floatsDiff(want, got []float64) string {
	return cmp.Diff(want, got, cmpopts.EquateNaNs(), cmpopts.EquateEmpty())
}

func out(dt ir.DType, shape ...int64) []runtime.TensorShape {
	return []runtime.TensorShape{{DType: dt, Shape: shape}}
}

func TestPointwiseNumerics(t *testing.T) {
	x, y, c := val("x"), val("y"), val("c")
	f32 := func(v float64) float64 { return float64(float32(v)) }
	nan := math.NaN()
	cases := []struct {
		name string
		op   *ir.Op
		ins  []arg
		out  []runtime.TensorShape
		want []float64
	}{
		{"f32 add broadcast", mkOp(ir.OpAdd, x, y),
			[]arg{{ir.F32, []int64{2, 3}, []float64{1, 2, 3, 4, 5, 6}}, {ir.F32, []int64{3}, []float64{10, 20, 30}}},
			out(ir.F32, 2, 3), []float64{11, 22, 33, 14, 25, 36}},
		{"f32 broadcast both ways", mkOp(ir.OpMul, x, y),
			[]arg{{ir.F32, []int64{2, 1}, []float64{1, 2}}, {ir.F32, []int64{1, 3}, []float64{1, 10, 100}}},
			out(ir.F32, 2, 3), []float64{1, 10, 100, 2, 20, 200}},
		{"f32 add rounds in f32", mkOp(ir.OpAdd, x, y),
			[]arg{{ir.F32, []int64{1}, []float64{16777216}}, {ir.F32, []int64{1}, []float64{1}}},
			out(ir.F32, 1), []float64{16777216}},
		{"bf16 add ties to even", mkOp(ir.OpAdd, x, y),
			[]arg{{ir.BF16, []int64{2}, []float64{1, 1}}, {ir.BF16, []int64{2}, []float64{0x1p-8, 3 * 0x1p-8}}},
			out(ir.BF16, 2), []float64{1, 1 + 0x1p-6}},
		{"f16 add rounds on store", mkOp(ir.OpAdd, x, ir.Float(1)),
			[]arg{{ir.F16, []int64{2}, []float64{2048, 2050}}},
			out(ir.F16, 2), []float64{2048, 2052}},
		{"f16 literal takes the dtype", mkOp(ir.OpMul, x, ir.Float(0.1)),
			[]arg{{ir.F16, []int64{1}, []float64{1}}},
			out(ir.F16, 1), []float64{0.0999755859375}},
		{"f32 div by zero is inf", mkOp(ir.OpDiv, x, y),
			[]arg{{ir.F32, []int64{2}, []float64{1, -1}}, {ir.F32, []int64{2}, []float64{0, 0}}},
			out(ir.F32, 2), []float64{math.Inf(1), math.Inf(-1)}},
		{"max min propagate NaN", mkOp(ir.OpMax, x, y),
			[]arg{{ir.F32, []int64{3}, []float64{nan, 1, 2}}, {ir.F32, []int64{3}, []float64{1, nan, 1}}},
			out(ir.F32, 3), []float64{nan, nan, 2}},
		{"min", mkOp(ir.OpMin, x, ir.Float(0)),
			[]arg{{ir.F64, []int64{3}, []float64{-1, 1, nan}}},
			out(ir.F64, 3), []float64{-1, 0, nan}},
		{"i32 div truncates, x/0 = 0", mkOp(ir.OpDiv, x, y),
			[]arg{{ir.I32, []int64{4}, []float64{-7, 7, 5, math.MinInt32}}, {ir.I32, []int64{4}, []float64{2, -2, 0, -1}}},
			out(ir.I32, 4), []float64{-3, -3, 0, math.MinInt32}},
		{"i32 add wraps", mkOp(ir.OpAdd, x, ir.Int(1)),
			[]arg{{ir.I32, []int64{1}, []float64{math.MaxInt32}}},
			out(ir.I32, 1), []float64{math.MinInt32}},
		{"i64 mul wraps", mkOp(ir.OpMul, x, ir.Int(2)),
			[]arg{{ir.I64, []int64{1}, []float64{0x1p62}}},
			out(ir.I64, 1), []float64{math.MinInt64}},
		{"i32 neg abs relu", mkOp(ir.OpAbs, x),
			[]arg{{ir.I32, []int64{3}, []float64{-5, 5, math.MinInt32}}},
			out(ir.I32, 3), []float64{5, 5, math.MinInt32}},
		{"relu", mkOp(ir.OpRelu, x),
			[]arg{{ir.F32, []int64{3}, []float64{-2, 3, nan}}},
			out(ir.F32, 3), []float64{0, 3, nan}},
		{"neg", mkOp(ir.OpNeg, x), []arg{{ir.BF16, []int64{1}, []float64{1.5}}}, out(ir.BF16, 1), []float64{-1.5}},
		{"exp f32", mkOp(ir.OpExp, x), []arg{{ir.F32, []int64{2}, []float64{0, 1}}}, out(ir.F32, 2), []float64{1, f32(math.E)}},
		{"log f32", mkOp(ir.OpLog, x), []arg{{ir.F32, []int64{3}, []float64{1, 0, -1}}}, out(ir.F32, 3), []float64{0, math.Inf(-1), nan}},
		{"tanh f64", mkOp(ir.OpTanh, x), []arg{{ir.F64, []int64{1}, []float64{0.5}}}, out(ir.F64, 1), []float64{math.Tanh(0.5)}},
		{"sigmoid f32", mkOp(ir.OpSigmoid, x), []arg{{ir.F32, []int64{2}, []float64{0, 2}}}, out(ir.F32, 2), []float64{0.5, f32(0.8807970779778823)}},
		{"gelu erf form f32", mkOp(ir.OpGelu, x), []arg{{ir.F32, []int64{3}, []float64{0, 1, -1}}}, out(ir.F32, 3),
			[]float64{0, f32(0.8413447460685429), f32(-0.15865525393145707)}},
		{"gelu bf16 rounds on store", mkOp(ir.OpGelu, x), []arg{{ir.BF16, []int64{1}, []float64{1}}}, out(ir.BF16, 1), []float64{0.83984375}},
		{"where", mkOp(ir.OpWhere, c, x, ir.Float(-1)),
			[]arg{{ir.Bool, []int64{3}, []float64{1, 0, 1}}, {ir.F32, []int64{3}, []float64{5, 6, 7}}},
			out(ir.F32, 3), []float64{5, -1, 7}},
	}
	for _, tc := range cases {
		got, err := runKernel(t, tc.op, tc.ins, tc.out)
		if assert.NoError(t, err, "%s", tc.name) {
			assert.Empty(t, floatsDiff(tc.want, got[0]), "%s (-want +got)", tc.name)
		}
	}
}

func castOp(to string) *ir.Op {
	op := mkOp(ir.OpCast, val("x"))
	op.SetAttr("dtype", ir.AttrValue{Kind: ir.KindWord, Word: to})
	return op
}

func TestCastRules(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		in   arg
		to   ir.DType
		want []float64
	}{
		{arg{ir.F32, []int64{5}, []float64{-3.7, 3.7, nan, 1e10, -1e10}}, ir.I32, []float64{-3, 3, 0, math.MaxInt32, math.MinInt32}},
		{arg{ir.F32, []int64{3}, []float64{0, -0.5, nan}}, ir.Bool, []float64{0, 1, 1}},
		{arg{ir.Bool, []int64{2}, []float64{1, 0}}, ir.F32, []float64{1, 0}},
		{arg{ir.F32, []int64{2}, []float64{0.1, 65520}}, ir.F16, []float64{0.0999755859375, math.Inf(1)}},
		{arg{ir.F32, []int64{1}, []float64{0.1}}, ir.BF16, []float64{0.10009765625}},
		{arg{ir.I64, []int64{2}, []float64{1 << 32, -1}}, ir.I32, []float64{0, -1}},
		{arg{ir.I32, []int64{1}, []float64{16777217}}, ir.F32, []float64{16777216}},
		{arg{ir.I32, []int64{2}, []float64{0, -2}}, ir.Bool, []float64{0, 1}},
		{arg{ir.F64, []int64{1}, []float64{1 + 0x1p-30}}, ir.F32, []float64{1}},
	}
	for _, tc := range cases {
		got, err := runKernel(t, castOp(tc.to.String()), []arg{tc.in}, out(tc.to, tc.in.shape...))
		if assert.NoError(t, err, "cast %s->%s", tc.in.dt, tc.to) {
			assert.Empty(t, floatsDiff(tc.want, got[0]), "cast %s %v -> %s (-want +got)", tc.in.dt, tc.in.xs, tc.to)
		}
	}
}

func reduceOp(code ir.Opcode, keep bool, axes ...int64) *ir.Op {
	op := mkOp(code, val("x"))
	op.SetAttr("axes", ir.AttrValue{Kind: ir.KindInts, Ints: axes})
	if keep {
		op.SetAttr("keepdim", ir.AttrValue{Kind: ir.KindBool, Bool: true})
	}
	return op
}

func TestReductions(t *testing.T) {
	m23 := []float64{1, 2, 3, 4, 5, 6}
	cases := []struct {
		name string
		op   *ir.Op
		in   arg
		out  []runtime.TensorShape
		want []float64
	}{
		{"sum axis 1", reduceOp(ir.OpSum, false, 1), arg{ir.F32, []int64{2, 3}, m23}, out(ir.F32, 2), []float64{6, 15}},
		{"sum axis 0 keepdim", reduceOp(ir.OpSum, true, 0), arg{ir.F32, []int64{2, 3}, m23}, out(ir.F32, 1, 3), []float64{5, 7, 9}},
		{"sum all", reduceOp(ir.OpSum, false, 0, 1), arg{ir.F32, []int64{2, 3}, m23}, out(ir.F32), []float64{21}},
		{"mean", reduceOp(ir.OpMean, false, 1), arg{ir.F32, []int64{2, 3}, m23}, out(ir.F32, 2), []float64{2, 5}},
		{"max", reduceOp(ir.OpReduceMax, false, 0), arg{ir.F32, []int64{2, 3}, []float64{1, 9, math.NaN(), 4, 5, 6}}, out(ir.F32, 3), []float64{4, 9, math.NaN()}},
		{"i32 sum wraps", reduceOp(ir.OpSum, false, 0), arg{ir.I32, []int64{2}, []float64{math.MaxInt32, 1}}, out(ir.I32), []float64{math.MinInt32}},
		{"i32 max", reduceOp(ir.OpReduceMax, false, 1), arg{ir.I32, []int64{2, 2}, []float64{-5, -7, 3, 2}}, out(ir.I32, 2), []float64{-5, 3}},
		// bf16 accumulates in f32: 256+1+1 = 258 (bf16 accumulation would stay 256).
		{"bf16 sums in f32", reduceOp(ir.OpSum, false, 0), arg{ir.BF16, []int64{3}, []float64{256, 1, 1}}, out(ir.BF16), []float64{258}},
		// f32 accumulates in index order: 2^24 + 1 + 1 = 2^24 (each +1 rounds away).
		{"f32 sums in index order", reduceOp(ir.OpSum, false, 0), arg{ir.F32, []int64{3}, []float64{16777216, 1, 1}}, out(ir.F32), []float64{16777216}},
		{"f32 order matters", reduceOp(ir.OpSum, false, 0), arg{ir.F32, []int64{3}, []float64{1, 1, 16777216}}, out(ir.F32), []float64{16777218}},
	}
	for _, tc := range cases {
		got, err := runKernel(t, tc.op, []arg{tc.in}, tc.out)
		if assert.NoError(t, err, "%s", tc.name) {
			assert.Empty(t, floatsDiff(tc.want, got[0]), "%s (-want +got)", tc.name)
		}
	}
}

func TestMatmul(t *testing.T) {
	a := arg{ir.F32, []int64{2, 3}, []float64{1, 2, 3, 4, 5, 6}}
	b := arg{ir.F32, []int64{3, 2}, []float64{7, 8, 9, 10, 11, 12}}
	got, err := runKernel(t, mkOp(ir.OpMatmul, val("a"), val("b")), []arg{a, b}, out(ir.F32, 2, 2))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{58, 64, 139, 154}, got[0]), "matmul (-want +got)")
	// Batched a with a shared b, and batched a with batched b.
	ab := arg{ir.BF16, []int64{2, 1, 2}, []float64{1, 2, 3, 4}}
	bs := arg{ir.BF16, []int64{2, 2}, []float64{1, 0, 0, 1}}
	got, err = runKernel(t, mkOp(ir.OpMatmul, val("a"), val("b")), []arg{ab, bs}, out(ir.BF16, 2, 1, 2))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{1, 2, 3, 4}, got[0]), "batched a, shared b (-want +got)")
	bb := arg{ir.BF16, []int64{2, 2, 1}, []float64{1, 1, 2, 0}}
	got, err = runKernel(t, mkOp(ir.OpMatmul, val("a"), val("b")), []arg{ab, bb}, out(ir.BF16, 2, 1, 1))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{3, 6}, got[0]), "batched (-want +got)")
	// bf16 products accumulate in f32: 256*1 + 1*1 + 1*1 = 258.
	got, err = runKernel(t, mkOp(ir.OpMatmul, val("a"), val("b")),
		[]arg{{ir.BF16, []int64{1, 3}, []float64{256, 1, 1}}, {ir.BF16, []int64{3, 1}, []float64{1, 1, 1}}}, out(ir.BF16, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, 258.0, got[0][0], "bf16 matmul accumulation")
}

// A fusion keeps f16 intermediates in f32: (2048 + 1) - 2048 is 1 fused but
// 0 as two separate f16 ops.
func TestFusionKeepsIntermediatesInF32(t *testing.T) {
	x := val("x")
	t1, t2, t3 := val("t1"), val("t2"), val("t3")
	body := &ir.Block{Ops: []*ir.Op{
		{Code: ir.OpAdd, Operands: []*ir.Value{x, ir.Float(1)}, Results: []*ir.Value{t1}},
		{Code: ir.OpSub, Operands: []*ir.Value{t1, ir.Float(2048)}, Results: []*ir.Value{t2}},
		reduceOpNamed(t2, t3),
		{Code: ir.OpYield, Operands: []*ir.Value{t2, t3}},
	}}
	fusion := &ir.Op{Code: ir.OpFusion, Operands: []*ir.Value{x}, Body: body, Results: []*ir.Value{val("r0"), val("r1")}}
	in := arg{ir.F16, []int64{2, 2}, []float64{2048, 2048, 2048, 2050}}
	got, err := runKernel(t, fusion, []arg{in}, []runtime.TensorShape{{DType: ir.F16, Shape: []int64{2, 2}}, {DType: ir.F16, Shape: []int64{2}}})
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{1, 1, 1, 3}, got[0]), "fused (-want +got)")
	assert.Empty(t, floatsDiff([]float64{2, 4}, got[1]), "fused trailing sum (-want +got)")
	// The same ops one at a time round after each: 2048+1 -> 2048, -2048 -> 0.
	first, err := runKernel(t, mkOp(ir.OpAdd, x, ir.Float(1)), []arg{in}, out(ir.F16, 2, 2))
	require.NoError(t, err)
	second, err := runKernel(t, mkOp(ir.OpSub, x, ir.Float(2048)), []arg{{ir.F16, []int64{2, 2}, first[0]}}, out(ir.F16, 2, 2))
	require.NoError(t, err)
	assert.Empty(t, floatsDiff([]float64{0, 0, 0, 4}, second[0]), "unfused (-want +got)")
}

func reduceOpNamed(x, res *ir.Value) *ir.Op {
	op := &ir.Op{Code: ir.OpSum, Operands: []*ir.Value{x}, Results: []*ir.Value{res}}
	op.SetAttr("axes", ir.AttrValue{Kind: ir.KindInts, Ints: []int64{1}})
	return op
}

func TestCompileErrors(t *testing.T) {
	x, y := val("x"), val("y")
	cases := []struct {
		spec runtime.KernelSpec
		want string
	}{
		{runtime.KernelSpec{Op: mkOp(ir.OpExp, x), Inputs: out(ir.I32, 2), Outputs: out(ir.I32, 2)}, "float tensor"},
		{runtime.KernelSpec{Op: mkOp(ir.OpAdd, x, y), Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{2}}, {DType: ir.F32, Shape: []int64{3}}}, Outputs: out(ir.F32, 3)}, "do not broadcast"},
		{runtime.KernelSpec{Op: mkOp(ir.OpAdd, x, y), Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{2}}, {DType: ir.I32, Shape: []int64{2}}}, Outputs: out(ir.F32, 2)}, "different dtypes"},
		{runtime.KernelSpec{Op: mkOp(ir.OpAdd, x, y), Inputs: out(ir.F32, 2), Outputs: out(ir.F32, 2)}, "tensor operands"},
		{runtime.KernelSpec{Op: mkOp(ir.OpAdd, x, ir.Float(1)), Inputs: out(ir.F32, 2), Outputs: out(ir.F32, 3)}, "spec wants"},
		{runtime.KernelSpec{Op: &ir.Op{Code: ir.OpAlloc}}, "not a compute op"},
		{runtime.KernelSpec{Op: reduceOp(ir.OpSum, false, 2), Inputs: out(ir.F32, 2), Outputs: out(ir.F32)}, "out of range"},
		{runtime.KernelSpec{Op: reduceOp(ir.OpMean, false, 0), Inputs: out(ir.I32, 2), Outputs: out(ir.I32)}, "cannot reduce"},
		// ir.ReducedAxes: the one answer on negative axes, as the checker and codegen give it
		{runtime.KernelSpec{Op: reduceOp(ir.OpSum, false, -1), Inputs: out(ir.F32, 2, 3), Outputs: out(ir.F32, 2)}, "axis -1 is out of range for a rank-2 input"},
		{runtime.KernelSpec{Op: mkOp(ir.OpMatmul, x, y), Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{2, 3}}, {DType: ir.F32, Shape: []int64{2, 3}}}, Outputs: out(ir.F32, 2, 3)}, "contraction"},
		{runtime.KernelSpec{Op: mkOp(ir.OpWhere, x, y, y), Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{2}}, {DType: ir.F32, Shape: []int64{2}}, {DType: ir.F32, Shape: []int64{2}}}, Outputs: out(ir.F32, 2)}, "want bool"},
		{runtime.KernelSpec{Op: castOp("f8"), Inputs: out(ir.F32, 2), Outputs: out(ir.F32, 2)}, "unknown dtype"},
	}
	for _, c := range cases {
		_, err := Compile(&c.spec, nil)
		assert.ErrorContains(t, err, c.want, "%s", c.spec.Op.Code)
	}
}
