package evaluator_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// Loops with streams (the stream-parallel pass) on the CPU runtime, whose
// streams are goroutines running side by side: the results must be the
// plain loop's bit for bit, run after run, eagerly and in graph mode.
// Under -race a missing wait shows as a data race on the tensors' bytes.

// streamPrograms are chunked pipelines; STREAMS marks the loop header's
// place for ` streams N`.
var streamPrograms = []struct {
	name   string
	src    string
	inputs map[string][]int64
}{
	{
		// all_gather a chunk, multiply it, store it into its slice of %out
		name: "all_gather_matmul",
		src: `mesh 4
input %x : f32[8, 64/DIDx, 48]
input %w : f32[48, 32]
%out = alloc : f32[8, 64, 32]
for %i = 0 to 8STREAMS {
  %c = select %x, %i axis=0
  %g = all_gather %c algo=ring : f32[64, 48] symmetric
  %y = matmul %g, %w
  %r = relu %y
  %o = select %out, %i axis=0
  %d = copy %r, %o
}
%acc = copy %out mem=global
for %j = 0 to 8 step 2STREAMS {
  %v = select %acc, %j axis=0
  %p = mul %v, 0.5
  %q = copy %p, %v
}
output %out, %acc
`,
		inputs: map[string][]int64{"x": {8, 64, 48}, "w": {48, 32}},
	},
	{
		// each rank's partial products of a chunk, reduce-scattered into
		// the chunk's slice of %out (per-rank data from a ring shift)
		name: "matmul_reduce_scatter",
		src: `mesh 4
input %x : f32[32/DIDx, 64, 48]
input %w : f32[48, 32]
%s = stream
set_stream %s
send %x peer=+1
set_stream
%u = recv peer=-1 : f32[8, 64, 48]
sync_stream %s
%out = alloc : f32[8, 64/DIDx, 32]
for %i = 0 to 8STREAMS {
  %ui = select %u, %i axis=0
  %c = matmul %ui, %w
  %o = select %out, %i axis=0
  %r = reduce_scatter %c, %o algo=ring op=sum axis=0
}
%t = sum %out axes=[2]
output %out, %t
`,
		inputs: map[string][]int64{"x": {32, 64, 48}, "w": {48, 32}},
	},
	{
		// storage touched before the loop under another name: the loop
		// reads %buf, which a copy wrote; it overwrites %out, which the mul
		// before it reads. The loop's streams must wait for both.
		name: "fork",
		src: `mesh 2
input %x : f32[8, 64, 48]
input %w : f32[48, 32]
%e = exp %x
%buf = alloc : f32[8, 64, 48]
%c = copy %e, %buf
%out = matmul %x, %w
%before = mul %out, 2.0
for %i = 0 to 8STREAMS {
  %bi = select %buf, %i axis=0
  %m = matmul %bi, %w
  %o = select %out, %i axis=0
  %d = copy %m, %o
}
output %out, %before
`,
		inputs: map[string][]int64{"x": {8, 64, 48}, "w": {48, 32}},
	},
}

func streamJob(t *testing.T, src string, streams int, opts evaluator.Options) (*ir.Program, *evaluator.Job) {
	t.Helper()
	header := ""
	if streams > 0 {
		header = fmt.Sprintf(" streams %d", streams)
	}
	prog, err := parser.Parse("pipeline.hir", []byte(strings.ReplaceAll(src, "STREAMS", header)))
	require.NoError(t, err)
	return prog, job(t, prog, opts)
}

func TestStreamParallelEqualsThePlainLoop(t *testing.T) {
	const runs = 8
	for _, pr := range streamPrograms {
		_, plain := streamJob(t, pr.src, 0, evaluator.Options{})
		want := make([]*evaluator.Result, runs)
		inputs := make([]map[string]*host.Array, runs)
		for run := range runs {
			inputs[run] = map[string]*host.Array{}
			for name, shape := range pr.inputs {
				inputs[run][name] = host.Random(ir.F32, shape, uint64(100*run+len(name)))
			}
			res, err := plain.Run(inputs[run])
			require.NoError(t, err)
			want[run] = res
		}
		for _, streams := range []int{1, 2, 3, 8} {
			for _, graph := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/streams=%d/graph=%v", pr.name, streams, graph), func(t *testing.T) {
					prog, j := streamJob(t, pr.src, streams, evaluator.Options{Graph: graph})
					text := prog.String()
					require.NotContains(t, text, "streams ", "lowered")
					require.Contains(t, text, "wait_stream")
					for run := range runs {
						got, err := j.Run(inputs[run])
						require.NoError(t, err)
						requireSameBits(t, want[run], got, run)
					}
				})
			}
		}
	}
}

func requireSameBits(t *testing.T, want, got *evaluator.Result, run int) {
	t.Helper()
	require.Len(t, got.Ranks, len(want.Ranks))
	for r := range want.Ranks {
		for name, w := range want.Ranks[r].Outputs {
			g := got.Ranks[r].Outputs[name]
			require.NotNil(t, g, "rank %d output %s", r, name)
			require.Equal(t, w.Shape, g.Shape, "rank %d output %s", r, name)
			require.True(t, string(w.Data) == string(g.Data), "run %d rank %d output %s differs from the plain loop's", run, r, name)
		}
	}
}

// Iteration k's work goes to stream k mod N: the trace names the stream of
// every op, so each iteration's matmul is found on the stream its index
// picks, and N distinct streams are used.
func TestStreamParallelIterationsRotateOverTheStreams(t *testing.T) {
	for _, streams := range []int{2, 3} {
		prog, j := streamJob(t, streamPrograms[0].src, streams, evaluator.Options{Trace: true})
		in := map[string]*host.Array{}
		for name, shape := range streamPrograms[0].inputs {
			in[name] = host.Random(ir.F32, shape, 7)
		}
		res, err := j.Run(in)
		require.NoError(t, err)
		// the first loop's streams, in order: the ops made by the pass
		var streamOps []string
		prog.Walk(func(op *ir.Op) {
			if op.Code == ir.OpStream && strings.HasPrefix(op.Result().Name, "i.stream") {
				streamOps = append(streamOps, op.Result().Name)
			}
		})
		require.Len(t, streamOps, streams)
		for _, rank := range res.Ranks {
			byIter := map[int64]string{}
			for _, ev := range rank.Stats.Trace {
				if ev.Op == "matmul" && ev.Iter >= 0 {
					byIter[ev.Iter] = ev.StreamName
				}
			}
			require.Len(t, byIter, 8)
			used := map[string]bool{}
			for i := int64(0); i < 8; i++ {
				require.Contains(t, byIter[i], "%"+streamOps[i%int64(streams)], "rank %d iteration %d", rank.Rank, i)
				used[byIter[i]] = true
			}
			require.Len(t, used, streams)
		}
	}
}

// An output made on a stream of the program's own is read after its
// producer, as every use is (docs/SEMANTICS.md, "Streams"): the chain on %s
// takes a while, and the read on the default stream waited for none of it
// before.
func TestOutputWaitsForItsProducersStream(t *testing.T) {
	src := `mesh 1
input %x : f32[1048576]
%s = stream
set_stream %s
%a = exp %x
%b = mul %a, 2.0
%y = tanh %b
set_stream
output %y
`
	prog, err := parser.Parse("out.hir", []byte(src))
	require.NoError(t, err)
	j := job(t, prog, evaluator.Options{})
	for run := range 5 {
		x := host.Random(ir.F32, []int64{1048576}, uint64(run))
		res, err := j.Run(map[string]*host.Array{"x": x})
		require.NoError(t, err)
		y := res.Ranks[0].Outputs["y"]
		for _, i := range []int64{0, 1, 524288, 1048575} {
			want := float64(float32(math.Tanh(float64(float32(float32(math.Exp(x.At(i))) * 2)))))
			require.Equal(t, want, y.At(i), "run %d element %d", run, i)
		}
	}
}

// TraceOverlap traces without waiting for each op: the results are the
// untraced loop's bit for bit, every op with stream work has GPU times
// (the CPU runtime times events too) that lie within the Run, the events
// are reused by later Runs, and Stats or no Trace refuse it.
func TestTraceOverlap(t *testing.T) {
	pr := streamPrograms[0]
	_, plain := streamJob(t, pr.src, 2, evaluator.Options{})
	_, traced := streamJob(t, pr.src, 2, evaluator.Options{Trace: true, TraceOverlap: true})
	pairs := 0
	for run := range 3 {
		in := map[string]*host.Array{}
		for name, shape := range pr.inputs {
			in[name] = host.Random(ir.F32, shape, uint64(10*run+len(name)))
		}
		want, err := plain.Run(in)
		require.NoError(t, err)
		got, err := traced.Run(in)
		require.NoError(t, err)
		requireSameBits(t, want, got, run)
		for _, rank := range got.Ranks {
			tr := rank.Stats.Trace
			require.NotEmpty(t, tr)
			first, last := tr[0].Start, int64(0)
			for _, ev := range tr {
				last = max(last, ev.Start+ev.Dur, ev.GPUStart+ev.GPUDur)
			}
			matmuls := 0
			for _, ev := range tr {
				if ev.Op == "matmul" {
					matmuls++
					require.Positive(t, ev.GPUDur, "run %d rank %d matmul at %s: no GPU time", run, rank.Rank, ev.Pos)
				}
				if ev.GPUDur > 0 {
					require.GreaterOrEqual(t, ev.GPUStart+ev.GPUDur, first, "%s at %s ran before the Run", ev.Op, ev.Pos)
					require.LessOrEqual(t, ev.GPUStart, last)
				}
			}
			require.Equal(t, 8, matmuls)
		}
		if run == 0 {
			pairs = evaluator.TraceEventPairs(traced)
			require.Positive(t, pairs)
		}
	}
	require.Equal(t, pairs, evaluator.TraceEventPairs(traced), "a later Run made new events instead of reusing its pairs")
	prog, err := parser.Parse("p.hir", []byte(strings.ReplaceAll(pr.src, "STREAMS", "")))
	require.NoError(t, err)
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: prog.Mesh.Size()})
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	for _, o := range []evaluator.Options{{TraceOverlap: true}, {Trace: true, Stats: true, TraceOverlap: true}} {
		_, err := evaluator.NewJob(prog, rt, o)
		require.ErrorContains(t, err, "TraceOverlap is a way of tracing without Stats")
	}
}

// An async collective's GPU time is its work on the communication
// stream, between its post and its completion, traced serialised or with
// TraceOverlap.
func TestTraceTimesAsyncCollectives(t *testing.T) {
	const src = `mesh 2
input %x : f32[4/DIDx, 8]
%g = all_gather %x algo=ring async=true : f32[4, 8] symmetric
%a = all_reduce %x async=true
%r = relu %x
wait %g
wait %a
%s = add %g, %g
output %s, %a, %r
`
	for _, overlap := range []bool{false, true} {
		prog, err := parser.Parse("async.hir", []byte(src))
		require.NoError(t, err)
		require.NoError(t, passes.Lower(prog, &passes.Context{}))
		rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2})
		require.NoError(t, err)
		j, err := evaluator.NewJob(prog, rt, evaluator.Options{Trace: true, TraceOverlap: overlap})
		require.NoError(t, err)
		for run := range 2 {
			res, err := j.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{4, 8}, uint64(run))})
			require.NoError(t, err)
			for _, rank := range res.Ranks {
				asyncs := 0
				for _, ev := range rank.Stats.Trace {
					if !ev.Async {
						continue
					}
					asyncs++
					require.Equal(t, evaluator.TraceCommStream, ev.Stream, "overlap %v: %s", overlap, ev.Op)
					require.Positive(t, ev.GPUDur, "overlap %v run %d rank %d: %s at %s has no GPU time", overlap, run, rank.Rank, ev.Op, ev.Pos)
					require.GreaterOrEqual(t, ev.GPUStart, ev.Start, "overlap %v: %s's work before its post", overlap, ev.Op)
					if !overlap { // serialised, the wait's end is after the work (with TraceOverlap only the wait's enqueue)
						require.LessOrEqual(t, ev.GPUStart+ev.GPUDur, ev.Done, "%s's work after the wait saw it done", ev.Op)
					}
				}
				require.Equal(t, 2, asyncs)
			}
		}
		require.NoError(t, j.Close())
		require.NoError(t, rt.Close())
	}
}
