package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
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
	// a device loop (ir.IsDeviceLoop): a conditional node repeats the body
	// 3,000 times, the accumulator carried on the device
	"device_loop": `mesh 1
input %x : f32[16]
%acc = copy %x mem=global
for %i = 0 to 3000 {
  %y = mul %acc, 1.0001
  %z = add %y, 0.001
  %c = copy %z, %acc
}
output %acc
`,
	// a device loop with matmuls (cuBLAS must follow the stream into the
	// loop's body graph: when it stayed on the stream's handle from before
	// the body, the body's gemms landed in the outer graph, run once)
	"device_loop_matmul": `mesh 1
input %x : f32[8, 32]
input %w : f32[32, 32]
%acc = copy %x mem=global
for %i = 0 to 200 {
  %h = matmul %acc, %w
  %t = tanh %h
  %c = copy %t, %acc
}
output %acc
`,
	// a device loop in a loop: device loops do not nest, so the outer
	// unrolls, each trip holding the inner loop's node (3 trips: 100 eager
	// Runs of 300 x 600 trips took minutes)
	"device_loop_nested": `mesh 1
input %x : f32[16]
%acc = copy %x mem=global
for %i = 0 to 3 {
  for %j = 0 to 600 {
    %y = mul %acc, 1.00001
    %c = copy %y, %acc
  }
  %z = add %acc, 0.001
  %d = copy %z, %acc
}
output %acc
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
			rt := openSingleRuntime(t)
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
			t.Logf("%s: %d graph nodes", name, last.Ranks[0].Stats.GraphNodes)
			if name == "device_loop" {
				assert.Less(t, last.Ranks[0].Stats.GraphNodes, 200, "a device loop's graph holds its body once")
			}
			assert.Equal(t, int64(1), rt.dev.Stats().Graphs)
			require.NoError(t, errors.Join(graph.Close(), eager.Close()))
			assert.Equal(t, int64(0), rt.dev.Stats().Graphs, "graphs left after the job closed")
		})
	}
}

// TestCaptureRefusalsOnGPU: what the cuda runtime cannot capture fails
// with a *runtime.CaptureError and fails the capture; the stream works
// eagerly afterwards.
func TestCaptureRefusalsOnGPU(t *testing.T) {
	rt := openSingleRuntime(t)
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
}

// BenchmarkGraphLaunchOverhead: the tiny loop in graph mode, µs per loop
// iteration (one fusion), replays only: the figure to hold next to
// PyTorch's CUDA graph replay (scripts/launch_peer.py). Twice: 250 trips,
// unrolled into the graph, and 100,000 trips, a device loop (the body
// captured once, unrolled 32 times, repeated by a conditional node).
func BenchmarkGraphLaunchOverhead(b *testing.B) {
	rt := openSingleRuntime(b)
	for _, c := range []struct {
		trips  int
		device bool
		metric string
	}{
		{250, false, "us/op_evaluator-tiny-fusion-graph"},
		{100000, true, "us/op_evaluator-tiny-fusion-graph-device-loop"},
	} {
		src := strings.Replace(tinyLoop, "0 to 1000", fmt.Sprintf("0 to %d", c.trips), 1)
		prog, err := parser.Parse("tiny.hir", []byte(src))
		require.NoError(b, err)
		require.NoError(b, passes.Lower(prog, &passes.Context{}))
		require.Equal(b, c.device, len(ir.DeviceLoops(prog)) == 1, "%d trips: a device loop", c.trips)
		job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
		require.NoError(b, err)
		in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{16}, 1)}
		for range 2 { // the warm-up and the capture
			_, err := job.Run(in)
			require.NoError(b, err)
		}
		best := time.Duration(1 << 62)
		var nodes int
		for range 10 {
			start := time.Now()
			res, err := job.Run(in)
			require.NoError(b, err)
			best = min(best, time.Since(start))
			nodes = res.Ranks[0].Stats.GraphNodes
		}
		require.NoError(b, job.Close())
		fmt.Printf("tiny loop of %d trips in graph mode: %d graph nodes, best Run %v\n", c.trips, nodes, best)
		b.ReportMetric(float64(best.Nanoseconds())/1e3/float64(c.trips), c.metric)
	}
}

func init() { scenarios["graph-replays"] = graphReplaysScenario }

// TestGraphReplaysSynchroniseAcrossRanks: 2 ranks capture a one_shot
// all_reduce, an LL all_reduce, a ring all_gather and a ring shift (send on
// a forked stream, recv) into one graph each,
// then replay it 200 times with new inputs and no host barrier between
// replays, rank 1 late by a varying sleep. A replay synchronises with its
// peer only through the kernels' signal values: were they fixed at capture
// (a host-side epoch baked into the arguments), every replay after the
// first would find its signals already raised and read the peer's inputs
// of another replay, and the sums would be wrong.
func TestGraphReplaysSynchroniseAcrossRanks(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "graph-replays"))
}

func graphReplaysScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	rank, world := d.Rank(), d.WorldSize()
	const n, big = 64, 1 << 18 // elements: the LL and one_shot path, the ring
	alloc := func(elems int64) (runtime.Tensor, error) {
		b, err := d.Alloc(elems*4, ir.Symmetric)
		return runtime.Tensor{Buf: b, DType: ir.F32, Shape: []int64{elems}}, err
	}
	var ts [8]runtime.Tensor
	for i, e := range []int64{n, n, n, n, big, big * int64(world), n, n} {
		if ts[i], err = alloc(e); err != nil {
			return err
		}
		defer d.Free(ts[i].Buf)
	}
	in, oneShot, llIn, llOut, agIn, agOut, sendT, recvT := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7]
	def := d.DefaultStream()
	side, err := d.NewStream()
	if err != nil {
		return err
	}
	defer side.Close()
	fork, _ := d.NewEvent()
	join, _ := d.NewEvent()
	right, left := (rank+1)%world, (rank+world-1)%world
	calls := []*runtime.CollectiveCall{
		{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: in, Out: oneShot},
		{Op: ir.OpAllReduce, Algo: ir.AlgoAuto, In: llIn, Out: llOut},
		{Op: ir.OpAllGather, Algo: ir.AlgoRing, In: agIn, Out: agOut},
	}
	run := func() error {
		for _, c := range calls {
			if err := d.Collective(c, def); err != nil {
				return err
			}
		}
		// A ring shift: the send on a forked stream, the recv here.
		return errors.Join(def.Record(fork), side.WaitEvent(fork), d.Send(sendT, right, side),
			d.Recv(recvT, left, def), side.Record(join), def.WaitEvent(join))
	}
	fill := func(t runtime.Tensor, it int) error {
		xs := make([]float32, t.NumElements())
		for i := range xs {
			xs[i] = float32(1000*it + 10*rank + i%7)
		}
		return d.CopyFromHost(t, f32Bytes(xs), def)
	}
	// Warm up eagerly (plans, staging, agreement), then capture.
	if err := errors.Join(fill(in, 0), fill(llIn, 0), fill(agIn, 0), fill(sendT, 0), run(), def.Synchronize()); err != nil {
		return err
	}
	if err := d.BeginCapture(def); err != nil {
		return err
	}
	if err := run(); err != nil {
		d.EndCapture(def)
		return err
	}
	g, err := d.EndCapture(def)
	if err != nil {
		return err
	}
	defer g.Close()
	for it := 1; it <= 200; it++ {
		if rank == 1 {
			time.Sleep(time.Duration(it%5) * 100 * time.Microsecond)
		}
		if err := errors.Join(fill(in, it), fill(llIn, it), fill(agIn, it), fill(sendT, it), g.Launch(def)); err != nil {
			return err
		}
		got := make([]byte, n*4)
		gotLL := make([]byte, n*4)
		gotAG := make([]byte, agOut.Bytes())
		gotRecv := make([]byte, n*4)
		if err := errors.Join(d.CopyToHost(got, oneShot, def), d.CopyToHost(gotLL, llOut, def), d.CopyToHost(gotAG, agOut, def),
			d.CopyToHost(gotRecv, recvT, def), def.Synchronize()); err != nil {
			return err
		}
		for i := range n {
			if v, want := f32At(gotRecv, i), float32(1000*it+10*left+i%7); v != want {
				return fmt.Errorf("replay %d: recv from rank %d: element %d = %v, want %v", it, left, i, v, want)
			}
		}
		for i := range n {
			var want float32
			for r := range world {
				want += float32(1000*it + 10*r + i%7)
			}
			for name, b := range map[string][]byte{"one_shot": got, "auto (LL)": gotLL} {
				if v := f32At(b, i); v != want {
					return fmt.Errorf("replay %d: %s all_reduce element %d = %v, want %v", it, name, i, v, want)
				}
			}
		}
		for r := range world {
			for _, i := range []int{0, big / 2, big - 1} {
				want := float32(1000*it + 10*r + i%7)
				if v := f32At(gotAG, r*big+i); v != want {
					return fmt.Errorf("replay %d: ring all_gather: rank %d's element %d = %v, want %v", it, r, i, v, want)
				}
			}
		}
	}
	fmt.Printf("rank %d: 200 replays of %d nodes equal to the reference\n", rank, g.Nodes())
	return nil
}

func f32Bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32At(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func init() { scenarios["graph-allreduce-bench"] = graphAllReduceBenchScenario }

// BenchmarkGraphAllReduce: an 8 KiB bf16 all_reduce on 2 ranks, per call,
// eager and replayed from a graph of 100 calls, for one_shot, two_shot and
// NCCL (captured through our capture); rank 0 prints the table. Run it
// next to scripts/allreduce_peer.py (PyTorch: NCCL and symmetric memory,
// eager and in a CUDA graph) in the same device call.
func BenchmarkGraphAllReduce(b *testing.B) {
	needGPUs(b, 2)
	for _, r := range runRanks(b, 2, "graph-allreduce-bench") {
		require.Zero(b, r.code, "rank %d:\n%s", r.rank, r.output)
		if r.rank == 0 {
			fmt.Print(r.output)
		}
	}
}

func graphAllReduceBenchScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	const elems, calls, replays = 4096, 100, 20
	bufs := make([]runtime.Tensor, 2)
	for i := range bufs {
		buf, err := d.Alloc(elems*2, ir.Symmetric)
		if err != nil {
			return err
		}
		defer d.Free(buf)
		bufs[i] = runtime.Tensor{Buf: buf, DType: ir.BF16, Shape: []int64{elems}}
	}
	def := d.DefaultStream()
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoTwoShot, ir.AlgoNCCL} {
		c := &runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: algo, In: bufs[0], Out: bufs[1]}
		loop := func() error {
			for range calls {
				if err := d.Collective(c, def); err != nil {
					return err
				}
			}
			return nil
		}
		if err := errors.Join(loop(), def.Synchronize(), d.Barrier(def)); err != nil { // warm-up
			return err
		}
		t0 := time.Now()
		for range replays {
			if err := loop(); err != nil {
				return err
			}
		}
		if err := def.Synchronize(); err != nil {
			return err
		}
		eager := time.Since(t0)
		if err := d.BeginCapture(def); err != nil {
			return err
		}
		if err := loop(); err != nil {
			d.EndCapture(def)
			return err
		}
		g, err := d.EndCapture(def)
		if err != nil {
			return err
		}
		if err := errors.Join(g.Launch(def), def.Synchronize(), d.Barrier(def)); err != nil {
			g.Close()
			return err
		}
		t0 = time.Now()
		for range replays {
			if err := g.Launch(def); err != nil {
				g.Close()
				return err
			}
		}
		err = def.Synchronize()
		graphed := time.Since(t0)
		if err := errors.Join(err, g.Close(), d.Barrier(def)); err != nil {
			return err
		}
		per := func(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 / (calls * replays) }
		fmt.Printf("graph-allreduce-8KiB %s eager %.2f us graph %.2f us\n", algo, per(eager), per(graphed))
	}
	return nil
}

func init() { scenarios["tp-block-bench"] = tpBlockBenchScenario }

// tpBlock is a tensor-parallel MLP block (sequence parallel) at small
// batch, run 20 times per Run so that the Run's input uploads are a small
// part: all_gather of the sequence shards, matmul by this rank's column
// block of W1, gelu, matmul by its row block of W2, reduce_scatter of the
// partial sums, residual. scripts/tp_block_peer.py is the same in PyTorch.
// The collectives run algo=one_shot; tpBlockLL is the same with algo=ll.
const tpBlock = `mesh 2
input %x : bf16[64/DIDx, 1024] symmetric
input %w1 : bf16[1024, 2048]
input %w2 : bf16[2048, 1024]
for %i = 0 to 20 {
  %g = all_gather %x algo=one_shot : bf16[64, 1024] symmetric
  %h = matmul %g, %w1
  %a = gelu %h
  %p = matmul %a, %w2
  %r = reduce_scatter %p algo=one_shot axis=0
  %y = add %r, %x
}
%o = neg %x
output %o
`

var tpBlockLL = strings.ReplaceAll(tpBlock, "algo=one_shot", "algo=ll")

// tpBlockLLGlobal is tpBlockLL with nothing on the symmetric heap (ll
// touches neither tensor remotely), as the PyTorch peer's plain tensors:
// a Run then has no symmetric input for the ranks to meet around.
var tpBlockLLGlobal = strings.ReplaceAll(tpBlockLL, " symmetric", "")

// BenchmarkTPBlock: the block's time per iteration on 2 ranks, eager and
// in graph mode, with one_shot's and ll's collectives (rank 0 prints them).
func BenchmarkTPBlock(b *testing.B) {
	needGPUs(b, 2)
	for _, r := range runRanks(b, 2, "tp-block-bench") {
		require.Zero(b, r.code, "rank %d:\n%s", r.rank, r.output)
		if r.rank == 0 {
			fmt.Print(r.output)
		}
	}
}

// tpBlockCompute is tpBlock's compute alone on one GPU (x the gathered
// rows, no collectives): scripts/tp_block_peer.py run with plain python3
// is its peer.
const tpBlockCompute = `mesh 1
input %x : bf16[64, 1024]
input %w1 : bf16[1024, 2048]
input %w2 : bf16[2048, 1024]
for %i = 0 to 20 {
  %h = matmul %x, %w1
  %a = gelu %h
  %p = matmul %a, %w2
  %y = add %p, %x
}
%o = neg %x
output %o
`

// BenchmarkTPBlockCompute: tpBlockCompute's time per iteration on one GPU,
// eager and in graph mode.
func BenchmarkTPBlockCompute(b *testing.B) {
	rt := openSingleRuntime(b)
	require.NoError(b, tpBlockRuns(rt, rt.dev, "tp_block_compute.hir", tpBlockCompute, "tp-block-compute"))
	// its first matmul alone: cuBLAS's share
	mm := strings.Replace(tpBlockCompute, "  %a = gelu %h\n  %p = matmul %a, %w2\n  %y = add %p, %x\n", "", 1)
	require.NoError(b, tpBlockRuns(rt, rt.dev, "tp_block_mm.hir", mm, "tp-block-matmul"))
	// the pointwise ops alone, on tensors of the block's shapes
	for label, body := range map[string]string{
		"tp-block-gelu": "input %h : bf16[64, 2048]\nfor %i = 0 to 20 {\n  %a = gelu %h\n}\n",
		"tp-block-add":  "input %p : bf16[64, 1024]\ninput %q : bf16[64, 1024]\nfor %i = 0 to 20 {\n  %y = add %p, %q\n}\n",
	} {
		src := "mesh 1\ninput %x : bf16[64, 1024]\n" + body + "%o = neg %x\noutput %o\n"
		require.NoError(b, tpBlockRuns(rt, rt.dev, label+".hir", src, label))
	}
}

// graphShape says whether src with its loop run trips times is one flat
// graph or a device loop in graph mode.
func graphShape(name, src string, trips int) string {
	prog, err := parser.Parse(name, []byte(strings.Replace(src, "0 to 20", fmt.Sprintf("0 to %d", trips), 1)))
	if err == nil {
		err = passes.Lower(prog, &passes.Context{})
	}
	if err != nil {
		return "(" + err.Error() + ")"
	}
	for _, op := range prog.Body.Ops {
		if ir.DeviceLoopUnroll(op) > 0 {
			return "a device loop"
		}
	}
	return "a flat graph"
}

func tpBlockBenchScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := tpBlockRuns(rt, d, "tp_block.hir", tpBlock, "tp-block"); err != nil {
		return err
	}
	if err := tpBlockRuns(rt, d, "tp_block_ll.hir", tpBlockLL, "tp-block-ll"); err != nil {
		return err
	}
	return tpBlockRuns(rt, d, "tp_block_ll_global.hir", tpBlockLLGlobal, "tp-block-ll-global")
}

// tpBlockRuns prints src's time per loop iteration, eager and in graph
// mode: the best Run of 10 with the loop's 20 iterations (inputs kept on
// the device), and in graph mode also the marginal cost of an iteration,
// (t220 - t20) / 200 with the loop made 220 long, which leaves out the
// Run's fixed cost (its launch, the output's read).
func tpBlockRuns(rt runtime.Runtime, d *Device, name, src, label string) error {
	bestRun := func(src string, graph bool) (time.Duration, error) {
		prog, err := parser.Parse(name, []byte(src))
		if err != nil {
			return 0, err
		}
		if err := passes.Lower(prog, &passes.Context{}); err != nil {
			return 0, err
		}
		inputs := map[string]*host.Array{}
		for i, in := range prog.Inputs {
			tt := in.Tensor()
			inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(i+1))
		}
		job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: graph, KeepInputs: true})
		if err != nil {
			return 0, err
		}
		best := time.Duration(1 << 62)
		for run := range 12 {
			if err := alignRanks(d); err != nil {
				return 0, errors.Join(err, job.Close())
			}
			in := inputs
			if run > 0 {
				in = nil
			}
			t0 := time.Now()
			if _, err := job.Run(in); err != nil {
				return 0, errors.Join(err, job.Close())
			}
			if run >= 2 { // the warm-up and the capture
				best = min(best, time.Since(t0))
			}
		}
		return best, job.Close()
	}
	us := func(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 }
	for _, graph := range []bool{false, true} {
		t20, err := bestRun(src, graph)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s graph=%v %.2f us per iteration (best Run of 10, 20 iterations each, inputs kept on the device)", label, graph, us(t20)/20)
		if graph {
			// At the margin, apart for the two shapes a graph takes: up
			// to ir.DeviceLoopMinOps ops (the lowered body's frees count)
			// the trips are one flat graph, past it a device loop (the
			// body unrolled); each pair below is of one shape.
			t40, err := bestRun(strings.Replace(src, "0 to 20", "0 to 40", 1), graph)
			if err != nil {
				return err
			}
			t100, err := bestRun(strings.Replace(src, "0 to 20", "0 to 100", 1), graph)
			if err != nil {
				return err
			}
			t220, err := bestRun(strings.Replace(src, "0 to 20", "0 to 220", 1), graph)
			if err != nil {
				return err
			}
			line += fmt.Sprintf("; marginal %.2f us per iteration in %s (40 - 20 trips), %.2f in %s (220 - 100 trips)",
				(us(t40)-us(t20))/20, graphShape(name, src, 40), (us(t220)-us(t100))/120, graphShape(name, src, 220))
		}
		fmt.Println(line)
	}
	return nil
}

// TestTPBlockGraphShapes: BenchmarkTPBlock's marginal pairs each compare
// one shape of graph: 20 and 40 trips flat, 100 and 220 a device loop.
func TestTPBlockGraphShapes(t *testing.T) {
	for trips, want := range map[int]string{20: "a flat graph", 40: "a flat graph", 100: "a device loop", 220: "a device loop"} {
		require.Equal(t, want, graphShape("tp_block.hir", tpBlockLL, trips), "%d trips", trips)
	}
}

// TestTPBlockLLGlobalChecks: the ll block with nothing symmetric is a
// program the checker accepts, with no symmetric input or value left.
func TestTPBlockLLGlobalChecks(t *testing.T) {
	prog, err := parser.Parse("tp_block_ll_global.hir", []byte(tpBlockLLGlobal))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	require.NotContains(t, prog.String(), "symmetric")
}
