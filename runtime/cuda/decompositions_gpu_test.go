package cuda

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/tp"
)

// TestDecompositionsOnGPU: the overlap decompositions (docs/OVERLAP.md:
// Chunked on one and on several streams, PeerRing) of both tensor-parallel
// patterns give the unpipelined program's result on real GPUs, one
// process per rank, eagerly and replayed from CUDA graphs, over Runs with
// fresh inputs, and a graph Run gives what an eager one gives (issue 20's
// correctness; tp's TestDecompositionsAgree asks the same of the CPU
// runtime). cuBLAS may pick another algorithm for a chunk's rows than for
// all of them, so results agree within f32 rounding, not bit for bit.
func TestDecompositionsOnGPU(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "decompositions"))
}

func TestDecompositionsOnGPU4(t *testing.T) {
	needGPUs(t, 4)
	checkRanks(t, runRanks(t, 4, "decompositions"))
}

func init() { scenarios["decompositions"] = decompositionsScenario }

// decompositionProgram has one output per decomposition of pattern.
func decompositionProgram(pattern string, mesh int, m, k, n int64, chunks, streams int) (*ir.Program, error) {
	b := ir.NewBuilder(ir.LinearMesh(mesh))
	var x *ir.Value
	build, pat := tp.MatmulReduceScatter, tp.MatmulRS
	if pattern == "all_gather_matmul" {
		x = b.Input("x", ir.Tensor(ir.F32, m, k).Sharded(0).In(ir.Symmetric))
		build, pat = tp.AllGatherMatmul, tp.AGMatmul
	} else {
		x = b.Input("x", ir.Tensor(ir.F32, m, k))
	}
	w := b.Input("w", ir.Tensor(ir.F32, k, n))
	for _, d := range tp.DecompositionsOf(pat) {
		y, err := build(b, x, w, tp.Options{Decomposition: d, Chunks: chunks, Streams: streams})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", pattern, d, err)
		}
		y.Name = d.String()
		b.Output(y)
	}
	prog, err := b.Program()
	if err != nil {
		return nil, err
	}
	return prog, passes.Lower(prog, &passes.Context{})
}

func decompositionsScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := checkDecompositions(rt, d.WorldSize()); err != nil {
		return err
	}
	fmt.Printf("rank %d: decompositions agree on %d GPUs, eager and graph\n", d.Rank(), d.WorldSize())
	return nil
}

// TestDecompositionsCheckOnSim runs the GPU test's check on the CPU
// runtime (every rank in this process), so the check itself is tested
// where there is no GPU.
func TestDecompositionsCheckOnSim(t *testing.T) {
	for _, mesh := range []int{2, 4} {
		rt, err := sim.New(runtime.Config{WorldSize: mesh})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDecompositions(rt, mesh); err != nil {
			t.Errorf("%d ranks: %v", mesh, err)
		}
		rt.Close()
	}
}

// checkDecompositions runs both patterns' decompositions on rt (the ranks
// it hosts) and compares them with the unpipelined program.
func checkDecompositions(rt runtime.Runtime, mesh int) error {
	m, k, n := int64(64*mesh), int64(96), int64(80)
	for _, pattern := range []string{"all_gather_matmul", "matmul_reduce_scatter"} {
		for _, cs := range [][2]int{{0, 0}, {2, 0}, {4, 2}} {
			prog, err := decompositionProgram(pattern, mesh, m, k, n, cs[0], cs[1])
			if err != nil {
				return err
			}
			eager, err := evaluator.NewJob(prog, rt, evaluator.Options{})
			if err != nil {
				return err
			}
			graph, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
			if err != nil {
				return errors.Join(err, eager.Close())
			}
			err = func() error {
				for run := range 4 {
					in := map[string]*host.Array{
						"x": host.Random(ir.F32, prog.Inputs[0].Tensor().Shape(), uint64(run*2+1)),
						"w": host.Random(ir.F32, []int64{k, n}, uint64(run*2+2)),
					}
					what := fmt.Sprintf("%s chunks=%d streams=%d run %d", pattern, cs[0], cs[1], run)
					er, err := eager.Run(in)
					if err != nil {
						return fmt.Errorf("%s eager: %w", what, err)
					}
					gr, err := graph.Run(in)
					if err != nil {
						return fmt.Errorf("%s graph: %w", what, err)
					}
					for i, rr := range er.Ranks {
						want := rr.Outputs[tp.Unpipelined.String()]
						for _, dec := range tp.Decompositions() {
							if _, ok := rr.Outputs[dec.String()]; !ok {
								continue // not one of this pattern's
							}
							for mode, got := range map[string]*host.Array{"eager": rr.Outputs[dec.String()], "graph": gr.Ranks[i].Outputs[dec.String()]} {
								if err := closeArrays(want, got); err != nil {
									return fmt.Errorf("%s rank %d %s (%s) against unpipelined eager: %w", what, rr.Rank, dec, mode, err)
								}
							}
						}
					}
				}
				return nil
			}()
			if err := errors.Join(err, eager.Close(), graph.Close()); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeArrays: same shape, every element within f32 rounding of K-long
// dot products (relative 1e-4, at least 1e-4 absolute).
func closeArrays(want, got *host.Array) error {
	if want == nil || got == nil {
		return fmt.Errorf("missing output")
	}
	if fmt.Sprint(want.Shape) != fmt.Sprint(got.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	for i := range want.Len() {
		w, g := want.At(i), got.At(i)
		if math.Abs(w-g) > 1e-4*math.Max(1, math.Abs(w)) || g != g {
			return fmt.Errorf("element %d is %g, want %g", i, g, w)
		}
	}
	return nil
}

// TestTwoStreamCollectivesDoNotHang: the case that hung on 2 H200s
// (BenchmarkOverlap's matmul + reduce_scatter, compute-bound shape, 4
// chunks on 2 streams, replayed from a graph): each GPU started the
// other stream's collective first, and its spinning kernel starved the
// matmul queued before the collective its peer waited in. Collectives on
// different streams keep the host's order on the device now (order.go);
// 20 replays must finish (the collectives' timeout is 1 minute).
func TestTwoStreamCollectivesDoNotHang(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "two-stream-replays"))
}

func init() { scenarios["two-stream-replays"] = twoStreamReplaysScenario }

func twoStreamReplaysScenario() error {
	rt, _, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	shape := overlapShapes[len(overlapShapes)-1] // compute-bound
	for _, v := range overlapVariants("matmul_reduce_scatter") {
		if v.name != "chunked-4x2streams-graph" {
			continue
		}
		prog, err := overlapProgram("matmul_reduce_scatter", 2, shape, v)
		if err != nil {
			return err
		}
		inputs := map[string]*host.Array{}
		for i, in := range prog.Inputs {
			inputs[in.Name] = host.Random(ir.BF16, in.Tensor().Shape(), uint64(i+1))
		}
		job, err := evaluator.NewJob(prog, rt, evaluator.Options{KeepInputs: true, Graph: true})
		if err != nil {
			return err
		}
		for run := range 22 {
			in := inputs
			if run > 0 {
				in = nil
			}
			if _, err := job.Run(in); err != nil {
				job.Close()
				return fmt.Errorf("Run %d: %w", run, err)
			}
		}
		return job.Close()
	}
	return errors.New("no variant chunked-4x2streams-graph")
}
