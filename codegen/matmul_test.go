package codegen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hirlab/hir/ir"
)

func TestMatmulGolden(t *testing.T) {
	sh := func(dt ir.DType, s ...int64) Shape { return Shape{DType: dt, Shape: s} }
	tests := []struct {
		name    string
		a, b, c Shape
		tiles   int64
	}{
		{"matmul_f32", sh(ir.F32, 100, 70), sh(ir.F32, 70, 130), sh(ir.F32, 100, 130), 2 * 3},
		{"matmul_bf16_batched", sh(ir.BF16, 3, 65, 17), sh(ir.BF16, 3, 17, 64), sh(ir.BF16, 3, 65, 64), 3 * 2 * 1},
		{"matmul_f16_shared_b", sh(ir.F16, 2, 2, 8, 8), sh(ir.F16, 8, 8), sh(ir.F16, 2, 2, 8, 8), 4},
		{"matmul_f64_empty_k", sh(ir.F64, 5, 0), sh(ir.F64, 0, 3), sh(ir.F64, 5, 3), 1},
		{"matmul_f32_empty_m", sh(ir.F32, 0, 4), sh(ir.F32, 4, 3), sh(ir.F32, 0, 3), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Matmul(tc.a, tc.b, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if k.Strategy != MatmulTiled || k.Work != tc.tiles || k.NumInputs != 2 || k.NumOutputs != 1 {
				t.Errorf("strategy %s work %d (%d in, %d out), want %s work %d", k.Strategy, k.Work, k.NumInputs, k.NumOutputs, MatmulTiled, tc.tiles)
			}
			if g, _ := k.Launch(132); int64(g[0]) != max(1, min(tc.tiles, 132*16)) {
				t.Errorf("grid %v for %d tiles", g, tc.tiles)
			}
			path := filepath.Join("testdata", "matmul", tc.name+".cu")
			got := golden(k)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./codegen -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got):\n%s", path, diff)
			}
		})
	}
}

func TestMatmulErrors(t *testing.T) {
	sh := func(dt ir.DType, s ...int64) Shape { return Shape{DType: dt, Shape: s} }
	tests := []struct {
		a, b, c Shape
		want    string
	}{
		{sh(ir.I32, 2, 2), sh(ir.I32, 2, 2), sh(ir.I32, 2, 2), "matmul: does not take i32"},
		{sh(ir.F32, 2, 2), sh(ir.F16, 2, 2), sh(ir.F32, 2, 2), "the operands share one dtype"},
		{sh(ir.F32, 2), sh(ir.F32, 2, 2), sh(ir.F32, 2), "both operands need rank 2 or more"},
		{sh(ir.F32, 2, 3), sh(ir.F32, 2, 2), sh(ir.F32, 2, 2), "the contraction extents 3 and 2 differ"},
		{sh(ir.F32, 4, 2, 3), sh(ir.F32, 5, 3, 2), sh(ir.F32, 4, 2, 2), "a batched b must have a's batch dims"},
		{sh(ir.F32, 2, 3), sh(ir.F32, 3, 4), sh(ir.F32, 2, 5), "the result is f32[2, 4], but its output was given as f32[2, 5]"},
	}
	for _, tc := range tests {
		if _, err := Matmul(tc.a, tc.b, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Matmul(%s, %s, %s): %v, want an error containing %q", tc.a, tc.b, tc.c, err, tc.want)
		}
	}
}

// CheckKernel works from the types a program carries, on local shapes.
func TestCheckKernel(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 8, 4).Sharded(0))
	w := b.Input("w", ir.Tensor(ir.F32, 4, 6))
	mm := b.Op(ir.OpMatmul, x, w).Type(ir.Tensor(ir.F32, 8, 6).Sharded(0)).Op()
	e := b.Op(ir.OpExp, x).Type(ir.Tensor(ir.F32, 8, 4).Sharded(0)).Op()
	s := b.Op(ir.OpSum, e.Result()).Ints("axes", 1).Type(ir.Tensor(ir.F32, 8).Sharded(0)).Op()
	for _, op := range []*ir.Op{mm, e, s} {
		if err := CheckKernel(op, 2); err != nil {
			t.Errorf("%s: %v", op.Code, err)
		}
	}
	ins, outs, err := LocalShapes(mm, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := ins[0].String() + " " + ins[1].String() + " -> " + outs[0].String(); got != "f32[4, 4] f32[4, 6] -> f32[4, 6]" {
		t.Errorf("local shapes %s", got)
	}
	// A mesh that does not divide the sharded extent.
	if err := CheckKernel(e, 3); err == nil {
		t.Errorf("CheckKernel on a mesh of 3 accepted an extent of 8")
	}
	bad := b.Op(ir.OpExp, b.Input("i", ir.Tensor(ir.I32, 4))).Type(ir.Tensor(ir.I32, 4)).Op()
	bad.Pos = ir.Pos{File: "p.hir", Line: 2, Col: 3}
	if err := CheckKernel(bad, 2); err == nil || !strings.Contains(err.Error(), "p.hir:2:3: exp does not take i32") {
		t.Errorf("exp of i32: %v", err)
	}
	untyped := b.Op(ir.OpNeg, x).Op()
	untyped.Results[0].Type = nil
	if err := CheckKernel(untyped, 2); err == nil || !strings.Contains(err.Error(), "no type yet") {
		t.Errorf("untyped result: %v", err)
	}
	if err := CheckKernel(nil, 1); err == nil {
		t.Errorf("CheckKernel(nil) succeeded")
	}
}
