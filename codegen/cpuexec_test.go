package codegen_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
)

// TestKernelsOnCPU runs generated kernels on the CPU (testdata/cpuexec/
// emu.h emulates the little of CUDA they use; g++ with C++20 compiles
// them), each three times: with every pointer one element off its vector
// alignment (so every vector loop falls back to one element a thread),
// aligned, and aligned on a grid a third the size; the three must write
// the same bytes (float reductions within 1e-3, their order differs). It
// checks the vector paths of flat, broadcast, rows and columns kernels against
// their scalar paths and the grid-stride loops against the grid where no
// GPU is lent: random fusions of 1-4 axes with size-1 and broadcast axes,
// mixed dtypes (vectors of 2, 4 and 8 elements), where, literals, inputs
// yielded directly, rows and columns reductions with pointwise values
// yielded beside them. Skipped with -short and where g++ or C++20's
// <barrier> is missing.
func TestKernelsOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs C++ (-short)")
	}
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	emu, err := os.ReadFile(filepath.Join("testdata", "cpuexec", "emu.h"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "emu.h"), emu, 0o644); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe.cc")
	os.WriteFile(probe, []byte("#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n"), 0o644)
	if out, err := exec.Command(gxx, "-std=c++20", "-pthread", "-o", filepath.Join(dir, "probe"), probe).CombinedOutput(); err != nil {
		t.Skipf("g++ has no C++20 <barrier>: %v\n%s", err, out)
	}
	for _, mode := range []struct {
		name   string
		kind   reduceKind
		unroll int // flat kernels' Tuning.Unroll
		seed   int64
		n      int
	}{{"pointwise", noReduce, 1, 1, 60}, {"pointwise-unroll4", noReduce, 4, 4, 20}, {"rows", innerReduce, 1, 2, 25}, {"columns", outerReduce, 1, 3, 25}} {
		t.Run(mode.name, func(t *testing.T) {
			src, n := cpuexecProgram(t, mode.kind, codegen.Tuning{Unroll: mode.unroll}, mode.seed, mode.n)
			cc, bin := filepath.Join(dir, mode.name+".cc"), filepath.Join(dir, mode.name)
			if err := os.WriteFile(cc, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(gxx, "-std=c++20", "-O1", "-pthread", "-w", "-o", bin, cc).CombinedOutput(); err != nil {
				t.Fatalf("g++: %v\n%s", err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin).CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("0 of %d cases bad", n))) {
				t.Fatalf("%v\n%s\n(the program: %s)", err, out, cc)
			}
		})
	}
}

// reduceKind is what a random case reduces: nothing, innermost axes
// (rows), or leading ones (columns).
type reduceKind int

const (
	noReduce reduceKind = iota
	innerReduce
	outerReduce
)

// cpuexecProgram is the C++ program of up to n random kernels of the kind
// and the number it holds.
func cpuexecProgram(t *testing.T, kind reduceKind, tuning codegen.Tuning, seed int64, n int) (string, int) {
	r := rand.New(rand.NewSource(seed))
	var sb strings.Builder
	sb.WriteString("#include \"emu.h\"\n")
	var calls []string
	seen := map[string]bool{}
	vectors := 0
	for c := 0; len(calls) < n && c < n*20; c++ {
		bt, err := cpuexecCase(r, kind, tuning)
		if err != nil {
			continue
		}
		k := bt.k
		if seen[k.Name] {
			continue
		}
		seen[k.Name] = true
		if k.Vector > 1 {
			vectors++
		}
		// the PTX conversion to bf16, as emu.h does it on the CPU
		src := strings.ReplaceAll(k.Source, `asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(a));`, `h.bits = emu_bf16(a);`)
		src = strings.Replace(src, "struct hir_bf16 { unsigned short bits; };", "", 1)
		if strings.Contains(src, "asm(") {
			t.Fatalf("kernel %s has inline PTX emu.h does not stand in for", k.Name)
		}
		fmt.Fprintf(&sb, "namespace ns_%s {\n%s\n}\n", k.Name, src)
		grid, _ := k.Launch(132)
		ci := len(calls)
		fmt.Fprintf(&sb, "static int case_%d() {\n  const char* desc = %q;\n", ci, fmt.Sprintf("%s strategy %s vec %d work %d grid %d", bt.desc, k.Strategy, k.Vector, k.Work, grid[0]))
		np := len(bt.ins) + len(bt.outs)
		fmt.Fprintf(&sb, "  Buf bufs[%d];\n", np)
		for i, s := range bt.ins {
			fmt.Fprintf(&sb, "  bufs[%d].init(%d, %d, %d, true);\n", i, ir.Product(s.Shape), s.DType.Size(), cpuexecDType(s.DType))
		}
		for i, s := range bt.outs {
			fmt.Fprintf(&sb, "  bufs[%d].init(%d, %d, %d, false);\n", len(bt.ins)+i, ir.Product(s.Shape), s.DType.Size(), cpuexecDType(s.DType))
		}
		var args []string
		for _, p := range k.Params {
			switch p.Kind {
			case codegen.ParamPointer:
				ty := strings.TrimSpace(strings.ReplaceAll(p.CType, "__restrict__", ""))
				ty = strings.ReplaceAll(ty, "hir_bf16", "::hir_bf16")
				args = append(args, fmt.Sprintf("(%s)bufs[%d].p", ty, p.Arg))
			case codegen.ParamLiteral:
				args = append(args, fmt.Sprintf("lit<%s>(%dULL)", p.CType, p.Bits))
			default:
				t.Fatalf("kernel %s takes a runtime scalar", k.Name)
			}
		}
		threads := "false"
		if k.Strategy == codegen.RowsWarp || k.Strategy == codegen.RowsBlock {
			threads = "true"
		}
		fmt.Fprintf(&sb, "  auto run = [&](int mis, unsigned grid) {\n    for (int i = 0; i < %d; ++i) bufs[i].place(mis);\n    launch(grid, %s, [&]{ ns_%s::%s(%s); });\n    for (int i = %d; i < %d; ++i) bufs[i].save(mis);\n  };\n",
			np, threads, k.Name, k.Name, strings.Join(args, ", "), len(bt.ins), np)
		fmt.Fprintf(&sb, "  run(1, %d); run(0, %d); int bad = 0;\n", grid[0], grid[0])
		fmt.Fprintf(&sb, "  for (int i = %d; i < %d; ++i) bad += bufs[i].cmp(desc, i);\n", len(bt.ins), np)
		fmt.Fprintf(&sb, "  run(0, %d);\n  for (int i = %d; i < %d; ++i) bad += bufs[i].cmp(desc, i);\n", max(1, grid[0]/3), len(bt.ins), np)
		sb.WriteString("  return bad;\n}\n")
		calls = append(calls, fmt.Sprintf("case_%d", ci))
	}
	if vectors < len(calls)/4 {
		t.Fatalf("only %d of %d kernels take vectors: the cases do not test the vector paths", vectors, len(calls))
	}
	sb.WriteString("int main() { int bad = 0;\n")
	for _, c := range calls {
		fmt.Fprintf(&sb, "  bad += %s() != 0;\n", c)
	}
	fmt.Fprintf(&sb, "  printf(\"%%d of %d cases bad\\n\", bad); return bad != 0; }\n", len(calls))
	return sb.String(), len(calls)
}

type cpuexecKernel struct {
	k         *codegen.Kernel
	ins, outs []codegen.Shape
	desc      string
}

func pickOne[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

// broadcastShape is a shape that broadcasts into iter: iter itself when
// full, else a random rank with each axis iter's or 1.
func broadcastShape(r *rand.Rand, iter []int64, full bool) []int64 {
	if full {
		return append([]int64{}, iter...)
	}
	rank := r.Intn(len(iter) + 1)
	s := make([]int64, rank)
	off := len(iter) - rank
	for i := range s {
		if r.Intn(2) == 0 {
			s[i] = iter[off+i]
		} else {
			s[i] = 1
		}
	}
	return s
}

// cpuexecCase builds one random fusion and its kernel.
func cpuexecCase(r *rand.Rand, kind reduceKind, tuning codegen.Tuning) (*cpuexecKernel, error) {
	rows := kind != noReduce
	rank := 1 + r.Intn(4)
	iter := make([]int64, rank)
	for i := range iter {
		iter[i] = pickOne(r, int64(1), 2, 3, 4, 5, 8)
	}
	if rows {
		iter[rank-1] = pickOne(r, int64(2), 4, 8, 16, 24, 32, 40, 64, 96, 1024, 1032, 2048)
	} else {
		iter[rank-1] = pickOne(r, int64(1), 2, 4, 8, 12, 16, 24, 32, 40)
	}
	ct := pickOne(r, ir.F32, ir.F64, ir.I32, ir.I64)
	b := ir.NewBuilder(ir.LinearMesh(1))
	var xs []*ir.Value
	var shapes []codegen.Shape
	var desc []string
	for i := range 1 + r.Intn(3) {
		dt := pickOne(r, ir.F32, ir.F64, ir.BF16, ir.I32, ir.I64)
		s := broadcastShape(r, iter, i == 0 || r.Intn(3) == 0)
		xs = append(xs, b.Input(fmt.Sprintf("x%d", i), ir.Tensor(dt, s...)))
		shapes = append(shapes, codegen.Shape{DType: dt, Shape: s})
		desc = append(desc, fmt.Sprintf("%s%v", dt, s))
	}
	nx := len(xs)
	var cond *ir.Value
	if r.Intn(3) == 0 {
		cs := broadcastShape(r, iter, false)
		cond = b.Input("cond", ir.Tensor(ir.Bool, cs...))
		xs = append(xs, cond)
		shapes = append(shapes, codegen.Shape{DType: ir.Bool, Shape: cs})
		desc = append(desc, fmt.Sprintf("bool%v", cs))
	}
	yieldType := func() ir.DType { return pickOne(r, ir.F32, ir.BF16, ir.F64, ir.I32, ir.I64) }
	direct := rows && r.Intn(4) == 0 // reduce the first input itself
	body := func() []*ir.Value {
		var acc *ir.Value
		for i, x := range xs[:nx] {
			v := x
			if shapes[i].DType != ct {
				v = b.Op(ir.OpCast, x).Word("dtype", ct.String()).Value()
			}
			if acc == nil {
				acc = v
			} else {
				acc = b.Binary(pickOne(r, ir.OpAdd, ir.OpMul, ir.OpSub, ir.OpMax), acc, v)
			}
		}
		if r.Intn(2) == 0 {
			if ct.IsFloat() {
				acc = b.Binary(ir.OpMul, acc, ir.Float(1.5))
			} else {
				acc = b.Binary(ir.OpAdd, acc, ir.Int(3))
			}
		}
		if cond != nil {
			l := ir.Int(-7)
			if ct.IsFloat() {
				l = ir.Float(-0.25)
			}
			acc = b.Op(ir.OpWhere, cond, acc, l).Value()
		}
		var ys []*ir.Value
		if rows {
			var axes []int64
			for a := rank - 1 - r.Intn(rank); a < rank; a++ {
				axes = append(axes, int64(a))
			}
			if kind == outerReduce {
				// the leading axes, never the innermost
				axes = nil
				for a := range r.Intn(max(1, rank-1)) + 1 {
					axes = append(axes, int64(a))
				}
				if rank == 1 {
					axes = []int64{0}
				}
			}
			src := acc
			if direct {
				src = xs[0]
			}
			red := b.Op(pickOne(r, ir.OpSum, ir.OpReduceMax), src).Ints("axes", axes...).Value()
			if r.Intn(2) == 0 && !direct {
				ys = append(ys, b.Op(ir.OpCast, acc).Word("dtype", yieldType().String()).Value())
			}
			if r.Intn(3) == 0 {
				ys = append(ys, xs[0])
			}
			return append(ys, red) // the reduction is the body's last op
		}
		ys = append(ys, b.Op(ir.OpCast, acc).Word("dtype", yieldType().String()).Value())
		if r.Intn(2) == 0 {
			ys = append(ys, acc)
		}
		if r.Intn(4) == 0 {
			ys = append(ys, xs[r.Intn(len(xs))])
		}
		return ys
	}
	op := b.Fusion(xs, body)[0].Def
	outs, err := codegen.ResultShapes(op, shapes)
	if err != nil {
		return nil, err
	}
	k, err := codegen.FusionTuned(op, shapes, outs, tuning)
	if err != nil {
		return nil, err
	}
	return &cpuexecKernel{k: k, ins: shapes, outs: outs, desc: fmt.Sprintf("iter %v compute %s inputs %s", iter, ct, strings.Join(desc, " "))}, nil
}

// cpuexecDType is emu.h's Buf code of dt.
func cpuexecDType(dt ir.DType) int {
	switch dt {
	case ir.F32:
		return 0
	case ir.F64:
		return 1
	case ir.BF16:
		return 2
	case ir.I32:
		return 3
	case ir.I64:
		return 4
	}
	return 5 // bool
}
