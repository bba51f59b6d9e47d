package tp_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/tp"
)

var update = flag.Bool("update", false, "rewrite the golden programs in testdata/")

type pattern struct {
	name  string
	p     tp.Pattern
	build func(b *ir.Builder, x, w *ir.Value, o tp.Options) (*ir.Value, error)
	// x's type for a mesh of n ranks and m rows
	input func(m, k int64) *ir.TensorType
	exact bool // the decompositions add in the same order
}

var patterns = []pattern{
	{"all_gather_matmul", tp.AGMatmul, tp.AllGatherMatmul, func(m, k int64) *ir.TensorType {
		return ir.Tensor(ir.F32, m, k).Sharded(0).In(ir.Symmetric)
	}, true},
	{"matmul_reduce_scatter", tp.MatmulRS, tp.MatmulReduceScatter, func(m, k int64) *ir.TensorType {
		return ir.Tensor(ir.F32, m, k)
	}, false},
}

// build makes a program with one output per decomposition.
func build(t *testing.T, p pattern, mesh int, m, k, n int64, chunks, streams int) *ir.Program {
	t.Helper()
	b := ir.NewBuilder(ir.LinearMesh(mesh))
	x := b.Input("x", p.input(m, k))
	w := b.Input("w", ir.Tensor(ir.F32, k, n))
	for _, d := range tp.DecompositionsOf(p.p) {
		y, err := p.build(b, x, w, tp.Options{Decomposition: d, Chunks: chunks, Streams: streams})
		require.NoError(t, err, "%s %s", p.name, d)
		y.Name = d.String()
		b.Output(y)
	}
	prog, err := b.Program()
	require.NoError(t, err)
	return prog
}

// simJob lowers prog and makes its job on the CPU runtime with mesh
// ranks, closed (with the runtime) when t ends.
func simJob(t *testing.T, prog *ir.Program, mesh int, graph bool) *evaluator.Job {
	t.Helper()
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: mesh})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: graph})
	require.NoError(t, err)
	t.Cleanup(func() { job.Close() })
	return job
}

// TestDecompositionsAgree: every decomposition of both patterns gives the
// unpipelined result (all_gather+matmul bit for bit; matmul+reduce_scatter
// within float rounding, as it adds the ranks' products in another order),
// on 2 and 4 ranks, with 1, 2 and 4 chunks on one stream and 2 and 4
// chunks spread over 2 and 3 streams, eagerly and in graph mode, over
// several Runs with fresh inputs.
func TestDecompositionsAgree(t *testing.T) {
	for _, p := range patterns {
		for _, mesh := range []int{2, 4} {
			for _, cs := range [][2]int{{1, 0}, {2, 0}, {4, 0}, {2, 2}, {4, 3}} {
				chunks, streams := cs[0], cs[1]
				for _, graph := range []bool{false, true} {
					name := fmt.Sprintf("%s/mesh%d/chunks%d/streams%d/graph=%v", p.name, mesh, chunks, streams, graph)
					t.Run(name, func(t *testing.T) {
						m, k, n := int64(4*mesh), int64(3), int64(5)
						prog := build(t, p, mesh, m, k, n, chunks, streams)
						job := simJob(t, prog, mesh, graph)
						for run := range 4 {
							in := map[string]*host.Array{
								"x": host.Random(ir.F32, prog.Inputs[0].Tensor().Shape(), uint64(run*2+1)),
								"w": host.Random(ir.F32, []int64{k, n}, uint64(run*2+2)),
							}
							res, err := job.Run(in)
							require.NoError(t, err, "run %d", run)
							for _, rr := range res.Ranks {
								want := rr.Outputs[tp.Unpipelined.String()]
								for _, d := range tp.DecompositionsOf(p.p)[1:] {
									got := rr.Outputs[d.String()]
									require.Equal(t, want.Shape, got.Shape)
									if p.exact {
										require.Equal(t, want.Data, got.Data, "run %d rank %d %s", run, rr.Rank, d)
										continue
									}
									for i := range want.Len() {
										w := want.At(i)
										require.InDelta(t, w, got.At(i), 1e-5*math.Max(1, math.Abs(w)), "run %d rank %d %s element %d", run, rr.Rank, d, i)
									}
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestBuiltPrograms: the programs the builders make, printed (golden
// files, -update rewrites them), parse back to the same text.
func TestBuiltPrograms(t *testing.T) {
	for _, p := range patterns {
		prog := build(t, p, 2, 8, 3, 5, 2, 2)
		text := prog.String()
		path := filepath.Join("testdata", p.name+".hir")
		if *update {
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(want), text, "%s differs (go test ./tp -update)", path)
		back, err := parser.Parse(path, want)
		require.NoError(t, err)
		require.Equal(t, text, back.String())
	}
}

func TestBuilderErrors(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 8, 3).Sharded(0))
	w := b.Input("w", ir.Tensor(ir.F32, 3, 5))
	_, err := tp.AllGatherMatmul(b, x, w, tp.Options{Decomposition: tp.PeerRing})
	require.EqualError(t, err, "tp.AllGatherMatmul: peer_ring reads the peers' rows through the contiguous view, so %x must be symmetric; it is f32[8/DIDx, 3]")
	_, err = tp.AllGatherMatmul(b, x, w, tp.Options{Decomposition: tp.Chunked, Chunks: 3})
	require.EqualError(t, err, "tp.AllGatherMatmul: 3 chunks do not divide a block of 4 rows")
	_, err = tp.AllGatherMatmul(b, w, w, tp.Options{})
	require.EqualError(t, err, "tp.AllGatherMatmul: %w is f32[3, 5]; it must be sharded by rows only ([M/DIDx, K])")
	_, err = tp.MatmulReduceScatter(b, x, w, tp.Options{})
	require.EqualError(t, err, "tp.MatmulReduceScatter: %x is f32[8/DIDx, 3]; it must be unsharded (this rank's [M, K] block)")
	a := b.Input("a", ir.Tensor(ir.F32, 8, 4))
	_, err = tp.MatmulReduceScatter(b, a, w, tp.Options{})
	require.EqualError(t, err, "tp.MatmulReduceScatter: %a is f32[8, 4] and %w is f32[3, 5]: the contracted extents differ")
	_, err = tp.MatmulReduceScatter(b, a, w, tp.Options{Decomposition: 7})
	require.EqualError(t, err, "tp.MatmulReduceScatter: %a is f32[8, 4] and %w is f32[3, 5]: the contracted extents differ")
	a3 := b.Input("a3", ir.Tensor(ir.F32, 8, 3))
	_, err = tp.MatmulReduceScatter(b, a3, w, tp.Options{Decomposition: 7})
	require.EqualError(t, err, "tp.MatmulReduceScatter: no decomposition Decomposition(7)")
	_, err = tp.MatmulReduceScatter(b, a3, w, tp.Options{Streams: -1})
	require.EqualError(t, err, "tp.MatmulReduceScatter: -1 streams; give 0 (none) or more")
}

// TestBuildersTwiceInOneProgram: a program may use a pattern more than once;
// the loop indexes the builders name are made unique.
func TestBuildersTwiceInOneProgram(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 8, 3).Sharded(0).In(ir.Symmetric))
	w := b.Input("w", ir.Tensor(ir.F32, 3, 5))
	for _, d := range []tp.Decomposition{tp.Chunked, tp.Chunked, tp.PeerRing, tp.PeerRing} {
		y, err := tp.AllGatherMatmul(b, x, w, tp.Options{Decomposition: d})
		require.NoError(t, err)
		b.Output(y)
	}
	prog, err := b.Program()
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	_, err = parser.Parse("twice.hir", []byte(prog.String()))
	require.NoError(t, err, prog.String())
}

// TestLocalFirstOneRank: on a mesh of one rank LocalFirst has no peer to
// fetch from (its stream gets no work) and is the matmul alone.
func TestLocalFirstOneRank(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(1))
	x := b.Input("x", ir.Tensor(ir.F32, 4, 3).Sharded(0).In(ir.Symmetric))
	w := b.Input("w", ir.Tensor(ir.F32, 3, 5))
	for _, d := range []tp.Decomposition{tp.Unpipelined, tp.LocalFirst} {
		y, err := tp.AllGatherMatmul(b, x, w, tp.Options{Decomposition: d})
		require.NoError(t, err)
		y.Name = d.String()
		b.Output(y)
	}
	prog, err := b.Program()
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer job.Close()
	res, err := job.Run(map[string]*host.Array{
		"x": host.Random(ir.F32, []int64{4, 3}, 1),
		"w": host.Random(ir.F32, []int64{3, 5}, 2),
	})
	require.NoError(t, err)
	out := res.Ranks[0].Outputs
	require.Equal(t, out[tp.Unpipelined.String()].Data, out[tp.LocalFirst.String()].Data)
}
