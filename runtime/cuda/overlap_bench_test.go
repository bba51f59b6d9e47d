package cuda

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/tp"
)

// The overlap benchmark (issue 14, docs/OVERLAP.md): the two
// tensor-parallel patterns at three shapes, bf16 on 2 ranks (or
// HIR_OVERLAP_WORLD), each timed
// as communication alone, matmul alone, the unpipelined sequence and hir's
// pipelined decompositions; scripts/overlap_peer.py times PyTorch's
// (NCCL, and torch.ops.symm_mem's fused ops) in the same device call.
// all_gather + matmul: x [M/DIDx, K], w [K, N/world]; matmul +
// reduce_scatter: a [M, K/world], w [K/world, N]. The ratio of communication to compute follows N
// (the gathered bytes do not grow with it, the flops do).

type overlapShape struct {
	name    string
	m, k, n int64
}

var overlapShapes = []overlapShape{
	{"comm-bound", 4096, 8192, 1024},
	{"balanced", 8192, 8192, 4096},
	{"compute-bound", 16384, 8192, 8192},
}

// overlapVariant builds one timed program on b from the pattern's
// operands; it returns the value whose small view is the output.
type overlapVariant struct {
	name  string
	build func(b *ir.Builder, x, w *ir.Value) (*ir.Value, error)
	graph bool // replayed as one CUDA graph per rank (the Runs after the capture)
}

func overlapVariants(pattern string) []overlapVariant {
	dec := func(d tp.Decomposition, chunks, streams int, algo ir.Algo) func(b *ir.Builder, x, w *ir.Value) (*ir.Value, error) {
		return func(b *ir.Builder, x, w *ir.Value) (*ir.Value, error) {
			o := tp.Options{Decomposition: d, Chunks: chunks, Streams: streams, Algo: algo}
			if pattern == "all_gather_matmul" {
				return tp.AllGatherMatmul(b, x, w, o)
			}
			return tp.MatmulReduceScatter(b, x, w, o)
		}
	}
	// comm and matmul alone take their operand whole as an input
	// (overlapProgram): the gathered rows, or the product to scatter.
	comm := func(b *ir.Builder, x, w *ir.Value) (*ir.Value, error) {
		t := x.Tensor()
		if pattern == "all_gather_matmul" {
			return b.Op(ir.OpAllGather, x).Type(ir.Tensor(t.DType, t.Dims[0].Extent, t.Dims[1].Extent).In(ir.Symmetric)).Value(), nil
		}
		return b.Op(ir.OpReduceScatter, x).Int("axis", 0).Type(t.Sharded(0)).Value(), nil
	}
	mm := func(b *ir.Builder, x, w *ir.Value) (*ir.Value, error) {
		return b.Op(ir.OpMatmul, x, w).Value(), nil
	}
	vs := []overlapVariant{
		{name: "comm", build: comm},
		{name: "matmul", build: mm},
		{name: "unpipelined", build: dec(tp.Unpipelined, 0, 0, ir.AlgoAuto)},
		{name: "chunked-4x2streams", build: dec(tp.Chunked, 4, 2, ir.AlgoAuto)},
		{name: "peer-ring-2streams", build: dec(tp.PeerRing, 0, 2, ir.AlgoAuto)},
		{name: "chunked-async-4", build: dec(tp.ChunkedAsync, 4, 0, ir.AlgoAuto)},
	}
	// The communication on the copy engines leaves the SMs to the matmul
	// (reduce_scatter's copy_engine pulls the blocks, then reduces them
	// in one local pass).
	vs = append(vs, overlapVariant{name: "chunked-ce-4x2streams", build: dec(tp.Chunked, 4, 2, ir.AlgoCopyEngine)},
		overlapVariant{name: "chunked-async-ce-4", build: dec(tp.ChunkedAsync, 4, 0, ir.AlgoCopyEngine)})
	if pattern == "all_gather_matmul" {
		// this rank's rows multiplied where they lie while the copy
		// engines fetch the peers'
		vs = append(vs, overlapVariant{name: "local-first", build: dec(tp.LocalFirst, 0, 0, ir.AlgoAuto)},
			// each peer's rows in 4 pieces, so the last matmul waits for
			// a quarter of a block, on one and on two copy streams
			overlapVariant{name: "local-first-4", build: dec(tp.LocalFirst, 4, 0, ir.AlgoAuto)},
			overlapVariant{name: "local-first-4x2streams", build: dec(tp.LocalFirst, 4, 2, ir.AlgoAuto)})
	} else {
		// the peers' products pushed by the copy engines while the next
		// is made, this rank's own last, meetings on the device
		vs = append(vs, overlapVariant{name: "peers-first", build: dec(tp.PeersFirst, 0, 0, ir.AlgoAuto)},
			// pushes to different peers at once (two streams), and each
			// push in two halves on two streams (two copy engines)
			overlapVariant{name: "peers-first-2streams", build: dec(tp.PeersFirst, 0, 2, ir.AlgoAuto)},
			overlapVariant{name: "peers-first-2x2streams", build: dec(tp.PeersFirst, 2, 2, ir.AlgoAuto)},
			// the partial sums travel round the ring, each rank adding its
			// product into them (no sum at the end), in 2 pieces (4 were
			// slower still: docs/bench/overlap-h200-x4-ring-accumulate.txt)
			overlapVariant{name: "ring-accumulate", build: dec(tp.RingAccumulate, 0, 0, ir.AlgoAuto)})
	}
	// The pipelined decompositions again in graph mode: an eager Run
	// enqueues a dozen ops per piece from the host, which a replay does
	// not (a GPU timeline showed the pieces waiting on the host).
	for _, v := range vs[3:] {
		vs = append(vs, overlapVariant{name: v.name + "-graph", build: v.build, graph: true})
	}
	return vs
}

// overlapProgram is one variant at one shape on world ranks, with no
// output: a Run is its work and the synchronisation at its end, as
// scripts/overlap_peer.py's step is the op and torch.cuda.synchronize()
// (until the seventh session a Run also read back one column of the
// result, 10-20 µs that PyTorch's step does not pay: docs/bench/
// h200-run-cost.txt). The decompositions' results are checked apart
// (TestDecompositionsOnGPU).
func overlapProgram(pattern string, world int64, s overlapShape, v overlapVariant) (*ir.Program, error) {
	b := ir.NewBuilder(ir.LinearMesh(int(world)))
	var x, w *ir.Value
	switch {
	case pattern == "all_gather_matmul" && v.name == "matmul":
		x = b.Input("g", ir.Tensor(ir.BF16, s.m, s.k)) // the rows, gathered
	case pattern == "all_gather_matmul":
		x = b.Input("x", ir.Tensor(ir.BF16, s.m, s.k).Sharded(0).In(ir.Symmetric))
	case v.name == "comm":
		x = b.Input("p", ir.Tensor(ir.BF16, s.m, s.n).In(ir.Symmetric)) // the product to scatter
	default:
		x = b.Input("a", ir.Tensor(ir.BF16, s.m, s.k/world))
	}
	if pattern == "all_gather_matmul" {
		w = b.Input("w", ir.Tensor(ir.BF16, s.k, s.n/world))
	} else {
		w = b.Input("w", ir.Tensor(ir.BF16, s.k/world, s.n))
	}
	if _, err := v.build(b, x, w); err != nil {
		return nil, err
	}
	prog, err := b.Program()
	if err != nil {
		return nil, err
	}
	return prog, passes.Lower(prog, &passes.Context{})
}

// BenchmarkOverlap prints, from rank 0, one line per pattern, shape and
// variant: "overlap PATTERN SHAPE VARIANT MS" (the best Run of 5, inputs
// kept on the device; for a -graph variant the 5 Runs after the eager one
// and the capture are replays), on HIR_OVERLAP_WORLD ranks (2 by default).
// comm, matmul and unpipelined are timed both ways, each line the better
// (an "overlap-modes" line gives both).
func BenchmarkOverlap(b *testing.B) {
	world := overlapWorld()
	needGPUs(b, world)
	if os.Getenv("HIR_OVERLAP") != "1" {
		b.Skip("minutes of GPU time: run with HIR_OVERLAP=1 (scripts/device-run.sh with HIR_OVERLAP_ONLY=1)")
	}
	runs := runRanks(b, world, "overlap-bench")
	failed := false
	for _, r := range runs {
		if r.code != 0 { // every failing rank's story: one rank's timeout often names another's failure
			b.Errorf("rank %d exited with %d:\n%s", r.rank, r.code, r.output)
			failed = true
		}
	}
	for _, r := range runs {
		if r.rank == 0 && !failed {
			fmt.Print(r.output)
		}
	}
}

// overlapSelected reports whether HIR_OVERLAP_CASES (a regular expression
// matched against "PATTERN SHAPE VARIANT") picks a case; unset, all are.
func overlapSelected(pattern, shape, variant string) bool {
	expr := os.Getenv("HIR_OVERLAP_CASES")
	if expr == "" {
		return true
	}
	ok, err := regexp.MatchString(expr, pattern+" "+shape+" "+variant)
	return err == nil && ok
}

func init() { scenarios["overlap-bench"] = overlapBenchScenario }

// overlapWorld is HIR_OVERLAP_WORLD, else 2.
func overlapWorld() int {
	if w, err := strconv.Atoi(os.Getenv("HIR_OVERLAP_WORLD")); err == nil && w >= 2 {
		return w
	}
	return 2
}

func overlapBenchScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	for _, pattern := range []string{"all_gather_matmul", "matmul_reduce_scatter"} {
		for _, s := range overlapShapes {
			// a shape's inputs, made once for all its variants (the
			// largest are hundreds of MB, made whole on every rank)
			made := map[string]*host.Array{}
			for _, v := range overlapVariants(pattern) {
				if !overlapSelected(pattern, s.name, v.name) {
					continue
				}
				prog, err := overlapProgram(pattern, int64(d.WorldSize()), s, v)
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", pattern, s.name, v.name, err)
				}
				inputs := map[string]*host.Array{}
				for i, in := range prog.Inputs {
					key := fmt.Sprint(in.Name, in.Tensor().Shape())
					if made[key] == nil {
						made[key] = host.Random(ir.BF16, in.Tensor().Shape(), uint64(i+1))
					}
					inputs[in.Name] = made[key]
				}
				timeRuns := func(graph bool) (time.Duration, error) {
					job, err := evaluator.NewJob(prog, rt, evaluator.Options{KeepInputs: true, Graph: graph})
					if err != nil {
						return 0, err
					}
					best := time.Duration(1 << 62)
					for run := range 7 {
						in := inputs
						if run > 0 {
							in = nil
						}
						if err := alignRanks(d); err != nil {
							job.Close()
							return 0, err
						}
						t0 := time.Now()
						if _, err := job.Run(in); err != nil {
							job.Close()
							return 0, fmt.Errorf("%s %s %s: %w", pattern, s.name, v.name, err)
						}
						if run >= 2 {
							best = min(best, time.Since(t0))
						}
					}
					return best, job.Close()
				}
				best, err := timeRuns(v.graph)
				if err != nil {
					return err
				}
				// comm, matmul and unpipelined alone: the better of an eager
				// Run and a graph replay, as "best pipelined" is the best of
				// the variants in either mode; both go on an overlap-modes line
				if v.name == "comm" || v.name == "matmul" || v.name == "unpipelined" {
					replayed, err := timeRuns(true)
					if err != nil {
						return err
					}
					if d.Opts.Rank == 0 {
						fmt.Printf("overlap-modes %s %s %s eager %.3f graph %.3f\n", pattern, s.name, v.name, ms(best), ms(replayed))
					}
					best = min(best, replayed)
				}
				if d.Opts.Rank == 0 {
					name := v.name
					if b := d.Tune.Blocks; b > 0 { // HIR_COLL_BLOCKS: collectives on fewer SMs
						name += fmt.Sprintf("-blocks%d", b)
					}
					fmt.Printf("overlap %s %s %s %.3f\n", pattern, s.name, name, ms(best))
				}
			}
		}
	}
	return nil
}

// TestOverlapProgramsBuild: every program the benchmark times checks and
// lowers (here, with no GPU), at every shape, on 2 and 4 ranks.
func TestOverlapProgramsBuild(t *testing.T) {
	for _, world := range []int64{2, 4} {
		for _, pattern := range []string{"all_gather_matmul", "matmul_reduce_scatter"} {
			for _, s := range overlapShapes {
				for _, v := range overlapVariants(pattern) {
					if !overlapSelected(pattern, s.name, v.name) {
						continue
					}
					_, err := overlapProgram(pattern, world, s, v)
					require.NoError(t, err, "%d ranks %s %s %s", world, pattern, s.name, v.name)
				}
			}
		}
	}
}

// ms is d in milliseconds to the microsecond, as the overlap lines print it.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
