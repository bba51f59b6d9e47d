package passes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hirlab/hir/ir"
)

func TestPipelineOrder(t *testing.T) {
	var names []string
	for _, p := range Pipeline() {
		names = append(names, p.Name)
		if p.Doc == "" || p.Run == nil {
			t.Errorf("pass %s has no doc or no Run", p.Name)
		}
		if got, ok := Lookup(p.Name); !ok || got.Name != p.Name {
			t.Errorf("Lookup(%q) = %v, %v", p.Name, got.Name, ok)
		}
	}
	want := []string{"typecheck", "validate", "symmetric", "stream-parallel", "deadlock", "stream-hazards", "fuse", "kernels", "insert-free"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("pipeline (-want +got):\n%s", diff)
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
	err := LowerUntil(&ir.Program{Mesh: ir.LinearMesh(1), Body: &ir.Block{}}, "nope", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown pass "nope"`) {
		t.Errorf("LowerUntil(nope) = %v", err)
	}
}

// build makes a program on a mesh of n ranks with f, failing the test when
// it does not verify.
func build(t *testing.T, n int, f func(b *ir.Builder)) *ir.Program {
	t.Helper()
	b := ir.NewBuilder(ir.LinearMesh(n))
	f(b)
	p, err := b.Program()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTypecheckInfers(t *testing.T) {
	f32 := func(shape ...int64) *ir.TensorType { return ir.Tensor(ir.F32, shape...) }
	tests := []struct {
		name string
		make func(b *ir.Builder) *ir.Value
		want ir.Type
	}{
		{"broadcast keeps sharding", func(b *ir.Builder) *ir.Value {
			return b.Binary(ir.OpAdd, b.Input("x", f32(8, 1).Sharded(0)), b.Input("y", f32(16)))
		}, f32(8, 16).Sharded(0)},
		{"literal takes the dtype", func(b *ir.Builder) *ir.Value {
			return b.Binary(ir.OpMul, b.Input("x", ir.Tensor(ir.I32, 3)), ir.Int(2))
		}, ir.Tensor(ir.I32, 3)},
		{"cast", func(b *ir.Builder) *ir.Value {
			return b.Op(ir.OpCast, b.Input("x", f32(3))).Word("dtype", "bf16").Value()
		}, ir.Tensor(ir.BF16, 3)},
		{"sum keepdim", func(b *ir.Builder) *ir.Value {
			return b.Op(ir.OpSum, b.Input("x", f32(2, 3, 4))).Ints("axes", 0, 2).Bool("keepdim", true).Value()
		}, f32(1, 3, 1)},
		{"batched matmul", func(b *ir.Builder) *ir.Value {
			return b.Binary(ir.OpMatmul, b.Input("a", f32(2, 8, 4).Sharded(1)), b.Input("b", f32(2, 4, 5)))
		}, f32(2, 8, 5).Sharded(1)},
		{"select drops the axis and keeps memory", func(b *ir.Builder) *ir.Value {
			return b.Binary(ir.OpSelect, b.Input("x", f32(4, 6).Sharded(1).In(ir.Symmetric)), ir.Int(3))
		}, f32(6).Sharded(0).In(ir.Symmetric)},
		{"contiguous view", func(b *ir.Builder) *ir.Value {
			return b.Unary(ir.OpSymmetricContiguousView, b.Input("x", f32(2, 6).Sharded(0).In(ir.Symmetric)))
		}, f32(2, 6).In(ir.Symmetric)},
		{"all_to_all", func(b *ir.Builder) *ir.Value {
			return b.Op(ir.OpAllToAll, b.Input("x", f32(4, 6).Sharded(0))).Int("axis", 1).Value()
		}, f32(4, 6).Sharded(1)},
		{"copy mem", func(b *ir.Builder) *ir.Value {
			return b.Op(ir.OpCopy, b.Input("x", f32(4))).Word("mem", "host").Value()
		}, f32(4).In(ir.Host)},
		{"register", func(b *ir.Builder) *ir.Value {
			return b.Unary(ir.OpRegister, b.Input("x", f32(4)))
		}, &ir.HandleType{}},
		{"fusion", func(b *ir.Builder) *ir.Value {
			x := b.Input("x", f32(4, 2))
			return b.Fusion([]*ir.Value{x}, func() []*ir.Value {
				e := b.Unary(ir.OpExp, x)
				return []*ir.Value{b.Op(ir.OpSum, e).Ints("axes", 1).Value()}
			})[0]
		}, f32(4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v *ir.Value
			p := build(t, 2, func(b *ir.Builder) { v = tc.make(b) })
			if err := LowerUntil(p, "typecheck", nil); err != nil {
				t.Fatal(err)
			}
			if !ir.TypesEqual(v.Type, tc.want) {
				t.Errorf("got %s, want %s", v.Type, tc.want)
			}
			// idempotent: a second run sees its own types as annotations
			if err := LowerUntil(p, "typecheck", nil); err != nil {
				t.Errorf("second run: %v", err)
			}
		})
	}
}

func TestTypecheckReportsEveryError(t *testing.T) {
	p := build(t, 2, func(b *ir.Builder) {
		x := b.Input("x", ir.Tensor(ir.I32, 4))
		y := b.Input("y", ir.Tensor(ir.F32, 4))
		b.Unary(ir.OpExp, x)
		b.Binary(ir.OpAdd, x, y)
		b.Op(ir.OpSum, y).Ints("axes", 3)
	})
	err := Check(p, nil)
	want := "<input>: exp: %x is i32; exp needs a float tensor (cast it first)\n" +
		"<input>: add: %x is i32 but %y is f32; cast one of them\n" +
		"<input>: sum: axis 3 is out of range for %y of type f32[4] (rank 1)"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	if _, ok := err.(ir.ErrorList); !ok {
		t.Errorf("error is %T, want ir.ErrorList", err)
	}
}

func TestFuseKeepsNamesAndRewritesUses(t *testing.T) {
	var a, r, s *ir.Value
	p := build(t, 1, func(b *ir.Builder) {
		x := b.Input("x", ir.Tensor(ir.F32, 4, 4))
		a = b.Op(ir.OpAdd, x, ir.Float(1)).Name("a").Value()
		r = b.Op(ir.OpRelu, a).Name("r").Value()
		s = b.Op(ir.OpSum, r).Name("s").Ints("axes", 1).Value()
		b.Op(ir.OpAllReduce, a).Word("algo", "nccl").Name("g")
		b.Output(s)
	})
	if err := LowerUntil(p, "fuse", nil); err != nil {
		t.Fatal(err)
	}
	f := p.Body.Ops[0]
	if f.Code != ir.OpFusion || len(p.Body.Ops) != 2 {
		t.Fatalf("not one fusion then the collective:\n%s", p)
	}
	if diff := cmp.Diff([]string{"a", "s"}, names(f.Results)); diff != "" {
		t.Errorf("fusion results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x"}, names(f.Operands)); diff != "" {
		t.Errorf("fusion operands (-want +got):\n%s", diff)
	}
	if a.Def != f || s.Def != f || p.Body.Ops[1].Operands[0] != a {
		t.Errorf("results do not point at the fusion, or later uses were not kept")
	}
	if diff := cmp.Diff([]string{"a.f", "r.f", "s.f"}, bodyNames(f.Body)); diff != "" {
		t.Errorf("inner names (-want +got):\n%s", diff)
	}
	if err := ir.Verify(p); err != nil {
		t.Errorf("the fused program does not verify: %v", err)
	}
	// Running the typecheck on the fused program agrees with it.
	if err := LowerUntil(p, "typecheck", nil); err != nil {
		t.Errorf("typecheck after fuse: %v", err)
	}
}

func TestInsertFreeIsIdempotent(t *testing.T) {
	p := build(t, 2, func(b *ir.Builder) {
		x := b.Input("x", ir.Tensor(ir.F32, 4))
		a := b.Unary(ir.OpExp, x)
		g := b.Collective(ir.OpAllReduce, a, ir.AlgoNCCL).Value()
		b.Output(b.Unary(ir.OpNeg, g))
	})
	if err := Lower(p, nil); err != nil {
		t.Fatal(err)
	}
	first := p.String()
	if strings.Count(first, "free ") != 2 {
		t.Errorf("want 2 frees:\n%s", first)
	}
	if err := Lower(p, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, p.String()); diff != "" {
		t.Errorf("lowering twice changed the program (-first +second):\n%s", diff)
	}
}

// An async op reads its operands until its wait: the free of its operand
// (through a view: the storage it views) comes after the wait,
// not after the post, where the next allocation of its size took the
// buffer the collective still read; an async op never waited for keeps its
// operands to the end of the Run.
func TestInsertFreeWaitsForAsyncOperands(t *testing.T) {
	var p0, p1 *ir.Value
	p := build(t, 2, func(b *ir.Builder) {
		a := b.Input("a", ir.Tensor(ir.F32, 4, 3))
		w := b.Input("w", ir.Tensor(ir.F32, 3, 4))
		p0 = b.Op(ir.OpMatmul, a, w).Name("p0").Value()
		v0 := b.Op(ir.OpReshape, p0).Name("v0").Ints("shape", 2, 8).Value()
		r0 := b.Op(ir.OpReduceScatter, v0).Int("axis", 0).Bool("async", true).Name("r0").
			Type(ir.Tensor(ir.F32, 2, 8).Sharded(0).In(ir.Symmetric)).Value()
		p1 = b.Op(ir.OpMatmul, a, w).Name("p1").Value()
		b.Op(ir.OpReduceScatter, p1).Int("axis", 0).Bool("async", true).Name("r1").
			Type(ir.Tensor(ir.F32, 4, 4).Sharded(0).In(ir.Symmetric)) // never waited for
		b.Op(ir.OpWait, r0)
		b.Output(r0)
	})
	if err := Lower(p, nil); err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	read := "" // the storage r0's reduce_scatter reads (the symmetric pass may have imported p0's view)
	for i, op := range p.Body.Ops {
		switch {
		case op.Code == ir.OpWait:
			at["wait"] = i
		case op.Code == ir.OpFree:
			at["free "+op.Operands[0].Name] = i
		case op.Code == ir.OpReduceScatter && op.Results[0].Name == "r0":
			read = op.Operands[0].Root().Name
		}
	}
	if f, ok := at["free "+read]; !ok || f < at["wait"] {
		t.Errorf("%%%s is freed at op %d, before the wait at %d of the reduce_scatter reading it (or never):\n%s", read, f, at["wait"], p)
	}
	if _, ok := at["free p1"]; ok {
		t.Errorf("%%p1 is freed though the reduce_scatter reading it is never waited for:\n%s", p)
	}
}

func names(vs []*ir.Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func bodyNames(b *ir.Block) []string {
	var out []string
	for _, op := range b.Ops {
		out = append(out, names(op.Results)...)
	}
	return out
}

// BenchmarkLower lowers a program of 1000 ops: chains of pointwise ops
// between collectives.
func BenchmarkLower(b *testing.B) {
	for b.Loop() {
		bld := ir.NewBuilder(ir.LinearMesh(4))
		x := bld.Input("x", ir.Tensor(ir.F32, 64, 64))
		for i := 0; i < 100; i++ {
			for j := 0; j < 9; j++ {
				x = bld.Binary(ir.OpAdd, x, ir.Float(1))
			}
			x = bld.Collective(ir.OpAllReduce, x, ir.AlgoOneShot).Value()
		}
		bld.Output(x)
		p, err := bld.Program()
		if err != nil {
			b.Fatal(err)
		}
		if err := Lower(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}
