package evaluator_test

import (
	"testing"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// BenchmarkRunFixedCost measures what a Run costs beyond its ops on the
// CPU runtime: one op on a 4-element tensor, inputs kept on the device
// after the first Run, a strided view read back — the shape of the
// overlap benchmark's programs (issue 20: a Run must cost what its ops
// cost). Per Run: time and allocations.
func BenchmarkRunFixedCost(b *testing.B) {
	for _, mesh := range []int{1, 2} {
		b.Run(map[int]string{1: "1rank", 2: "2ranks"}[mesh], func(b *testing.B) {
			bd := ir.NewBuilder(ir.LinearMesh(mesh))
			x := bd.Input("x", ir.Tensor(ir.F32, 4, 4))
			y := bd.Binary(ir.OpMul, x, x)
			bd.Output(bd.Op(ir.OpSelect, y, ir.Int(0)).Int("axis", 1).Value())
			prog, err := bd.Program()
			if err != nil {
				b.Fatal(err)
			}
			j := job(b, prog, evaluator.Options{KeepInputs: true})
			if _, err := j.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{4, 4}, 1)}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := j.Run(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
