package evaluator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// graphReplays is how many Runs each program makes in graph mode: one
// eager warm-up, one capture, the rest replays, each with fresh inputs.
func graphReplays(t *testing.T) int {
	if testing.Short() {
		return 10
	}
	return 100
}

// TestGraphModeEqualsEager runs every testdata program that lowers in graph
// mode and eagerly, side by side, with fresh inputs on every Run: the
// outputs must be equal bit for bit (the CPU runtime is deterministic), so
// a graph that kept a stale input, a stale intermediate buffer or a stale
// meeting with its peers fails here. Programs with ops that wait on the
// host (transfers' register and deregister, barrier, sync_stream) run
// split into several graphs, those ops on the host between them.
func TestGraphModeEqualsEager(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../testdata/*.hir", "../testdata/cuda/*.hir", "../examples/*.hir", "../testdata/contract/*.hir"} {
		more, err := filepath.Glob(pattern)
		require.NoError(t, err)
		files = append(files, more...)
	}
	replays := graphReplays(t)
	var ran, refused, split, nodes int
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		prog, err := parser.Parse(file, src)
		if err != nil {
			continue
		}
		if passes.Lower(prog, &passes.Context{}) != nil || !smallEnough(prog) {
			continue
		}
		t.Run(filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file), func(t *testing.T) {
			splits := len(ir.GraphSplits(prog))
			if splits > 0 {
				split++
			}
			if blockers := ir.CaptureBlockers(prog); len(blockers) > 0 {
				refused++
				rt := newSim(t, prog.Mesh.Size())
				_, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
				require.Error(t, err)
				assert.Contains(t, err.Error(), blockers[0].Op.Pos.String()+": "+blockers[0].Op.Code.String()+" cannot be captured in a graph")
				return
			}
			ran++
			eager := newJob(t, prog, evaluator.Options{})
			graph := newJob(t, prog, evaluator.Options{Graph: true})
			for run := range replays {
				inputs := freshInputs(prog, uint64(run)*7919+1)
				want, err := eager.Run(inputs)
				require.NoError(t, err, "eager run %d", run)
				got, err := graph.Run(inputs)
				require.NoError(t, err, "graph-mode run %d", run)
				for i := range want.Ranks {
					for name, w := range want.Ranks[i].Outputs {
						g := got.Ranks[i].Outputs[name]
						require.NotNil(t, g, "run %d rank %d output %s", run, i, name)
						require.Equal(t, w.Data, g.Data, "run %d rank %d output %s differs from the eager run", run, i, name)
					}
				}
			}
			res, err := graph.Run(freshInputs(prog, 3))
			require.NoError(t, err)
			for _, r := range res.Ranks {
				nodes += r.Stats.GraphNodes
				assert.Equal(t, int64(replays), r.Stats.GraphReplays, "rank %d: launches", r.Rank)
				if splits > 0 {
					assert.Greater(t, r.Stats.Graphs, 1, "rank %d: graphs of a program with %d ops that wait on the host", r.Rank, splits)
				} else {
					assert.Equal(t, 1, r.Stats.Graphs, "rank %d: graphs", r.Rank)
				}
			}
		})
	}
	t.Logf("%d programs equal in graph mode over %d runs each (%d of them split by ops that wait on the host); %d refused (a loop too long)", ran, replays, split, refused)
	assert.Greater(t, ran, 30, "too few programs ran in graph mode")
	assert.GreaterOrEqual(t, split, 5, "too few programs split their graphs")
	assert.Greater(t, nodes, 1000, "the graphs hold too few nodes to have tested anything")
}

func newSim(t *testing.T, ranks int) runtime.Runtime {
	rt, err := sim.New(runtime.Config{WorldSize: ranks})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt
}

func newJob(t *testing.T, prog *ir.Program, opts evaluator.Options) *evaluator.Job {
	job, err := evaluator.NewJob(prog, newSim(t, prog.Mesh.Size()), opts)
	require.NoError(t, err)
	t.Cleanup(func() { job.Close() })
	return job
}

func freshInputs(prog *ir.Program, seed uint64) map[string]*host.Array {
	inputs := map[string]*host.Array{}
	for i, in := range prog.Inputs {
		tt := in.Tensor()
		inputs[in.Name] = host.Random(tt.DType, tt.Shape(), seed+uint64(i))
	}
	return inputs
}
