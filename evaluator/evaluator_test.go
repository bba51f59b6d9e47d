package evaluator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// job lowers prog and binds it to a fresh CPU runtime of the program's mesh.
func job(t testing.TB, prog *ir.Program, opts evaluator.Options) *evaluator.Job {
	t.Helper()
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: prog.Mesh.Size()})
	require.NoError(t, err)
	j, err := evaluator.NewJob(prog, rt, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, j.Close())
		require.NoError(t, rt.Close())
	})
	return j
}

// simJob parses and lowers src (named file) and binds it to a fresh CPU
// runtime opened with cfg's timeout and opts (WorldSize is the mesh's).
func simJob(t testing.TB, file, src string, cfg runtime.Config, opts sim.Options) (*ir.Program, *sim.Runtime, *evaluator.Job) {
	t.Helper()
	prog, err := parser.Parse(file, []byte(src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	cfg.WorldSize = prog.Mesh.Size()
	rt, err := sim.NewWithOptions(cfg, opts)
	require.NoError(t, err)
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, j.Close())
		require.NoError(t, rt.Close())
	})
	return prog, rt, j
}

func shape(xs ...int64) []int64 { return xs }

func TestAllGatherOfFusedChain(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(4))
	x := b.Input("x", ir.Tensor(ir.F32, 8, 3).Sharded(0))
	a := b.Binary(ir.OpMul, x, ir.Float(2))
	r := b.Unary(ir.OpRelu, a)
	g := b.Collective(ir.OpAllGather, r, ir.AlgoRing).Name("g").Type(ir.Tensor(ir.F32, 8, 3).In(ir.Symmetric)).Value()
	b.Output(g)
	prog, err := b.Program()
	require.NoError(t, err)

	in := host.Random(ir.F32, shape(8, 3), 7)
	res, err := job(t, prog, evaluator.Options{}).Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	require.Len(t, res.Ranks, 4)
	for _, rr := range res.Ranks {
		out := rr.Outputs["g"]
		require.Equal(t, shape(8, 3), out.Shape)
		for i := int64(0); i < in.Len(); i++ {
			want := max(2*in.At(i), 0)
			require.Equalf(t, want, out.At(i), "rank %d element %d", rr.Rank, i)
		}
	}
}

func TestContiguousViewSeesEveryShardAndIsCached(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(4))
	x := b.Input("x", ir.Tensor(ir.I32, 4, 5).Sharded(0).In(ir.Symmetric))
	v := b.Op(ir.OpSymmetricContiguousView, x).Name("v").Value()
	b.Output(v)
	prog, err := b.Program()
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})

	in := host.Random(ir.I32, shape(4, 5), 3)
	for run := 1; run <= 3; run++ {
		res, err := j.Run(map[string]*host.Array{"x": in})
		require.NoError(t, err)
		for _, rr := range res.Ranks {
			require.Equal(t, in.Data, rr.Outputs["v"].Data, "rank %d reads every shard through the view", rr.Rank)
			require.EqualValues(t, 1, rr.Stats.HandleMisses, "one mapping per rank")
			require.EqualValues(t, run-1, rr.Stats.HandleHits, "later runs hit the cache")
		}
	}
}

func floats(a *host.Array) []float64 {
	out := make([]float64, a.Len())
	for i := range out {
		out[i] = a.At(int64(i))
	}
	return out
}

func TestAsyncAllReduceAndWait(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(3))
	x := b.Input("x", ir.Tensor(ir.F32, 5))
	y := b.Collective(ir.OpAllReduce, x, ir.AlgoRing).Bool("async", true).Name("y").Value()
	b.Op(ir.OpWait, y)
	z := b.Binary(ir.OpAdd, y, ir.Float(1))
	b.Output(z)
	prog, err := b.Program()
	require.NoError(t, err)
	in := host.Random(ir.F32, shape(5), 11)
	res, err := job(t, prog, evaluator.Options{}).Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	for _, rr := range res.Ranks {
		got := rr.Outputs[z.Name]
		for i := int64(0); i < 5; i++ {
			want := float64(float32(float32(float32(in.At(i))+float32(in.At(i)))+float32(in.At(i))) + 1)
			require.InDelta(t, want, got.At(i), 1e-6)
		}
	}
}

func TestForLoopOverChunks(t *testing.T) {
	// Sum the rows of x one at a time into the running total.
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := b.Input("x", ir.Tensor(ir.F32, 4, 2))
	acc := b.Alloc(ir.Tensor(ir.F32, 2))
	b.For("i", 0, 4, 1, func(i *ir.Value) {
		row := b.Op(ir.OpSelect, x, i).Value()
		s := b.Binary(ir.OpAdd, acc, row)
		b.Op(ir.OpCopy, s, acc)
	})
	out := b.Op(ir.OpCopy, acc).Name("out").Value()
	b.Output(out)
	prog, err := b.Program()
	require.NoError(t, err)
	in := host.New(ir.F32, shape(4, 2))
	for i := int64(0); i < 8; i++ {
		in.Set(i, float64(i))
	}
	res, err := job(t, prog, evaluator.Options{Stats: true}).Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	require.Equal(t, []float64{0 + 2 + 4 + 6, 1 + 3 + 5 + 7}, floats(res.Ranks[0].Outputs["out"]))
	require.NotEmpty(t, res.Ranks[0].Stats.Ops)
}

func TestMissingAndMistypedInputs(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 4).Sharded(0))
	b.Output(b.Unary(ir.OpNeg, x))
	prog, err := b.Program()
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})

	_, err = j.Run(map[string]*host.Array{})
	require.ErrorContains(t, err, "missing input: [%x : f32[4/DIDx]]")
	_, err = j.Run(map[string]*host.Array{"x": host.New(ir.F32, shape(3))})
	require.ErrorContains(t, err, "input %x is declared f32[4/DIDx] but was given f32[3]")
	_, err = j.Run(map[string]*host.Array{"x": host.New(ir.F32, shape(4)), "y": host.New(ir.F32, shape(4))})
	require.ErrorContains(t, err, "no input %y")
}

func TestRunAgainGivesSameResultsAndHitsCaches(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.BF16, 4, 8).Sharded(1))
	e := b.Unary(ir.OpExp, x)
	n := b.Unary(ir.OpNeg, e)
	s := b.Op(ir.OpSum, n).Ints("axes", 0).Value()
	r := b.Collective(ir.OpAllReduce, s, ir.AlgoOneShot).Name("r").Value()
	b.Output(r)
	prog, err := b.Program()
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	in := host.Random(ir.BF16, shape(4, 8), 5)
	first, err := j.Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	second, err := j.Run(map[string]*host.Array{"x": in})
	require.NoError(t, err)
	for i := range first.Ranks {
		require.Equal(t, first.Ranks[i].Outputs["r"].Data, second.Ranks[i].Outputs["r"].Data)
		require.Positive(t, second.Ranks[i].Stats.KernelHits)
		require.Equal(t, first.Ranks[i].Stats.KernelMisses, second.Ranks[i].Stats.KernelMisses, "no recompiles")
	}
}

func TestErrorsNameTheOpAndPlace(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 4))
	idx := b.Op(ir.OpSelect, x, ir.Int(1)).Op()
	idx.Pos = ir.NewPos("p.hir", 3, 1)
	b.Output(idx.Result())
	prog, err := b.Program()
	require.NoError(t, err)
	// Make the literal index invalid after checking, as a Go user might.
	j := job(t, prog, evaluator.Options{})
	idx.Operands[1] = ir.Int(9)
	_, err = j.Run(map[string]*host.Array{"x": host.New(ir.F32, shape(4))})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "p.hir:3:1: rank 0: select: index 9 is out of range"), err.Error())
	// ... and the error is typed: errors.As finds the RunError's parts
	var re *evaluator.RunError
	require.True(t, errors.As(err, &re), "%T %v", err, err)
	require.Equal(t, idx, re.Op)
	require.Equal(t, ir.NewPos("p.hir", 3, 1), re.Pos)
	require.Contains(t, []int{0, 1}, re.Rank)
	require.Contains(t, re.Err.Error(), "index 9 is out of range")
	require.Equal(t, 1, strings.Count(err.Error(), "p.hir:3:1"), "the position is said once: %v", err)
}

// BenchmarkOverheadPerOp measures what the evaluator adds per op on the CPU
// runtime: a chain of unfused adds on a 4-element tensor on one rank.
func BenchmarkOverheadPerOp(b *testing.B) {
	const n = 1000
	j, in := addChain(b, n) // unfused, so every add stays an op of its own
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.Run(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/irop")
	_ = fmt.Sprint
}
