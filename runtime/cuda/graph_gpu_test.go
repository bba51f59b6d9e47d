package cuda

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// Programs of one rank that graph mode must replay exactly: a loop of
// tiny fusions, matmul (cuBLAS) and pointwise work on a second stream
// joined back, zero-filled allocations written by copies, a strided view.
var graphPrograms = map[string]string{
	"tiny_loop": tinyLoop,
	"streams_matmul": `mesh 1
input %a : f32[32, 64]
input %b : f32[64, 16]
%s = stream
set_stream %s
%c = matmul %a, %b
%d = exp %a
set_stream
%e = relu %c
%f = mul %d, 0.5
output %e, %f
`,
	"alloc_copy_views": `mesh 1
input %x : bf16[8, 6]
%o = alloc : bf16[8, 6]
%r = select %x, 1
%c = copy %x, %o
%n = neg %c
output %n, %r
`,
}

// TestGraphModeOnGPU runs each program eagerly and in graph mode, 100 Runs
// with fresh inputs each: equal bit for bit (the same kernels on the same
// data). Teardown leaves no graph behind.
func TestGraphModeOnGPU(t *testing.T) {
	needGPU(t)
	for name, src := range graphPrograms {
		t.Run(name, func(t *testing.T) {
			prog, err := parser.Parse(name+".hir", []byte(src))
			require.NoError(t, err)
			require.NoError(t, passes.Lower(prog, &passes.Context{}))
			rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
			require.NoError(t, err)
			defer rt.Close()
			eager, err := evaluator.NewJob(prog, rt, evaluator.Options{})
			require.NoError(t, err)
			graph, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
			require.NoError(t, err)
			var last *evaluator.Result
			for run := range 100 {
				inputs := map[string]*host.Array{}
				for i, in := range prog.Inputs {
					tt := in.Tensor()
					inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(run*31+i+1))
				}
				want, err := eager.Run(inputs)
				require.NoError(t, err, "eager run %d", run)
				got, err := graph.Run(inputs)
				require.NoError(t, err, "graph-mode run %d", run)
				for out, w := range want.Ranks[0].Outputs {
					require.Equal(t, w.Data, got.Ranks[0].Outputs[out].Data, "run %d: output %s", run, out)
				}
				last = got
			}
			assert.Equal(t, int64(99), last.Ranks[0].Stats.GraphReplays)
			assert.Positive(t, last.Ranks[0].Stats.GraphNodes)
			assert.Equal(t, int64(1), rt.dev.Stats().Graphs)
			require.NoError(t, errors.Join(graph.Close(), eager.Close()))
			assert.Equal(t, int64(0), rt.dev.Stats().Graphs, "graphs left after the job closed")
		})
	}
}

// TestCaptureRefusalsOnGPU: what the cuda runtime cannot capture fails
// with a *runtime.CaptureError and fails the capture; the stream works
// eagerly afterwards. A program with a symmetric-memory collective is
// refused by NewJob, naming the op.
func TestCaptureRefusalsOnGPU(t *testing.T) {
	needGPU(t)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	require.NoError(t, err)
	defer rt.Close()
	d := rt.dev
	def := d.DefaultStream()
	for name, call := range map[string]func() error{
		"Alloc":              func() error { _, err := d.Alloc(64, ir.Global); return err },
		"Stream.Synchronize": def.Synchronize,
		"Barrier":            func() error { return d.Barrier(def) },
	} {
		require.NoError(t, d.BeginCapture(def), name)
		on, err := d.IsCapturing(def)
		require.NoError(t, err)
		assert.True(t, on, name)
		var ce *runtime.CaptureError
		require.ErrorAs(t, call(), &ce, name)
		_, err = d.EndCapture(def)
		require.ErrorAs(t, err, &ce, "%s: EndCapture", name)
		on, err = d.IsCapturing(def)
		require.NoError(t, err)
		assert.False(t, on, name)
		require.NoError(t, def.Synchronize(), "%s: the stream works after a failed capture", name)
	}
	assert.Equal(t, int64(0), d.Stats().Graphs)

	prog, err := parser.Parse("ar.hir", []byte("mesh 1\ninput %x : f32[8] symmetric\n%y = all_reduce %x algo=one_shot\noutput %y\n"))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	_, err = evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
	require.ErrorContains(t, err, "ar.hir:3:6: all_reduce cannot be captured in a graph on the cuda runtime")
}

// BenchmarkGraphLaunchOverhead: the tiny loop in graph mode, µs per loop
// iteration (one fusion), replays only: the figure to hold next to
// PyTorch's CUDA graph replay (scripts/launch_peer.py).
func BenchmarkGraphLaunchOverhead(b *testing.B) {
	needGPU(b)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	require.NoError(b, err)
	defer rt.Close()
	prog, err := parser.Parse("tiny.hir", []byte(tinyLoop))
	require.NoError(b, err)
	require.NoError(b, passes.Lower(prog, &passes.Context{}))
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
	require.NoError(b, err)
	defer job.Close()
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{16}, 1)}
	for range 2 { // the warm-up and the capture
		_, err := job.Run(in)
		require.NoError(b, err)
	}
	best := time.Duration(1 << 62)
	for range 10 {
		start := time.Now()
		_, err := job.Run(in)
		require.NoError(b, err)
		best = min(best, time.Since(start))
	}
	b.ReportMetric(float64(best.Nanoseconds())/1e3/tinyLoopIterations, "us/op_evaluator-tiny-fusion-graph")
}
