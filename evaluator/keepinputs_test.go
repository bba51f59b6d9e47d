package evaluator_test

import (
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

func keepJob(t *testing.T, src string, opts evaluator.Options) *evaluator.Job {
	t.Helper()
	prog, err := parser.Parse("keep.hir", []byte(src))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	rt, err := sim.New(runtime.Config{WorldSize: prog.Mesh.Size()})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	j, err := evaluator.NewJob(prog, rt, opts)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	return j
}

// TestKeepInputs: with KeepInputs a Run may leave out an input an earlier
// Run gave, and computes with the value then uploaded (eager and in graph
// mode, where the captured graph reads the same buffer); an input never
// given, or one the program writes in place, is still required.
func TestKeepInputs(t *testing.T) {
	const src = `mesh 2
input %x : f32[4/DIDx, 3]
input %w : f32[3, 2]
%y = matmul %x, %w
%z = all_gather %y : f32[4, 2] symmetric
output %z
`
	for _, graph := range []bool{false, true} {
		j := keepJob(t, src, evaluator.Options{KeepInputs: true, Graph: graph})
		w := host.Random(ir.F32, []int64{3, 2}, 7)
		_, err := j.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{4, 3}, 1)})
		require.EqualError(t, err, "missing input: [%w : f32[3, 2] (no earlier Run gave it, so there is nothing to keep)]")
		for run := range 5 {
			x := host.Random(ir.F32, []int64{4, 3}, uint64(10+run))
			in := map[string]*host.Array{"x": x}
			if run == 0 {
				in["w"] = w
			}
			got, err := j.Run(in)
			require.NoError(t, err, "graph=%v run %d", graph, run)
			want, err := keepJob(t, src, evaluator.Options{}).Run(map[string]*host.Array{"x": x, "w": w})
			require.NoError(t, err)
			require.Equal(t, want.Ranks[0].Outputs["z"].Data, got.Ranks[0].Outputs["z"].Data, "graph=%v run %d", graph, run)
		}
	}
	j := keepJob(t, src, evaluator.Options{})
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{4, 3}, 1), "w": host.Random(ir.F32, []int64{3, 2}, 2)}
	_, err := j.Run(in)
	require.NoError(t, err)
	delete(in, "w")
	_, err = j.Run(in)
	require.EqualError(t, err, "missing input: [%w : f32[3, 2]]", "without KeepInputs every input is required")
}

func TestKeepInputsRefusesWrittenInputs(t *testing.T) {
	const src = `mesh 1
input %x : f32[4]
input %b : f32[4]
%v = reshape %b shape=[2, 2]
%y = neg %x
%u = reshape %y shape=[2, 2]
%c = copy %u, %v
output %c
`
	j := keepJob(t, src, evaluator.Options{KeepInputs: true})
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{4}, 1), "b": host.Random(ir.F32, []int64{4}, 2)}
	_, err := j.Run(in)
	require.NoError(t, err)
	delete(in, "b")
	_, err = j.Run(in)
	require.EqualError(t, err, "missing input: [%b : f32[4] (kept inputs must not change, but copy at keep.hir:7:6 may write it: pass it to every Run)]")
	require.True(t, j.KeepsInput("x"))
	require.False(t, j.KeepsInput("b"), "written in place")
	require.False(t, j.KeepsInput("nosuch"))
	require.False(t, keepJob(t, src, evaluator.Options{}).KeepsInput("x"), "without KeepInputs")
}

// TestKeepInputsFollowsDestinations: a write into the result of a copy into
// an input lands in the input too, so that input is not kept.
func TestKeepInputsFollowsDestinations(t *testing.T) {
	const src = `mesh 1
input %x : f32[4]
input %b : f32[4]
%y = neg %x
%c = copy %y, %b
%z = exp %x
%d = copy %z, %c
output %d
`
	j := keepJob(t, src, evaluator.Options{KeepInputs: true})
	require.True(t, j.KeepsInput("x"))
	require.False(t, j.KeepsInput("b"), "written through the copy's result")
}

// TestSymmetricInputsAcrossRuns: every rank reads every other rank's shard
// of a symmetric input through the contiguous view from the first op on.
// After the first Run the ranks meet on the stream (runtime.
// StreamBarrierer) before and after the uploads, new value or kept: each
// Run, eager or replayed, new or kept, on one stream
// or with the view read on a second, sees exactly this Run's value on
// every rank, never the last Run's or a mix (the CPU runtime runs its
// ranks concurrently, so a missing meeting shows here).
func TestSymmetricInputsAcrossRuns(t *testing.T) {
	const oneStream = `mesh 4
input %x : f32[4/DIDx, 512] symmetric
%v = symmetric_contiguous_view %x
%y = neg %v
output %y
`
	const twoStreams = `mesh 4
input %x : f32[4/DIDx, 512] symmetric
%s = stream
set_stream %s
%v = symmetric_contiguous_view %x
%y = neg %v
sync_stream %s
set_stream
output %y
`
	for name, src := range map[string]string{"one stream": oneStream, "two streams": twoStreams} {
		for _, graph := range []bool{false, true} {
			if graph && src == twoStreams {
				continue // sync_stream waits on the host: not capturable
			}
			j := keepJob(t, src, evaluator.Options{KeepInputs: true, Graph: graph})
			var x *host.Array
			for run := range 30 {
				in := map[string]*host.Array{}
				if run%3 != 2 { // every third Run keeps the last value
					x = host.Random(ir.F32, []int64{4, 512}, uint64(100+run))
					in["x"] = x
				}
				res, err := j.Run(in)
				require.NoError(t, err, "%s graph=%v run %d", name, graph, run)
				for _, rr := range res.Ranks {
					got := rr.Outputs["y"]
					require.Equal(t, x.Len(), got.Len())
					for i := range x.Len() {
						if got.At(i) != -x.At(i) {
							t.Fatalf("%s graph=%v run %d rank %d element %d: %g, want %g", name, graph, run, rr.Rank, i, got.At(i), -x.At(i))
						}
					}
				}
			}
		}
	}
}
