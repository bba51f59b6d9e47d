package codegen

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/codegen/codegentest"
	"github.com/hirlab/hir/ir"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// kcase is one op to generate: build makes it with a Builder and returns
// it with the local shapes of its inputs and outputs.
type kcase struct {
	name     string
	build    func(b *ir.Builder) *ir.Op
	strategy Strategy
	tuning   Tuning // zero: DefaultTuning
}

func tensor(dt ir.DType, shape ...int64) *ir.TensorType { return ir.Tensor(dt, shape...) }

// in declares input name of type t.
func in(b *ir.Builder, name string, dt ir.DType, shape ...int64) *ir.Value {
	return b.Input(name, tensor(dt, shape...))
}

func fusion(b *ir.Builder, inputs []*ir.Value, body func() []*ir.Value) *ir.Op {
	return b.Fusion(inputs, body)[0].Def
}

func vals(vs ...*ir.Value) []*ir.Value { return vs }

func cast(b *ir.Builder, x *ir.Value, dt ir.DType) *ir.Value {
	return b.Op(ir.OpCast, x).Word("dtype", dt.String()).Value()
}

func reduce(b *ir.Builder, code ir.Opcode, x *ir.Value, keep bool, axes ...int64) *ir.Value {
	ob := b.Op(code, x).Ints("axes", axes...)
	if keep {
		ob.Bool("keepdim", true)
	}
	return ob.Value()
}

// cases are the golden cases, shared with the GPU tests of runtime/cuda.
var cases = func() []kcase {
	var cs []kcase
	for _, c := range codegentest.Cases {
		cs = append(cs, kcase{name: c.Name, build: c.Build, strategy: Strategy(c.Strategy)})
	}
	// A flat loop unrolled: four vectors a thread loaded before any is
	// computed, then the single-vector remainder, then the scalar tail
	// (257 vectors of 4 and 2 more elements).
	cs = append(cs, kcase{name: "chain_f32_unroll4", strategy: Flat, tuning: Tuning{Unroll: 4},
		build: func(b *ir.Builder) *ir.Op {
			x := codegentest.In(b, "x", ir.F32, 1030)
			return codegentest.Fusion(b, codegentest.Vals(x), func() []*ir.Value {
				m := b.Binary(ir.OpMul, x, ir.Float(1.5))
				return codegentest.Vals(b.Unary(ir.OpRelu, b.Binary(ir.OpAdd, m, ir.Float(0.25))))
			})
		}})
	return cs
}()

// shapesOf returns the local shapes of an op's non-literal operands and of
// its results, from the types the case declared (mesh 1: local = logical).
func shapesOf(t *testing.T, op *ir.Op) (ins, outs []Shape) {
	t.Helper()
	for _, v := range op.Operands {
		switch ty := v.Type.(type) {
		case *ir.TensorType:
			ins = append(ins, Shape{DType: ty.DType, Shape: ty.Shape()})
		case *ir.ScalarType:
			ins = append(ins, Shape{DType: ty.DType})
		}
	}
	p, err := analyze(op, ins, nil, true)
	require.NoError(t, err, "analyze")
	for _, y := range p.yields {
		outs = append(outs, Shape{DType: y.dtype, Shape: y.shape})
	}
	return ins, outs
}

func build(t *testing.T, c kcase) (*Kernel, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder(ir.LinearMesh(1))
	op := c.build(b)
	_, err := b.Program()
	require.NoError(t, err, "%s: the test program does not verify", c.name)
	require.NoError(t, Check(op), "%s: Check", c.name)
	ins, outs := shapesOf(t, op)
	k, err := FusionTuned(op, ins, outs, c.tuning)
	require.NoError(t, err, "%s: Fusion", c.name)
	return k, op
}

// golden is what a golden file holds: the parameters and launch geometry
// as comments, then the source NVRTC compiles.
func golden(k *Kernel) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// kernel %s, strategy %s, work %d\n", k.Name, k.Strategy, k.Work)
	for _, p := range k.Params {
		fmt.Fprintf(&b, "// param %-5s %-40s", p.Name, p.CType)
		switch p.Kind {
		case ParamPointer:
			fmt.Fprintf(&b, " arg %d\n", p.Arg)
		case ParamRuntimeScalar:
			fmt.Fprintf(&b, " arg %d (runtime scalar)\n", p.Arg)
		default:
			fmt.Fprintf(&b, " literal bits %#x\n", p.Bits)
		}
	}
	grid, block := k.Launch(DefaultSMs)
	fmt.Fprintf(&b, "// launch on %d SMs: grid %v, block %v\n\n", DefaultSMs, grid, block)
	b.WriteString(k.Source)
	return b.String()
}

func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, _ := build(t, c)
			assert.Equal(t, c.strategy, k.Strategy, "strategy %s, want %s", k.Strategy, c.strategy)
			path := filepath.Join("testdata", c.name+".cu")
			seen[filepath.Base(path)] = true
			got := golden(k)
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./codegen -update")
			assert.Empty(t, cmp.Diff(string(want), got), "%s differs from the golden file (-want +got)", path)
		})
	}
	// Every golden file belongs to a case, so none goes stale.
	files, _ := filepath.Glob(filepath.Join("testdata", "*.cu"))
	for _, f := range files {
		if !*update {
			assert.True(t, seen[filepath.Base(f)], "%s matches no case; delete it or rerun with -update", f)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, c := range cases {
		k1, _ := build(t, c)
		k2, _ := build(t, c)
		assert.Equal(t, k1.Source, k2.Source, "%s: two generations differ", c.name)
		assert.Equal(t, k1.Name, k2.Name, "%s: two generations differ", c.name)
		assert.True(t, strings.Contains(k1.Source, "void __launch_bounds__(256) "+k1.Name+"("), "%s: the source does not define %s", c.name, k1.Name)
		assert.False(t, strings.Contains(k1.Source, namePlaceholder), "%s: the placeholder name is left in the source", c.name)
	}
}

// The text depends on structure, dtypes and shapes only: not on value
// names, and not on literal values, which travel as parameters.
func TestSourceSharing(t *testing.T) {
	make1 := func(xname string, lit float64, n int64) *Kernel {
		b := ir.NewBuilder(ir.LinearMesh(1))
		x := in(b, xname, ir.F32, n)
		op := fusion(b, vals(x), func() []*ir.Value {
			return vals(b.Op(ir.OpMul, x, ir.Float(lit)).Name(xname + "_m").Value())
		})
		k, err := Fusion(op, []Shape{{ir.F32, []int64{n}}}, []Shape{{ir.F32, []int64{n}}})
		require.NoError(t, err)
		return k
	}
	a, b, c := make1("x", 2, 10), make1("other", 3, 10), make1("x", 2, 11)
	assert.Equal(t, a.Source, b.Source, "renaming values or changing a literal changed the source")
	assert.Equal(t, a.Name, b.Name, "renaming values or changing a literal changed the name")
	assert.NotEqual(t, a.Params[2].Bits, b.Params[2].Bits, "the literals 2 and 3 have the same bits")
	assert.NotEqual(t, a.Name, c.Name, "shapes 10 and 11 gave the same kernel name")
}

func TestUnsupported(t *testing.T) {
	pos := ir.NewPos("t.hir", 3, 5)
	at := func(op *ir.Op) *ir.Op { op.Pos = pos; return op }
	tests := []struct {
		name  string
		build func(b *ir.Builder) *ir.Op
		want  string
	}{
		{"exp on ints", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.I32, 4)
			return fusion(b, vals(x), func() []*ir.Value { return vals(at(b.Op(ir.OpExp, x).Op()).Result()) })
		}, "t.hir:3:5: exp does not take i32 (it takes f32, f16, bf16 or f64)"},
		{"gelu on bool", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.Bool, 4)
			return at(b.Op(ir.OpGelu, x).Op())
		}, "t.hir:3:5: gelu does not take bool (cast to a number first)"},
		{"add on bool", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.Bool, 4)
			return at(b.Op(ir.OpAdd, x, x).Op())
		}, "t.hir:3:5: add does not take bool"},
		{"matmul in a fusion", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4, 4)
			return fusion(b, vals(x), func() []*ir.Value { return vals(at(b.Op(ir.OpMatmul, x, x).Op()).Result()) })
		}, "t.hir:3:5: matmul cannot be fused: a fusion holds pointwise ops and one trailing reduction"},
		{"matmul alone", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4, 4)
			return at(b.Op(ir.OpMatmul, x, x).Op())
		}, "t.hir:3:5: codegen compiles fusions, pointwise ops and reductions, not matmul"},
		{"collective in a fusion", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4)
			return fusion(b, vals(x), func() []*ir.Value { return vals(at(b.Op(ir.OpAllReduce, x).Op()).Result()) })
		}, "all_reduce cannot be fused"},
		{"mean of ints", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.I64, 4)
			return at(b.Op(ir.OpMean, x).Ints("axes", 0).Op())
		}, "t.hir:3:5: mean does not take i64 (it takes f32, f16, bf16 or f64; cast first)"},
		{"op after the reduction", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4)
			return fusion(b, vals(x), func() []*ir.Value {
				s := reduce(b, ir.OpSum, x, false, 0)
				return vals(at(b.Op(ir.OpExp, s).Op()).Result())
			})
		}, "t.hir:3:5: exp follows the reduction sum; a reduction must be the last op of a fusion"},
		{"two reductions", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4, 4)
			return fusion(b, vals(x), func() []*ir.Value {
				s := reduce(b, ir.OpSum, x, false, 0)
				return vals(at(b.Op(ir.OpReduceMax, s).Ints("axes", 0).Op()).Result())
			})
		}, "t.hir:3:5: a fusion holds at most one reduction"},
		{"mixed dtypes", func(b *ir.Builder) *ir.Op {
			x, y := in(b, "x", ir.F32, 4), in(b, "y", ir.F16, 4)
			return at(b.Op(ir.OpAdd, x, y).Op())
		}, "t.hir:3:5: add: %x is f32 but %y is f16; operands share one dtype (insert a cast)"},
		{"where on numbers", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4)
			return at(b.Op(ir.OpWhere, x, x, x).Op())
		}, "t.hir:3:5: where: the condition %x is f32, not bool"},
		{"declared result type disagrees", func(b *ir.Builder) *ir.Op {
			x := in(b, "x", ir.F32, 4)
			return at(b.Op(ir.OpNeg, x).Type(tensor(ir.F16, 4)).Op())
		}, "declared f16, but the operands give f32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder(ir.LinearMesh(1))
			op := tc.build(b)
			err := Check(op)
			require.ErrorContains(t, err, tc.want, "Check")
			assert.IsType(t, ir.ErrorList{}, err, "Check returned %T, want ir.ErrorList", err)
			_, err = Fusion(op, nil, []Shape{})
			assert.Error(t, err, "Fusion accepted what Check rejects")
		})
	}
}

func TestShapeErrors(t *testing.T) {
	f32 := func(shape ...int64) Shape { return Shape{ir.F32, shape} }
	tests := []struct {
		name      string
		build     func(b *ir.Builder) *ir.Op
		ins, outs []Shape
		want      string
	}{
		{"output shape", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpNeg, in(b, "x", ir.F32, 4)).Op()
		}, []Shape{f32(4)}, []Shape{f32(5)}, "neg: result 0 is f32[4], but its output was given as f32[5]"},
		{"input count", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpNeg, in(b, "x", ir.F32, 4)).Op()
		}, []Shape{f32(4), f32(4)}, []Shape{f32(4)}, "neg has 1 non-literal operands, but 2 input shapes were given"},
		{"input dtype", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpNeg, in(b, "x", ir.F32, 4)).Op()
		}, []Shape{{ir.F16, []int64{4}}}, []Shape{f32(4)}, "operand %x is f32, but input 0 was given as f16[4]"},
		{"no broadcast", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpAdd, in(b, "x", ir.F32, 4), in(b, "y", ir.F32, 3)).Op()
		}, []Shape{f32(4), f32(3)}, []Shape{f32(4)}, "add: shapes [4] and [3] do not broadcast"},
		{"axis out of range", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpSum, in(b, "x", ir.F32, 4)).Ints("axes", 1).Op()
		}, []Shape{f32(4)}, []Shape{f32()}, "sum: axis 1 is out of range for a rank-1 input"},
		{"axis twice", func(b *ir.Builder) *ir.Op {
			return b.Op(ir.OpSum, in(b, "x", ir.F32, 4, 2)).Ints("axes", 0, 0).Op()
		}, []Shape{f32(4, 2)}, []Shape{f32(2)}, "sum: axis 0 is listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder(ir.LinearMesh(1))
			op := tc.build(b)
			_, err := Fusion(op, tc.ins, tc.outs)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLiteralBits(t *testing.T) {
	f32 := func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	tests := []struct {
		lit  *ir.Literal
		dt   ir.DType
		want uint64
	}{
		{&ir.Literal{IsFloat: true, Float: 0.1}, ir.F32, f32(0.1)},
		{&ir.Literal{IsFloat: true, Float: 0.1}, ir.F16, f32(0.0999755859375)},
		{&ir.Literal{IsFloat: true, Float: 0.1}, ir.BF16, f32(0.10009765625)},
		{&ir.Literal{IsFloat: true, Float: 65519}, ir.F16, f32(65504)},
		{&ir.Literal{IsFloat: true, Float: 65520}, ir.F16, f32(float32(math.Inf(1)))},
		{&ir.Literal{IsFloat: true, Float: -0x1p-25}, ir.F16, f32(float32(math.Copysign(0, -1)))}, // a tie rounds to even zero
		{&ir.Literal{IsFloat: true, Float: 0x1.8p-25}, ir.F16, f32(0x1p-24)},                      // the smallest subnormal
		{&ir.Literal{IsFloat: true, Float: 1 + 0x1p-8}, ir.BF16, f32(1)},                          // a tie: to even
		{&ir.Literal{IsFloat: true, Float: 1 + 0x1.8p-8}, ir.BF16, f32(1 + 0x1p-7)},
		{&ir.Literal{IsFloat: true, Float: math.NaN()}, ir.F32, uint64(math.Float32bits(float32(math.NaN())))},
		{&ir.Literal{Int: 3000000000}, ir.I32, uint64(uint32(3000000000))},
		{&ir.Literal{IsFloat: true, Float: -2.9}, ir.I32, uint64(uint32(0xfffffffe))},
		{&ir.Literal{IsFloat: true, Float: 1e30}, ir.I32, uint64(math.MaxInt32)},
		{&ir.Literal{IsFloat: true, Float: math.NaN()}, ir.I64, 0},
		{&ir.Literal{IsFloat: true, Float: -1e300}, ir.I64, 1 << 63},
		{&ir.Literal{Int: -5}, ir.I64, uint64(0xfffffffffffffffb)},
		{&ir.Literal{IsFloat: true, Float: 0.5}, ir.Bool, 1},
		{&ir.Literal{Int: 0}, ir.Bool, 0},
		{&ir.Literal{Int: 1 << 40}, ir.F64, math.Float64bits(1 << 40)},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, literalBits(tc.lit, tc.dt), "%s as %s: bits", tc.lit, tc.dt)
	}
}

func TestPackArgs(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := in(b, "x", ir.F16, 8)
	var op *ir.Op
	b.For("i", 0, 2, 1, func(i *ir.Value) {
		op = fusion(b, vals(x, i), func() []*ir.Value {
			t := b.Binary(ir.OpMul, x, ir.Float(0.1)) // f16 literal: a float
			u := b.Binary(ir.OpAdd, t, i)             // runtime scalar: long long
			return vals(cast(b, b.Binary(ir.OpMax, cast(b, u, ir.F64), ir.Float(2)), ir.I32))
		})
	})
	ins := []Shape{{ir.F16, []int64{8}}, {DType: ir.I64}}
	k, err := Fusion(op, ins, []Shape{{ir.I32, []int64{8}}})
	require.NoError(t, err)
	var names []string
	for _, p := range k.Params {
		names = append(names, p.Name+":"+p.CType)
	}
	wantNames := []string{"in0:const hir_f16* __restrict__", "out0:int* __restrict__", "c0:float", "c1:double", "in1:long long"}
	require.Equal(t, wantNames, names, "params")
	buf, offsets, err := k.PackArgs([]uint64{0x1000, 7, 0x2000})
	require.NoError(t, err)
	// in0 @0, out0 @8, c0 @16 (4 bytes), c1 @24 (aligned to 8), in1 @32.
	assert.Equal(t, []int{0, 8, 16, 24, 32}, offsets, "offsets")
	assert.Len(t, buf, 40, "buffer bytes")
	word := func(off, size int) uint64 {
		var v uint64
		for i := size - 1; i >= 0; i-- {
			v = v<<8 | uint64(buf[off+i])
		}
		return v
	}
	assert.Equal(t, []uint64{0x1000, 0x2000, 7}, []uint64{word(0, 8), word(8, 8), word(32, 8)}, "pointers or scalar packed wrong: % x", buf)
	assert.Equal(t, float32(0.0999755859375), math.Float32frombits(uint32(word(16, 4))), "f16 literal packed")
	assert.Equal(t, 2.0, math.Float64frombits(word(24, 8)), "f64 literal packed")
	_, _, err = k.PackArgs([]uint64{1})
	assert.ErrorContains(t, err, "takes 3 arguments (2 inputs, 1 outputs), got 1", "PackArgs with too few args")
}

func TestLaunch(t *testing.T) {
	k := &Kernel{Strategy: Flat, Work: 0}
	g, blk := k.Launch(132)
	assert.Equal(t, [3]uint32{1, 1, 1}, g, "empty launch: grid")
	assert.Equal(t, [3]uint32{256, 1, 1}, blk, "empty launch: block")
	tests := []struct {
		s      Strategy
		work   int64
		sms    int
		blocks uint32
	}{
		{Flat, 1000, 132, 4},
		{Flat, 1 << 30, 132, 1 << 22}, // a block per 256 vectors
		{Flat, 0, 132, 1},
		{Broadcast, 257, 2, 2},
		{RowsWarp, 64, 132, 8},
		{RowsWarp, 65, 132, 9},
		{RowsBlock, 10, 132, 10},
		{RowsBlock, 100000, 4, 64},
		{Columns, 2048, 132, 8},
		{Columns, 1 << 30, 132, 1 << 22},
	}
	for _, tc := range tests {
		k := &Kernel{Strategy: tc.s, Work: tc.work}
		g, _ := k.Launch(tc.sms)
		assert.Equal(t, tc.blocks, g[0], "%s work %d on %d SMs: blocks", tc.s, tc.work, tc.sms)
	}
	// A flat grid covers the work once, Unroll vectors a thread, unless
	// Capped: then at most BlocksPerSM blocks per SM loop over it, as
	// other strategies' grids always do.
	tuned := []struct {
		s      Strategy
		work   int64
		t      Tuning
		sms    int
		blocks uint32
	}{
		{Flat, 1 << 26, Tuning{Unroll: 1}, 132, 1 << 18},
		{Flat, 1 << 26, Tuning{Unroll: 4}, 132, 1 << 16},
		{Flat, 1000, Tuning{Unroll: 2}, 132, 2},
		{Flat, 1 << 30, Tuning{Capped: true}, 132, 132 * 16},
		{Flat, 1 << 30, Tuning{Capped: true}, 0, DefaultSMs * 16},
		{Flat, 1 << 30, Tuning{Capped: true, BlocksPerSM: 4}, 132, 132 * 4},
		{Flat, 1000, Tuning{Capped: true}, 132, 4},
		{Columns, 1 << 26, Tuning{Unroll: 1}, 132, 1 << 18},
		{Columns, 1 << 26, Tuning{Unroll: 4}, 132, 1 << 18}, // unroll is flat's
		{Columns, 1 << 26, Tuning{Capped: true}, 132, 132 * 16},
		{Broadcast, 1 << 26, Tuning{}, 132, 132 * 16},
		{RowsWarp, 1 << 20, Tuning{}, 132, 132 * 16},
	}
	// a broadcast kernel of 16-byte vectors covers its work; one element a
	// thread stays capped
	for _, tc := range []struct {
		vec    int
		t      Tuning
		blocks uint32
	}{{8, Tuning{}, 1 << 18}, {1, Tuning{}, 132 * 16}, {8, Tuning{Capped: true}, 132 * 16}} {
		k := &Kernel{Strategy: Broadcast, Work: 1 << 26, Vector: tc.vec, Tuning: tc.t}
		g, _ := k.Launch(132)
		assert.Equal(t, tc.blocks, g[0], "broadcast of vectors of %d %+v: blocks", tc.vec, tc.t)
	}
	for _, tc := range tuned {
		k := &Kernel{Strategy: tc.s, Work: tc.work, Tuning: tc.t}
		g, _ := k.Launch(tc.sms)
		assert.Equal(t, tc.blocks, g[0], "%s work %d %+v on %d SMs: blocks", tc.s, tc.work, tc.t, tc.sms)
	}
}

func TestFusionNeedsShapes(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(1))
	op := b.Op(ir.OpNeg, in(b, "x", ir.F32, 4)).Op()
	_, err := Fusion(op, nil, nil)
	assert.ErrorContains(t, err, "input shapes were given", "Fusion without shapes")
	_, err = Fusion(op, []Shape{{ir.F32, []int64{4}}}, nil)
	assert.ErrorContains(t, err, "but 0 output shapes were given", "Fusion without output shapes")
	_, err = Fusion(nil, nil, nil)
	assert.Error(t, err, "Fusion(nil) succeeded")
}
