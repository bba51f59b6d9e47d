package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// splitPrograms run in graph mode split at ops that wait on the host
// (evaluator/graph.go): a one-sided read around a ring in a loop, with a
// barrier a trip, and the tp package's matmul + reduce_scatter peer ring
// on two streams (barriers around peers' writes through the contiguous
// view).
var splitPrograms = map[string]string{
	"transfer_ring": `mesh 2
input %x : f32[2/DIDx, 64] symmetric
%acc = alloc : f32[2/DIDx, 64]
for %i = 0 to 3 {
  %y = mul %x, 2.0 : f32[2/DIDx, 64] symmetric
  %h = register %y
  %left = alloc : f32[2/DIDx, 64]
  %r = transfer %h, %left dir=read peer=+1
  wait %r
  deregister %h
  %s = add %left, 1.5
  %a = add %acc, %s
  %c = copy %a, %acc
  barrier
}
output %acc
`,
	"reduce_scatter_ring": `mesh 2
input %a : f32[8, 16]
input %w : f32[16, 32]
%slots = alloc : f32[2/DIDx, 2, 4, 32] symmetric
%view = symmetric_contiguous_view %slots
%a3 = reshape %a shape=[2, 4, 16]
barrier
for %s = 0 to 2 streams 2 {
  %ab = select %a3, %s shift=rank
  %pb = matmul %ab, %w
  %owner = select %view, %s shift=rank
  %mine = select %owner, 0 shift=rank
  %e = copy %pb, %mine
}
barrier
%sum = sum %slots axes=[1]
%ring = reshape %sum shape=[8, 32]
output %ring
`,
}

// TestGraphSplitsOnGPU: on 2 ranks, each program in graph mode (several
// graphs a rank, the ops between them on the host) equals its eager run
// bit for bit over 30 Runs with fresh inputs, and closing the jobs leaves
// no graph.
func TestGraphSplitsOnGPU(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "graph-splits"))
}

func init() { scenarios["graph-splits"] = graphSplitsScenario }

func graphSplitsScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	// Every rank runs the programs in one order: a map's order differs
	// between processes, and the ranks' collectives must meet.
	for _, name := range slices.Sorted(maps.Keys(splitPrograms)) {
		src := splitPrograms[name]
		prog, err := parser.Parse(name+".hir", []byte(src))
		if err != nil {
			return err
		}
		if err := passes.Lower(prog, &passes.Context{}); err != nil {
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
		var graphs int
		for run := range 30 {
			inputs := map[string]*host.Array{}
			for i, in := range prog.Inputs {
				tt := in.Tensor()
				inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(run*31+i+1))
			}
			want, err := eager.Run(inputs)
			if err == nil {
				var got *evaluator.Result
				if got, err = graph.Run(inputs); err == nil {
					for _, rr := range want.Ranks {
						for out, w := range rr.Outputs {
							g := got.Ranks[0].Outputs[out]
							if g == nil || !bytes.Equal(w.Data, g.Data) {
								err = fmt.Errorf("%s run %d: output %s differs from the eager run", name, run, out)
							}
						}
					}
					graphs = got.Ranks[0].Stats.Graphs
				}
			}
			if err != nil {
				return errors.Join(fmt.Errorf("%s run %d: %w", name, run, err), graph.Close(), eager.Close())
			}
		}
		if err := errors.Join(graph.Close(), eager.Close()); err != nil {
			return err
		}
		if graphs < 2 {
			return fmt.Errorf("%s: %d graphs a rank, want the program split", name, graphs)
		}
		if n := d.Stats().Graphs; n != 0 {
			return fmt.Errorf("%s: %d graphs left after the jobs closed", name, n)
		}
		fmt.Printf("%s: %d graphs a rank, 30 runs equal to eager\n", name, graphs)
	}
	return nil
}

// TestSplitProgramsOnCPU: the GPU test's programs pass check, and in graph
// mode equal their eager runs on the CPU runtime (here, with no GPU).
func TestSplitProgramsOnCPU(t *testing.T) {
	for name, src := range splitPrograms {
		prog, err := parser.Parse(name+".hir", []byte(src))
		require.NoError(t, err)
		require.NoError(t, passes.Lower(prog, &passes.Context{}), name)
		rt, err := sim.New(runtime.Config{WorldSize: 2})
		require.NoError(t, err)
		eager, err := evaluator.NewJob(prog, rt, evaluator.Options{})
		require.NoError(t, err)
		graph, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
		require.NoError(t, err)
		for run := range 5 {
			inputs := map[string]*host.Array{}
			for i, in := range prog.Inputs {
				tt := in.Tensor()
				inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(run*31+i+1))
			}
			want, err := eager.Run(inputs)
			require.NoError(t, err, "%s eager run %d", name, run)
			got, err := graph.Run(inputs)
			require.NoError(t, err, "%s graph run %d", name, run)
			for i, rr := range want.Ranks {
				for out, w := range rr.Outputs {
					require.Equal(t, w.Data, got.Ranks[i].Outputs[out].Data, "%s run %d rank %d %s", name, run, i, out)
				}
			}
			if run > 0 {
				require.Greater(t, got.Ranks[0].Stats.Graphs, 1, name)
			}
		}
		require.NoError(t, errors.Join(graph.Close(), eager.Close(), rt.Close()))
	}
}
