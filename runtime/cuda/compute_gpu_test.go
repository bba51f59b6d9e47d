package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/codegen/codegentest"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/sim"
)

// The compute kernels on the GPU against the CPU runtime: every case of
// codegen's golden set, every compute op (and fusion) of the testdata
// programs after lowering, odd, empty and large sizes, and matmul through
// cuBLAS and through the tiled kernel. Fresh random inputs; the outputs are
// poisoned (0xFF bytes: NaN, -1, true) before a run, and poisoned again
// (0x55) for a second run that must give the same bits, so an element a
// kernel fails to write cannot pass.

// gpuCase is one op to run on both runtimes.
type gpuCase struct {
	name      string
	op        *ir.Op
	ins, outs []codegen.Shape
	impl      string // matmul: "tiled" forces the generated kernel
}

// maxCaseElements keeps the CPU reference affordable.
const maxCaseElements = 1 << 25

func (c gpuCase) elements() int64 {
	var n int64
	for _, s := range append(append([]codegen.Shape{}, c.ins...), c.outs...) {
		n += ir.Product(s.Shape)
	}
	return n
}

func builderCase(t testing.TB, name string, build func(b *ir.Builder) *ir.Op) gpuCase {
	t.Helper()
	c, err := makeCase(name, build)
	require.NoError(t, err)
	return c
}

func makeCase(name string, build func(b *ir.Builder) *ir.Op) (gpuCase, error) {
	b := ir.NewBuilder(ir.LinearMesh(1))
	op := build(b)
	var ins []codegen.Shape
	for _, v := range op.Operands {
		if tt := v.Tensor(); tt != nil {
			ins = append(ins, codegen.Shape{DType: tt.DType, Shape: tt.Shape()})
		}
	}
	var outs []codegen.Shape
	var err error
	if op.Code == ir.OpMatmul {
		bt, m, _, n, _, derr := codegen.MatmulDims(ins[0], ins[1])
		err = derr
		lead := ins[0].Shape[:len(ins[0].Shape)-2]
		_ = bt
		outs = []codegen.Shape{{DType: ins[0].DType, Shape: append(append([]int64{}, lead...), m, n)}}
	} else {
		outs, err = codegen.ResultShapes(op, ins)
	}
	if err != nil {
		return gpuCase{}, fmt.Errorf("%s: %v", name, err)
	}
	return gpuCase{name: name, op: op, ins: ins, outs: outs}, nil
}

// goldenCases are codegen's golden set.
func goldenCases(t testing.TB) []gpuCase {
	var cs []gpuCase
	for _, c := range codegentest.Cases {
		if c.Name == "loop_index_scalar" {
			continue // a runtime scalar operand: runtime.Launch passes tensors only
		}
		cs = append(cs, builderCase(t, "golden/"+c.Name, c.Build))
	}
	return cs
}

// sizeCases: a pointwise chain and reductions over 1 element, sizes that
// are not a multiple of the vector width, empty tensors and large ones.
func sizeCases(t testing.TB) []gpuCase {
	var cs []gpuCase
	for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.F16, ir.I32} {
		for _, n := range []int64{1, 3, 7, 1023, 0, 1<<22 + 5} {
			cs = append(cs, builderCase(t, fmt.Sprintf("chain/%s[%d]", dt, n), func(b *ir.Builder) *ir.Op {
				x, y := codegentest.In(b, "x", dt, n), codegentest.In(b, "y", dt, n)
				return codegentest.Fusion(b, codegentest.Vals(x, y), func() []*ir.Value {
					m := b.Binary(ir.OpMul, x, ir.Float(3))
					a := b.Binary(ir.OpAdd, m, y)
					return codegentest.Vals(b.Unary(ir.OpRelu, b.Binary(ir.OpSub, a, ir.Float(1))))
				})
			}))
		}
	}
	// broadcasts on many blocks: a bias along the innermost axis and a
	// per-row scale, in 16-byte vectors (bf16: 8, f32: 4), and an f16
	// input beside an f32 one (vectors of 4, 8 bytes of f16)
	for _, dt := range []ir.DType{ir.BF16, ir.F32} {
		cs = append(cs, builderCase(t, fmt.Sprintf("broadcast-vector/%s[4099, 1032]", dt), func(b *ir.Builder) *ir.Op {
			x, bias, scale := codegentest.In(b, "x", dt, 4099, 1032), codegentest.In(b, "bias", dt, 1032), codegentest.In(b, "scale", dt, 4099, 1)
			return codegentest.Fusion(b, codegentest.Vals(x, bias, scale), func() []*ir.Value {
				return codegentest.Vals(b.Binary(ir.OpMul, b.Binary(ir.OpAdd, x, bias), scale))
			})
		}))
	}
	cs = append(cs, builderCase(t, "broadcast-vector/f16+f32[3, 77, 64]", func(b *ir.Builder) *ir.Op {
		x, y := codegentest.In(b, "x", ir.F16, 3, 77, 64), codegentest.In(b, "y", ir.F32, 77, 64)
		return codegentest.Fusion(b, codegentest.Vals(x, y), func() []*ir.Value {
			return codegentest.Vals(b.Binary(ir.OpAdd, codegentest.Cast(b, x, ir.F32), y))
		})
	}))
	// a pointwise value yielded beside a rows reduction (softmax's exp and
	// its sum), both stored as the rows are visited, in vectors
	cs = append(cs, builderCase(t, "rows-vector-yield/bf16[513, 2048]", func(b *ir.Builder) *ir.Op {
		x := codegentest.In(b, "x", ir.BF16, 513, 2048)
		return codegentest.Fusion(b, codegentest.Vals(x), func() []*ir.Value {
			ex := b.Unary(ir.OpExp, x)
			return codegentest.Vals(ex, codegentest.Reduce(b, ir.OpSum, ex, false, 1))
		})
	}))
	red := []struct {
		name  string
		dt    ir.DType
		code  ir.Opcode
		shape []int64
		axes  []int64
	}{
		{"sum-rows-block", ir.F32, ir.OpSum, []int64{1000, 4099}, []int64{1}},
		{"sum-rows-warp", ir.BF16, ir.OpSum, []int64{4097, 33}, []int64{1}},
		{"max-columns", ir.I32, ir.OpReduceMax, []int64{4097, 33}, []int64{0}},
		{"sum-columns-vector", ir.BF16, ir.OpSum, []int64{2, 4, 513, 1032}, []int64{1}}, // tp.PeersFirst's sum of slots: 16-byte loads
		{"sum-rows-warp-vector", ir.BF16, ir.OpSum, []int64{4097, 1024}, []int64{1}},    // 16-byte loads along the rows
		{"max-rows-block-vector", ir.F32, ir.OpReduceMax, []int64{1000, 4100}, []int64{1}},
		{"mean-columns-vector", ir.F32, ir.OpMean, []int64{7, 3, 4100}, []int64{0, 1}},
		{"mean-all", ir.F32, ir.OpMean, []int64{1<<15 + 3}, []int64{0}}, // the CPU sums in order: at 1 Mi its own f32 error passes 1e-5
		{"sum-one", ir.F16, ir.OpSum, []int64{1, 1}, []int64{0, 1}},
		{"sum-empty-rows", ir.F32, ir.OpSum, []int64{0, 9}, []int64{1}},
		{"max-empty-axis", ir.F32, ir.OpReduceMax, []int64{5, 0}, []int64{1}},
	}
	for _, r := range red {
		cs = append(cs, builderCase(t, "reduce/"+r.name, func(b *ir.Builder) *ir.Op {
			x := codegentest.In(b, "x", r.dt, r.shape...)
			return codegentest.Fusion(b, codegentest.Vals(x), func() []*ir.Value {
				return codegentest.Vals(codegentest.Reduce(b, r.code, b.Unary(ir.OpAbs, x), false, r.axes...))
			})
		}))
	}
	return cs
}

// matmulCases run through cuBLAS (when it loads) and the tiled kernel.
func matmulCases(t testing.TB) []gpuCase {
	shapes := []struct {
		dt   ir.DType
		a, b []int64
	}{
		{ir.F32, []int64{100, 70}, []int64{70, 130}},
		{ir.BF16, []int64{3, 65, 17}, []int64{3, 17, 64}},
		{ir.F16, []int64{2, 2, 8, 8}, []int64{8, 8}},
		{ir.F64, []int64{33, 9}, []int64{9, 5}},
		{ir.F64, []int64{5, 0}, []int64{0, 3}},
		{ir.F32, []int64{0, 4}, []int64{4, 3}},
		{ir.F32, []int64{1, 1}, []int64{1, 1}},
		{ir.F32, []int64{256, 512}, []int64{512, 384}},
		{ir.BF16, []int64{128, 2048}, []int64{2048, 256}},
		{ir.F16, []int64{4, 128, 256}, []int64{4, 256, 96}},
	}
	var cs []gpuCase
	for _, impl := range []string{"auto", "tiled"} {
		for _, s := range shapes {
			c := builderCase(t, fmt.Sprintf("matmul-%s/%s%v×%v", impl, s.dt, s.a, s.b), func(b *ir.Builder) *ir.Op {
				return b.Op(ir.OpMatmul, codegentest.In(b, "a", s.dt, s.a...), codegentest.In(b, "b", s.dt, s.b...)).Op()
			})
			c.impl = impl
			cs = append(cs, c)
		}
	}
	return cs
}

// repoFile finds path relative to the repository root, from the package
// directory (go test) or the root (the device script).
func repoFile(path string) string {
	for _, pre := range []string{"", "../../"} {
		if _, err := os.Stat(pre + path); err == nil {
			return pre + path
		}
	}
	return path
}

// programCases are the compute ops of every testdata program that lowers,
// with the local shapes of its mesh.
func programCases(t testing.TB) []gpuCase {
	files, _ := filepath.Glob(filepath.Join(repoFile("testdata"), "*.hir"))
	sort.Strings(files)
	var cs []gpuCase
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		prog, err := parser.Parse(filepath.Base(f), src)
		if err != nil {
			continue // the error programs
		}
		if err := passes.Lower(prog, &passes.Context{}); err != nil {
			continue
		}
		for _, op := range computeOps(prog) {
			ins, outs, err := codegen.LocalShapes(op, prog.Mesh.Size())
			if !assert.NoError(t, err, "%s: %s", f, op.Pos) {
				continue
			}
			cs = append(cs, gpuCase{name: fmt.Sprintf("program/%s:%d/%s", filepath.Base(f), op.Pos.Line, op.Code), op: op, ins: ins, outs: outs})
		}
	}
	return cs
}

// computeOps lists the ops of a lowered program that become kernels:
// fusions, matmuls, and pointwise ops and reductions outside fusions
// (loop bodies included, fusion bodies not).
func computeOps(prog *ir.Program) []*ir.Op {
	var ops []*ir.Op
	var walk func(b *ir.Block)
	walk = func(b *ir.Block) {
		for _, op := range b.Ops {
			switch {
			case op.Code == ir.OpFusion, op.Code == ir.OpMatmul, op.Code.IsPointwise(), op.Code.IsReduction():
				ops = append(ops, op)
			case op.Body != nil:
				walk(op.Body)
			}
		}
	}
	if prog.Body != nil {
		walk(prog.Body)
	}
	return ops
}

func runtimeShapes(ss []codegen.Shape) []runtime.TensorShape {
	out := make([]runtime.TensorShape, len(ss))
	for i, s := range ss {
		out[i] = runtime.TensorShape(s)
	}
	return out
}

// runCase compiles and runs c on dev, with the outputs poisoned with
// poison bytes first; it returns the outputs and the kernel.
func runCase(dev runtime.Device, c gpuCase, inputs []*host.Array, poisons ...byte) ([][]*host.Array, runtime.Kernel, error) {
	spec := &runtime.KernelSpec{Op: c.op, Inputs: runtimeShapes(c.ins), Outputs: runtimeShapes(c.outs)}
	k, err := dev.Compile(spec)
	if err != nil {
		return nil, nil, err
	}
	var bufs []runtime.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	s := dev.DefaultStream()
	var args []runtime.Tensor
	for i, in := range inputs {
		b, err := dev.Alloc(int64(len(in.Data)), ir.Global)
		if err != nil {
			return nil, nil, err
		}
		bufs = append(bufs, b)
		t := runtime.Tensor{Buf: b, DType: c.ins[i].DType, Shape: c.ins[i].Shape}
		if err := dev.CopyFromHost(t, in.Data, s); err != nil {
			return nil, nil, err
		}
		args = append(args, t)
	}
	var outs []runtime.Tensor
	for _, o := range c.outs {
		b, err := dev.Alloc(ir.Product(o.Shape)*int64(o.DType.Size()), ir.Global)
		if err != nil {
			return nil, nil, err
		}
		bufs = append(bufs, b)
		outs = append(outs, runtime.Tensor{Buf: b, DType: o.DType, Shape: o.Shape})
	}
	args = append(args, outs...)
	var runs [][]*host.Array
	for _, p := range poisons {
		for _, o := range outs {
			if err := dev.CopyFromHost(o, bytes.Repeat([]byte{p}, int(o.Bytes())), s); err != nil {
				return nil, nil, err
			}
		}
		if err := dev.Launch(k, args, s); err != nil {
			return nil, nil, err
		}
		var res []*host.Array
		for _, o := range outs {
			a := host.New(o.DType, o.Shape)
			if err := dev.CopyToHost(a.Data, o, s); err != nil {
				return nil, nil, err
			}
			res = append(res, a)
		}
		if err := s.Synchronize(); err != nil {
			return nil, nil, err
		}
		runs = append(runs, res)
	}
	return runs, k, nil
}

// tolerance is the relative error allowed per dtype (ints: exact).
func tolerance(dt ir.DType) float64 {
	switch dt {
	case ir.F64:
		return 1e-12
	case ir.F32:
		return 1e-5
	case ir.F16:
		return 1e-3
	case ir.BF16:
		return 1e-2
	}
	return 0
}

// compareOutput checks got against the CPU's want. Pointwise results are
// compared element by element (relative error); a reduction or a matmul
// sums in another order than the CPU, so its error is taken relative to
// the largest magnitude of the output (normwise), as sums with
// cancellation have no meaningful elementwise relative error.
func compareOutput(got, want *host.Array, normwise, exact bool) (maxErr float64, err error) {
	if !want.DType.IsFloat() || exact {
		return 0, host.Equal(got, want)
	}
	rtol := tolerance(want.DType)
	scale := 0.0
	if normwise {
		for i := int64(0); i < want.Len(); i++ {
			if v := math.Abs(want.At(i)); !math.IsInf(v, 0) && v > scale {
				scale = v
			}
		}
	}
	bad, first := 0, int64(-1)
	for i := int64(0); i < want.Len(); i++ {
		g, w := got.At(i), want.At(i)
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) != math.IsNaN(g) {
				bad++
			}
			continue
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if g != w {
				bad++
			}
			continue
		}
		den := math.Max(math.Abs(w), scale)
		e := math.Abs(g - w)
		if den > 0 {
			e /= den
		}
		maxErr = math.Max(maxErr, e)
		if e > rtol {
			bad++
			if first < 0 {
				first = i
			}
		}
	}
	if bad > 0 {
		at := "a NaN or infinity"
		if first >= 0 {
			at = fmt.Sprintf("%v: got %g, want %g", host.Index(want.Shape, first), got.At(first), want.At(first))
		}
		return maxErr, fmt.Errorf("%d of %d elements off by more than %g (max %.3g); first %s", bad, want.Len(), rtol, maxErr, at)
	}
	return maxErr, nil
}

func inputsFor(c gpuCase, seed uint64) []*host.Array {
	var in []*host.Array
	for i, s := range c.ins {
		in = append(in, host.Random(s.DType, s.Shape, seed+uint64(i)*7919))
	}
	return in
}

func openSim(t testing.TB) runtime.Device {
	t.Helper()
	rt, err := sim.New(runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	dev, err := rt.Device(0)
	require.NoError(t, err)
	return dev
}

func TestComputeAgainstCPU(t *testing.T) {
	d := openSingle(t)
	ref := openSim(t)
	t.Logf("matmul: %s", CUBLAS())
	var cases []gpuCase
	cases = append(cases, goldenCases(t)...)
	cases = append(cases, sizeCases(t)...)
	cases = append(cases, programCases(t)...)
	cases = append(cases, matmulCases(t)...)
	impls := map[string]int{}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n := c.elements(); n > maxCaseElements {
				t.Skipf("%d elements: too many for the CPU reference", n)
			}
			if c.impl == "tiled" {
				saved := d.Tune.Matmul
				d.Tune.Matmul = "tiled"
				t.Cleanup(func() { d.Tune.Matmul = saved })
			}
			inputs := inputsFor(c, uint64(1000+i))
			want, _, err := runCase(ref, c, inputs, 0)
			require.NoError(t, err, "cpu")
			runs, k, err := runCase(d, c, inputs, 0xFF, 0x55)
			require.NoError(t, err, "gpu")
			impl, from, note := KernelImpl(k)
			impls[impl]++
			normwise := c.op.Code == ir.OpMatmul || hasReduction(c.op)
			exact := impl == ImplTiled // the tiled kernel sums as the CPU does
			for o := range want[0] {
				if !bitsEqual(runs[0][o], runs[1][o]) {
					assert.NoError(t, host.Equal(runs[1][o], runs[0][o]), "output %d: two runs over differently poisoned outputs differ (an element left unwritten?)", o)
				}
				maxErr, err := compareOutput(runs[0][o], want[0][o], normwise, exact)
				if assert.NoError(t, err, "output %d (%s, kernel %s, %s)", o, c.outs[o], k.Name(), impl) {
					t.Logf("output %d %s: max relative error %.3g (kernel %s, %s, image from %s%s)", o, c.outs[o], maxErr, k.Name(), impl, from, noteSuffix(note))
				}
			}
		})
	}
	t.Logf("kernels by implementation: %v; kernel cache: %+v", impls, gpu.KernelCache())
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return "; " + note
}

func bitsEqual(a, b *host.Array) bool { return bytes.Equal(a.Data, b.Data) }

func hasReduction(op *ir.Op) bool {
	if op.Code.IsReduction() {
		return true
	}
	found := false
	if op.Body != nil {
		op.Body.Walk(func(o *ir.Op) {
			if o.Code.IsReduction() {
				found = true
			}
		})
	}
	return found
}

// Strided arguments and outputs that alias an input go through staging.
func TestLaunchStridedAndAliased(t *testing.T) {
	d := openSingle(t)
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := codegentest.In(b, "x", ir.F32, 4, 3)
	op := b.Op(ir.OpMul, x, ir.Float(2)).Op()
	spec := &runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{4, 3}}}, Outputs: []runtime.TensorShape{{DType: ir.F32, Shape: []int64{4, 3}}}}
	k, err := d.Compile(spec)
	require.NoError(t, err)
	// x is the transpose of a contiguous [3, 4]: strides [1, 4].
	buf, err := d.Alloc(4*12, ir.Global)
	require.NoError(t, err)
	defer d.Free(buf)
	vals := make([]float32, 12)
	raw := make([]byte, 48)
	for i := range vals {
		vals[i] = float32(i) - 5.5
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(vals[i]))
	}
	whole := runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{12}}
	require.NoError(t, d.CopyFromHost(whole, raw, nil))
	xt := runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{4, 3}, Strides: []int64{1, 4}}
	// In place: the output is the input itself.
	require.NoError(t, d.Launch(k, []runtime.Tensor{xt, xt}, nil))
	got := toHost(t, d, whole)
	for i, g := range got {
		require.Equal(t, 2*vals[i], math.Float32frombits(uint32(g)), "element %d", i)
	}
	// A shape the kernel was not compiled for is an error naming it.
	err = d.Launch(k, []runtime.Tensor{whole, whole}, nil)
	assert.ErrorContains(t, err, "the kernel was compiled for f32[4 3]", "launch with the wrong shape")
}

// A matmul's operands that are batches of row-major matrices at a stride
// (a chunk of every rank's block: select axis 1 of [2, 4, 3, 5]) go to
// cuBLAS as they lie, with the output written into such a view too; the
// products equal the host's, element for element in f32 of small
// integers.
func TestMatmulOnStridedViews(t *testing.T) {
	d := openSingle(t)
	b := ir.NewBuilder(ir.LinearMesh(1))
	a := codegentest.In(b, "a", ir.F32, 2, 3, 5)
	w := codegentest.In(b, "w", ir.F32, 5, 4)
	op := b.Op(ir.OpMatmul, a, w).Op()
	shape := func(s ...int64) runtime.TensorShape { return runtime.TensorShape{DType: ir.F32, Shape: s} }
	k, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{shape(2, 3, 5), shape(5, 4)}, Outputs: []runtime.TensorShape{shape(2, 3, 4)}})
	require.NoError(t, err)
	impl, _, note := KernelImpl(k)
	t.Logf("matmul runs on %s %s", impl, note)
	upload := func(vals []float32) runtime.Tensor { return uploadF32(t, d, vals) }
	src := make([]float32, 2*4*3*5) // [2, 4, 3, 5]
	for i := range src {
		src[i] = float32(i%7 - 3)
	}
	wv := make([]float32, 5*4)
	for i := range wv {
		wv[i] = float32(i%5 - 2)
	}
	srcT, wT := upload(src), upload(wv)
	dst := upload(make([]float32, 2*4*3*4)) // [2, 4, 3, 4]
	const chunk = 1
	av := runtime.Tensor{Buf: srcT.Buf, Offset: 4 * chunk * 3 * 5, DType: ir.F32, Shape: []int64{2, 3, 5}, Strides: []int64{60, 5, 1}}
	ov := runtime.Tensor{Buf: dst.Buf, Offset: 4 * 2 * 3 * 4, DType: ir.F32, Shape: []int64{2, 3, 4}, Strides: []int64{48, 4, 1}} // chunk 2
	require.NoError(t, d.Launch(k, []runtime.Tensor{av, runtime.Tensor{Buf: wT.Buf, DType: ir.F32, Shape: []int64{5, 4}}, ov}, nil))
	got := toHost(t, d, dst)
	for r := range 2 {
		for c := range 4 {
			for i := range 3 {
				for j := range 4 {
					want := float32(0)
					if c == 2 {
						for l := range 5 {
							want += src[((r*4+chunk)*3+i)*5+l] * wv[l*4+j]
						}
					}
					at := ((r*4+c)*3+i)*4 + j
					require.Equal(t, want, math.Float32frombits(uint32(got[at])), "rank block %d, chunk %d, [%d, %d]", r, c, i, j)
				}
			}
		}
	}
}

// NVRTC failures carry the log and the path of the source.
func TestCompileFailureShowsLogAndSource(t *testing.T) {
	d := openSingle(t)
	_, err := d.LoadKernel("extern \"C\" __global__ void hir_bad() { this is not C++; }\n", "hir_bad", nil)
	var se *gpu.SourceError
	require.ErrorAs(t, err, &se, "want a *SourceError")
	var ce *gpu.CompileError
	if assert.ErrorAs(t, err, &ce, "no compile log in %v", err) {
		assert.Contains(t, ce.Log, "error", "no compile log in %v", err)
	}
	src, rerr := os.ReadFile(se.SourcePath)
	if assert.NoError(t, rerr, "source file %q", se.SourcePath) {
		assert.Contains(t, string(src), "this is not C++", "source file %q", se.SourcePath)
	}
	os.Remove(se.SourcePath)
	t.Logf("the error reads:\n%v", err)
}

// Unsupported combinations are refused by codegen before any compile.
func TestCompileRejectsBeforeNVRTC(t *testing.T) {
	d := openSingle(t)
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := codegentest.In(b, "x", ir.I32, 4)
	op := b.Op(ir.OpExp, x).Op()
	op.Pos = ir.NewPos("p.hir", 3, 1)
	before := gpu.KernelCache().Compiles
	_, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{{DType: ir.I32, Shape: []int64{4}}}, Outputs: []runtime.TensorShape{{DType: ir.I32, Shape: []int64{4}}}})
	assert.ErrorContains(t, err, "p.hir:3:1: exp does not take i32", "exp of i32")
	assert.Equal(t, before, gpu.KernelCache().Compiles, "NVRTC ran for an op codegen rejects")
}

// The cases build and the CPU runtime runs them, here too: the GPU test
// must not fail for a fault of its own.
func TestComputeCasesOnCPU(t *testing.T) {
	ref := openSim(t)
	var cases []gpuCase
	cases = append(cases, goldenCases(t)...)
	cases = append(cases, sizeCases(t)...)
	cases = append(cases, programCases(t)...)
	cases = append(cases, matmulCases(t)...)
	assert.GreaterOrEqual(t, len(cases), 60, "only %d cases", len(cases))
	ran := 0
	for i, c := range cases {
		if c.elements() > 1<<16 {
			continue
		}
		inputs := inputsFor(c, uint64(1000+i))
		runs, _, err := runCase(ref, c, inputs, 0xFF, 0x55)
		if !assert.NoError(t, err, c.name) {
			continue
		}
		for o := range runs[0] {
			_, err := compareOutput(runs[1][o], runs[0][o], true, false)
			assert.NoError(t, err, "%s: output %d", c.name, o)
		}
		ran++
	}
	t.Logf("%d cases, %d small enough to run here", len(cases), ran)
}

// uploadF32 puts vals on d as a flat f32 tensor, freed when t ends.
func uploadF32(t *testing.T, d *Device, vals []float32) runtime.Tensor {
	t.Helper()
	buf, err := d.Alloc(int64(4*len(vals)), ir.Global)
	require.NoError(t, err)
	t.Cleanup(func() { d.Free(buf) })
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	whole := runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{int64(len(vals))}}
	require.NoError(t, d.CopyFromHost(whole, raw, nil))
	return whole
}

// TestMatmulAccumulate: matmul accumulate=true adds a[2, 3, 5] × w[5, 4]
// into what its destination holds, on cuBLAS (beta = 1, in place) and on
// the tiled kernel, for a contiguous destination, one chunk of a larger
// tensor (strided, as cuBLAS takes it) and a transposed view (staged:
// cuBLAS's temporary must start as the destination). Small integers: every
// sum is exact, so the result must equal the host's.
func TestMatmulAccumulate(t *testing.T) {
	d := openSingle(t)
	f32 := func(s ...int64) runtime.TensorShape { return runtime.TensorShape{DType: ir.F32, Shape: s} }
	av, wv := make([]float32, 2*3*5), make([]float32, 5*4)
	for i := range av {
		av[i] = float32(i%7 - 3)
	}
	for i := range wv {
		wv[i] = float32(i%5 - 2)
	}
	for _, mode := range []string{"cublas", "tiled"} {
		for _, layout := range []string{"contiguous", "chunk", "transposed"} {
			t.Run(mode+"/"+layout, func(t *testing.T) {
				saved := d.Tune.Matmul
				d.Tune.Matmul = mode
				t.Cleanup(func() { d.Tune.Matmul = saved })
				b := ir.NewBuilder(ir.LinearMesh(1))
				a := codegentest.In(b, "a", ir.F32, 2, 3, 5)
				w := codegentest.In(b, "w", ir.F32, 5, 4)
				dst := codegentest.In(b, "dst", ir.F32, 2, 3, 4)
				op := b.Op(ir.OpMatmul, a, w, dst).Bool("accumulate", true).Op()
				k, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{f32(2, 3, 5), f32(5, 4), f32(2, 3, 4)}, Outputs: []runtime.TensorShape{f32(2, 3, 4)}})
				require.NoError(t, err)
				impl, _, note := KernelImpl(k)
				if mode == "cublas" && impl != ImplCUBLAS {
					t.Skipf("no cuBLAS here: %s", note)
				}
				// the destination's elements at [r, i, j] within a buffer of 2*3*4*3
				base := make([]float32, 2*3*4*3)
				for i := range base {
					base[i] = float32(i%9 - 4)
				}
				buf := uploadF32(t, d, base)
				ov := runtime.Tensor{Buf: buf.Buf, DType: ir.F32, Shape: []int64{2, 3, 4}}
				at := func(r, i, j int) int { return (r*3+i)*4 + j }
				switch layout {
				case "chunk": // [2, 3(chunks), 3, 4], chunk 1
					ov.Offset, ov.Strides = 4*3*4, []int64{36, 4, 1}
					at = func(r, i, j int) int { return 12 + r*36 + i*4 + j }
				case "transposed": // rows and columns swapped in memory: [2, 4, 3] read as [2, 3, 4]
					ov.Strides = []int64{12, 1, 3}
					at = func(r, i, j int) int { return r*12 + j*3 + i }
				}
				args := []runtime.Tensor{{Buf: uploadF32(t, d, av).Buf, DType: ir.F32, Shape: []int64{2, 3, 5}}, {Buf: uploadF32(t, d, wv).Buf, DType: ir.F32, Shape: []int64{5, 4}}, ov, ov}
				require.NoError(t, d.Launch(k, args, nil))
				got := toHost(t, d, buf)
				want := slices.Clone(base)
				for r := range 2 {
					for i := range 3 {
						for j := range 4 {
							for l := range 5 {
								want[at(r, i, j)] += av[(r*3+i)*5+l] * wv[l*4+j]
							}
						}
					}
				}
				for e := range want {
					require.Equal(t, want[e], math.Float32frombits(uint32(got[e])), "%s on %s: element %d", layout, impl, e)
				}
			})
		}
	}
}
