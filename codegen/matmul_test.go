package codegen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

func TestMatmulGolden(t *testing.T) {
	sh := func(dt ir.DType, s ...int64) Shape { return Shape{DType: dt, Shape: s} }
	tests := []struct {
		name    string
		a, b, c Shape
		tiles   int64
		acc     bool // MatmulAccumulate
	}{
		{"matmul_f32", sh(ir.F32, 100, 70), sh(ir.F32, 70, 130), sh(ir.F32, 100, 130), 2 * 3, false},
		{"matmul_bf16_batched", sh(ir.BF16, 3, 65, 17), sh(ir.BF16, 3, 17, 64), sh(ir.BF16, 3, 65, 64), 3 * 2 * 1, false},
		{"matmul_f16_shared_b", sh(ir.F16, 2, 2, 8, 8), sh(ir.F16, 8, 8), sh(ir.F16, 2, 2, 8, 8), 4, false},
		{"matmul_f64_empty_k", sh(ir.F64, 5, 0), sh(ir.F64, 0, 3), sh(ir.F64, 5, 3), 1, false},
		{"matmul_f32_empty_m", sh(ir.F32, 0, 4), sh(ir.F32, 4, 3), sh(ir.F32, 0, 3), 0, false},
		{"matmul_bf16_accumulate", sh(ir.BF16, 2, 65, 17), sh(ir.BF16, 17, 64), sh(ir.BF16, 2, 65, 64), 2 * 2 * 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gen := Matmul
			if tc.acc {
				gen = MatmulAccumulate
			}
			k, err := gen(tc.a, tc.b, tc.c)
			require.NoError(t, err)
			assert.Equal(t, MatmulTiled, k.Strategy, "strategy %s", k.Strategy)
			assert.Equal(t, tc.tiles, k.Work, "work")
			assert.Equal(t, 2+btoi(tc.acc), k.NumInputs, "inputs")
			assert.Len(t, k.Params, k.NumInputs+1, "parameters")
			assert.Equal(t, 1, k.NumOutputs, "outputs")
			g, _ := k.Launch(132)
			assert.Equal(t, max(1, min(tc.tiles, 132*16)), int64(g[0]), "grid %v for %d tiles", g, tc.tiles)
			path := filepath.Join("testdata", "matmul", tc.name+".cu")
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
		_, err := Matmul(tc.a, tc.b, tc.c)
		assert.ErrorContains(t, err, tc.want, "Matmul(%s, %s, %s)", tc.a, tc.b, tc.c)
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
		assert.NoError(t, CheckKernel(op, 2), "%s", op.Code)
	}
	ins, outs, err := LocalShapes(mm, 2)
	require.NoError(t, err)
	assert.Equal(t, "f32[4, 4] f32[4, 6] -> f32[4, 6]", ins[0].String()+" "+ins[1].String()+" -> "+outs[0].String(), "local shapes")
	// A mesh that does not divide the sharded extent.
	assert.Error(t, CheckKernel(e, 3), "CheckKernel on a mesh of 3 accepted an extent of 8")
	bad := b.Op(ir.OpExp, b.Input("i", ir.Tensor(ir.I32, 4))).Type(ir.Tensor(ir.I32, 4)).Op()
	bad.Pos = ir.NewPos("p.hir", 2, 3)
	assert.ErrorContains(t, CheckKernel(bad, 2), "p.hir:2:3: exp does not take i32", "exp of i32")
	untyped := b.Op(ir.OpNeg, x).Op()
	untyped.Results[0].Type = nil
	assert.ErrorContains(t, CheckKernel(untyped, 2), "no type yet", "untyped result")
	assert.Error(t, CheckKernel(nil, 1), "CheckKernel(nil) succeeded")
}
