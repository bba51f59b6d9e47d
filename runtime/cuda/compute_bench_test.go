package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/codegen/codegentest"
	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/sim"
)

// chainCase is the benchmark's fused chain over n elements of dt:
// y = relu(x·1.5 + 0.25)·0.5, four pointwise ops, one read and one write.
func chainCase(t testing.TB, dt ir.DType, n int64) gpuCase {
	t.Helper()
	c, err := chainOp(dt, n)
	require.NoError(t, err)
	return c
}

func chainOp(dt ir.DType, n int64) (gpuCase, error) {
	return makeCase(fmt.Sprintf("chain4/%s[%d]", dt, n), func(b *ir.Builder) *ir.Op {
		x := codegentest.In(b, "x", dt, n)
		return codegentest.Fusion(b, codegentest.Vals(x), func() []*ir.Value {
			m := b.Binary(ir.OpMul, x, ir.Float(1.5))
			a := b.Binary(ir.OpAdd, m, ir.Float(0.25))
			return codegentest.Vals(b.Binary(ir.OpMul, b.Unary(ir.OpRelu, a), ir.Float(0.5)))
		})
	})
}

func init() {
	// The child of TestKernelCacheAcrossProcesses: compile two kernels
	// and say where their images came from.
	scenarios["kernelcache"] = func() error {
		rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
		if err != nil {
			return err
		}
		defer rt.Close()
		d := rt.dev
		start := time.Now()
		for _, dn := range []struct {
			dt ir.DType
			n  int64
		}{{ir.F32, 1000}, {ir.BF16, 77}} {
			c, err := chainOp(dn.dt, dn.n)
			if err != nil {
				return err
			}
			spec := &runtime.KernelSpec{Op: c.op, Inputs: runtimeShapes(c.ins), Outputs: runtimeShapes(c.outs)}
			if _, err := d.Compile(spec); err != nil {
				return err
			}
		}
		s := gpu.KernelCache()
		fmt.Printf("KCACHE compiles=%d disk_hits=%d disk_writes=%d disk_errors=%d seconds=%.4f\n",
			s.Compiles, s.DiskHits, s.DiskWrites, s.DiskErrors, time.Since(start).Seconds())
		return nil
	}
}

// A second process finds the first one's images on disk and compiles
// nothing.
func TestKernelCacheAcrossProcesses(t *testing.T) {
	needGPU(t)
	dir := t.TempDir()
	re := regexp.MustCompile(`KCACHE compiles=(\d+) disk_hits=(\d+) disk_writes=(\d+) disk_errors=(\d+) seconds=([0-9.]+)`)
	run := func() []string {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envScenario+"=kernelcache", gpu.EnvKernelCache+"="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child\n%s", out)
		m := re.FindStringSubmatch(string(out))
		require.NotNil(t, m, "child said:\n%s", out)
		return m
	}
	first, second := run(), run()
	t.Logf("first process: %d compiles, %d disk writes, %ss; second: %d compiles, %d disk hits, %ss",
		atoi(first[1]), atoi(first[3]), first[5], atoi(second[1]), atoi(second[2]), second[5])
	assert.Equal(t, 2, atoi(first[1]), "first process: compiles: %s", first[0])
	assert.Equal(t, 2, atoi(first[3]), "first process: disk writes: %s", first[0])
	assert.Equal(t, 0, atoi(second[1]), "second process: compiles: %s (want no compile, 2 disk hits)", second[0])
	assert.Equal(t, 2, atoi(second[2]), "second process: disk hits: %s (want no compile, 2 disk hits)", second[0])
	assert.Equal(t, 0, atoi(second[4]), "second process: disk errors: %s (want no compile, 2 disk hits)", second[0])
	fmt.Printf("METRIC kernel-cache-first-process %s s\nMETRIC kernel-cache-second-process %s s\n", first[5], second[5])
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// benchDevice opens GPU 0 as a one-rank runtime for a benchmark (closed
// when it ends), or skips it where there is no GPU.
func benchDevice(b *testing.B) *Device {
	needGPU(b)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return rt.dev
}

// BenchmarkFusedChain runs the fused 4-op chain over 1 GiB of f32 and of
// bf16 and a device-to-device copy of the same size, both timed with CUDA
// events (10 runs after 2 warm-ups); bandwidth counts bytes read plus
// written (2 GiB per run for both).
func BenchmarkFusedChain(b *testing.B) {
	d := benchDevice(b)
	const bytes = 1 << 30
	for _, dt := range []ir.DType{ir.F32, ir.BF16} {
		n := int64(bytes / dt.Size())
		c := chainCase(b, dt, n)
		k, err := d.Compile(&runtime.KernelSpec{Op: c.op, Inputs: runtimeShapes(c.ins), Outputs: runtimeShapes(c.outs)})
		if err != nil {
			b.Fatal(err)
		}
		var bufs [3]runtime.Buffer
		for i := range bufs {
			if bufs[i], err = d.Alloc(bytes, ir.Global); err != nil {
				b.Fatal(err)
			}
		}
		x := runtime.Tensor{Buf: bufs[0], DType: dt, Shape: []int64{n}}
		y := runtime.Tensor{Buf: bufs[1], DType: dt, Shape: []int64{n}}
		z := runtime.Tensor{Buf: bufs[2], DType: dt, Shape: []int64{n}}
		fused := timeEvents(b, d, func() error { return d.Launch(k, []runtime.Tensor{x, y}, nil) })
		copied := timeEvents(b, d, func() error { return d.Copy(z, x, nil) })
		fusedGBs, copyGBs := 2*bytes/fused/1e9, 2*bytes/copied/1e9
		b.ReportMetric(fusedGBs, "GB/s_fused-chain-"+dt.String())
		b.ReportMetric(copyGBs, "GB/s_d2d-copy-"+dt.String())
		b.ReportMetric(100*fusedGBs/copyGBs, "%_fused-vs-copy-"+dt.String())
		// The code generator's tunings (HIR_CODEGEN_UNROLL, _CAPPED and
		// _BLOCKS_PER_SM) against the same copy: vectors in flight per
		// thread, and (blocks > 0) the capped grid of that many blocks
		// per SM looping over the work, as flat kernels ran until the
		// eighth session (93 % of the copy where the default reached 101).
		saved := d.Tune
		for _, t := range [][2]int{{2, 0}, {4, 0}, {1, 16}, {1, 8}, {2, 16}, {4, 16}} {
			d.Tune.CodegenUnroll, d.Tune.CodegenBlocksPerSM, d.Tune.CodegenCapped = t[0], t[1], t[1] > 0
			kt, err := d.Compile(&runtime.KernelSpec{Op: c.op, Inputs: runtimeShapes(c.ins), Outputs: runtimeShapes(c.outs)})
			if err != nil {
				d.Tune = saved
				b.Fatal(err)
			}
			tuned := timeEvents(b, d, func() error { return d.Launch(kt, []runtime.Tensor{x, y}, nil) })
			name := fmt.Sprintf("%%_fused-vs-copy-%s-unroll%d", dt, t[0])
			if t[1] > 0 {
				name = fmt.Sprintf("%%_fused-vs-copy-%s-unroll%d-capped%d", dt, t[0], t[1])
			}
			b.ReportMetric(100*(2*bytes/tuned/1e9)/copyGBs, name)
		}
		d.Tune = saved
		for _, buf := range bufs {
			d.Free(buf)
		}
	}
}

// BenchmarkFusedShapes times the other elementwise strategies over 1 GiB
// of f32 and of bf16, each on its default grid and on the capped one
// (HIR_CODEGEN_CAPPED), against a device copy of the same size in the
// same run: a broadcast add (x [N/1024, 1024] + b [1024], strategy
// broadcast) and a sum over the outer axis of [4, N/4] (strategy
// columns: the shape of tp.PeersFirst's sum of slots). GB/s count bytes
// read plus written.
func BenchmarkFusedShapes(b *testing.B) {
	d := benchDevice(b)
	const bytes = 1 << 30
	bufs := make([]runtime.Buffer, 3)
	for i := range bufs {
		var err error
		if bufs[i], err = d.Alloc(bytes, ir.Global); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, buf := range bufs {
			d.Free(buf)
		}
	}()
	for _, dt := range []ir.DType{ir.F32, ir.BF16} {
		n := int64(bytes / dt.Size())
		whole := runtime.Tensor{Buf: bufs[0], DType: dt, Shape: []int64{n}}
		copied := timeEvents(b, d, func() error {
			return d.Copy(runtime.Tensor{Buf: bufs[2], DType: dt, Shape: []int64{n}}, whole, nil)
		})
		copyGBs := 2 * bytes / copied / 1e9
		b.ReportMetric(copyGBs, "GB/s_d2d-copy-"+dt.String())
		cases := []struct {
			name  string
			moved float64 // bytes read plus written
			build func(b *ir.Builder) *ir.Op
			ins   [][]int64
			outs  [][]int64
		}{
			{"broadcast-add", 2 * bytes, func(b *ir.Builder) *ir.Op {
				x, bias := codegentest.In(b, "x", dt, n/1024, 1024), codegentest.In(b, "b", dt, 1024)
				return codegentest.Fusion(b, codegentest.Vals(x, bias), func() []*ir.Value {
					return codegentest.Vals(b.Binary(ir.OpAdd, x, bias))
				})
			}, [][]int64{{n / 1024, 1024}, {1024}}, [][]int64{{n / 1024, 1024}}},
			{"sum-outer-4", bytes + bytes/4, func(b *ir.Builder) *ir.Op {
				x := codegentest.In(b, "x", dt, 4, n/4)
				return codegentest.Reduce(b, ir.OpSum, x, false, 0).Def
			}, [][]int64{{4, n / 4}}, [][]int64{{n / 4}}},
			// rows of 1024 (a warp each) and of 8192 (a block each)
			{"sum-rows-1024", bytes, func(b *ir.Builder) *ir.Op {
				x := codegentest.In(b, "x", dt, n/1024, 1024)
				return codegentest.Reduce(b, ir.OpSum, x, false, 1).Def
			}, [][]int64{{n / 1024, 1024}}, [][]int64{{n / 1024}}},
			{"sum-rows-8192", bytes, func(b *ir.Builder) *ir.Op {
				x := codegentest.In(b, "x", dt, n/8192, 8192)
				return codegentest.Reduce(b, ir.OpSum, x, false, 1).Def
			}, [][]int64{{n / 8192, 8192}}, [][]int64{{n / 8192}}},
		}
		for _, c := range cases {
			gc, err := makeCase(c.name, c.build)
			if err != nil {
				b.Fatal(err)
			}
			ins := []runtime.Tensor{{Buf: bufs[0], DType: dt, Shape: c.ins[0]}}
			if len(c.ins) > 1 {
				ins = append(ins, runtime.Tensor{Buf: bufs[2], DType: dt, Shape: c.ins[1]})
			}
			outs := []runtime.Tensor{{Buf: bufs[1], DType: dt, Shape: c.outs[0]}}
			saved := d.Tune
			// default, the capped grid, and no vectors in reductions
			for _, variant := range []string{"", "-capped", "-scalar"} {
				d.Tune = saved
				d.Tune.CodegenCapped = variant == "-capped"
				d.Tune.CodegenScalarRows, d.Tune.CodegenScalarColumns = variant == "-scalar", variant == "-scalar"
				if variant == "-scalar" && !strings.HasPrefix(c.name, "sum-") {
					continue
				}
				k, err := d.Compile(&runtime.KernelSpec{Op: gc.op, Inputs: runtimeShapes(gc.ins), Outputs: runtimeShapes(gc.outs)})
				if err != nil {
					d.Tune = saved
					b.Fatal(err)
				}
				secs := timeEvents(b, d, func() error { return d.Launch(k, append(append([]runtime.Tensor{}, ins...), outs...), nil) })
				name := c.name + "-" + dt.String() + variant
				gbs := c.moved / secs / 1e9
				b.ReportMetric(gbs, "GB/s_"+name)
				b.ReportMetric(100*gbs/copyGBs, "%_vs-copy-"+name)
			}
			d.Tune = saved
		}
	}
}

// timeEvents returns the seconds one call of f takes on the default
// stream: 2 warm-ups, then 10 calls between two events.
func timeEvents(b *testing.B, d *Device, f func() error) float64 {
	b.Helper()
	s := d.DefaultStream()
	for range 2 {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer e0.Close()
	defer e1.Close()
	const reps = 10
	s.Record(e0)
	for range reps {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	s.Record(e1)
	if err := e1.Synchronize(); err != nil {
		b.Fatal(err)
	}
	ms, err := gpu.ElapsedMillis(e0, e1)
	if err != nil {
		b.Fatal(err)
	}
	return float64(ms) / 1e3 / reps
}

// tinyLoop is a program whose loop runs one tiny fusion per iteration.
const tinyLoop = `mesh 1

input %x : f32[16]

for %i = 0 to 1000 {
  %a = mul %x, 2.0
  %b = add %a, 1.0
}
%y = neg %x
output %y
`

const tinyLoopIterations = 1000

// evaluatorPerOp runs tinyLoop on rt and returns the microseconds per
// loop iteration (one fusion launch, its allocation from the pool and its
// free): the best of 5 runs after 2 warm-ups.
func evaluatorPerOp(tb testing.TB, rt runtime.Runtime) float64 {
	prog, err := parser.Parse("tiny.hir", []byte(tinyLoop))
	require.NoError(tb, err)
	require.NoError(tb, passes.Lower(prog, &passes.Context{}))
	fusions := 0
	prog.Walk(func(op *ir.Op) {
		if op.Code == ir.OpFusion {
			fusions++
		}
	})
	require.Equal(tb, 1, fusions, "fusions in the loop")
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(tb, err)
	defer job.Close()
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{16}, 1)}
	best := time.Duration(1 << 62)
	for i := range 7 {
		start := time.Now()
		_, err := job.Run(in)
		require.NoError(tb, err)
		if el := time.Since(start); i >= 2 && el < best {
			best = el
		}
	}
	return float64(best.Microseconds()) / tinyLoopIterations
}

// BenchmarkLaunchOverhead: the cost of one tiny fusion as the evaluator
// sees it on a cuda runtime of one rank (µs per op, host side, the loop's
// launches overlapping the GPU), the same on the CPU runtime, and a bare
// Device.Launch of the same kernel in a loop.
func BenchmarkLaunchOverhead(b *testing.B) {
	needGPU(b)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	b.ReportMetric(evaluatorPerOp(b, rt), "us/op_evaluator-tiny-fusion-cuda")
	srt, err := sim.New(runtime.Config{WorldSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer srt.Close()
	b.ReportMetric(evaluatorPerOp(b, srt), "us/op_evaluator-tiny-fusion-sim")

	d := rt.dev
	c := chainCase(b, ir.F32, 16)
	k, err := d.Compile(&runtime.KernelSpec{Op: c.op, Inputs: runtimeShapes(c.ins), Outputs: runtimeShapes(c.outs)})
	if err != nil {
		b.Fatal(err)
	}
	x, _ := d.Alloc(64, ir.Global)
	y, _ := d.Alloc(64, ir.Global)
	defer d.Free(x)
	defer d.Free(y)
	args := []runtime.Tensor{{Buf: x, DType: ir.F32, Shape: []int64{16}}, {Buf: y, DType: ir.F32, Shape: []int64{16}}}
	const reps = 10000
	start := time.Now()
	for range reps {
		if err := d.Launch(k, args, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.DefaultStream().Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/reps, "us/launch_runtime-tiny-fusion")
	// The host's own cost: bursts short enough that the launch queue never
	// fills (so cuLaunchKernel does not wait for the GPU), synchronised
	// between bursts, the best burst per launch.
	const burst = 100
	best := time.Duration(1 << 62)
	for range 50 {
		t0 := time.Now()
		for range burst {
			if err := d.Launch(k, args, nil); err != nil {
				b.Fatal(err)
			}
		}
		best = min(best, time.Since(t0))
		if err := d.DefaultStream().Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(best.Nanoseconds())/1e3/burst, "us/launch_host-enqueue")
	// The floor: cuLaunchKernel alone through the same binding, its
	// parameter block filled once, the context current on a locked thread,
	// timed as above. launch_host-enqueue minus this is hir's own share.
	ck := k.(*computeKernel)
	kp := ck.params
	kp.fill([]launchArg{{addr: mustPtr(b, d, args[0])}, {addr: mustPtr(b, d, args[1])}})
	best = time.Duration(1 << 62)
	goruntime.LockOSThread()
	if err := d.Drv.SetCurrent(d.Ctx); err != nil {
		b.Fatal(err)
	}
	for range 50 {
		t0 := time.Now()
		for range burst {
			if err := d.Drv.LaunchKernel.Call11(ck.fn.H, uintptr(kp.grid[0]), 1, 1, uintptr(kp.block[0]), 1, 1,
				0, d.Def.H, uintptr(unsafe.Pointer(&kp.ptrs[0])), 0); err != nil {
				b.Fatal(err)
			}
		}
		best = min(best, time.Since(t0))
		if err := d.Drv.StreamSynchronize.Call1(d.Def.H); err != nil {
			b.Fatal(err)
		}
	}
	// The same, sustained: reps launches in a row, timed as
	// launch_runtime-tiny-fusion is (the driver's periodic submissions
	// and a full launch queue included): the floor for that figure and
	// for the evaluator's.
	start = time.Now()
	for range reps {
		if err := d.Drv.LaunchKernel.Call11(ck.fn.H, uintptr(kp.grid[0]), 1, 1, uintptr(kp.block[0]), 1, 1,
			0, d.Def.H, uintptr(unsafe.Pointer(&kp.ptrs[0])), 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Drv.StreamSynchronize.Call1(d.Def.H); err != nil {
		b.Fatal(err)
	}
	sustained := time.Since(start)
	goruntime.UnlockOSThread()
	b.ReportMetric(float64(best.Nanoseconds())/1e3/burst, "us/launch_driver-only")
	b.ReportMetric(float64(sustained.Microseconds())/reps, "us/launch_driver-only-sustained")
	gpu := timeEvents(b, d, func() error { return d.Launch(k, args, nil) })
	b.ReportMetric(gpu*1e6, "us/launch_gpu-tiny-fusion")
}

// The tiny program runs on the CPU runtime here, so the benchmark's
// program is known to lower to one fusion per iteration.
func TestTinyLoopOnCPU(t *testing.T) {
	rt, err := sim.New(runtime.Config{WorldSize: 1})
	require.NoError(t, err)
	defer rt.Close()
	us := evaluatorPerOp(t, rt)
	t.Logf("CPU runtime: %.2f µs per tiny fusion", us)
}

func mustPtr(tb testing.TB, d *Device, t runtime.Tensor) uint64 {
	ptr, err := d.SpanOf(t, func() string { return "benchmark argument" })
	if err != nil {
		tb.Fatal(err)
	}
	return ptr
}

// BenchmarkMatmulEnqueue: what a cuBLAS matmul costs the host to enqueue
// (Device.Launch in bursts short enough that the queue never fills, the
// best burst per launch) and the GPU to run (events around 10 in a row),
// bf16, at the TP block's first matmul and the overlap benchmark's
// communication-bound one. scripts/matmul_peer.py times torch.mm's the
// same way in the same call.
func BenchmarkMatmulEnqueue(b *testing.B) {
	needGPU(b)
	d := openSingleRuntime(b).dev
	for _, c := range []struct {
		name    string
		m, k, n int64
	}{{"64x1024x2048", 64, 1024, 2048}, {"4096x8192x512", 4096, 8192, 512}} {
		bld := ir.NewBuilder(ir.LinearMesh(1))
		x := codegentest.In(bld, "x", ir.BF16, c.m, c.k)
		w := codegentest.In(bld, "w", ir.BF16, c.k, c.n)
		op := bld.Op(ir.OpMatmul, x, w).Op()
		sh := func(s ...int64) runtime.TensorShape { return runtime.TensorShape{DType: ir.BF16, Shape: s} }
		k, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{sh(c.m, c.k), sh(c.k, c.n)}, Outputs: []runtime.TensorShape{sh(c.m, c.n)}})
		if err != nil {
			b.Fatal(err)
		}
		var args []runtime.Tensor
		for _, s := range [][]int64{{c.m, c.k}, {c.k, c.n}, {c.m, c.n}} {
			buf, err := d.Alloc(2*s[0]*s[1], ir.Global)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Free(buf)
			args = append(args, runtime.Tensor{Buf: buf, DType: ir.BF16, Shape: s})
		}
		launch := func() error { return d.Launch(k, args, nil) }
		const burst = 20
		best := time.Duration(1 << 62)
		for range 30 {
			t0 := time.Now()
			for range burst {
				if err := launch(); err != nil {
					b.Fatal(err)
				}
			}
			best = min(best, time.Since(t0))
			if err := d.DefaultStream().Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
		impl, _, _ := KernelImpl(k)
		b.ReportMetric(float64(best.Nanoseconds())/1e3/burst, "us/enqueue_"+impl+"-"+c.name)
		b.ReportMetric(timeEvents(b, d, launch)*1e6, "us/gpu_"+impl+"-"+c.name)
	}
}

// BenchmarkMatmulWaves: GPU time (events around 10 in a row) of bf16
// matmuls at the overlap benchmark's pieces, whole and with K split in
// two halves run at once on two streams (each half's product into its
// own output: the sum of the two is not timed). A product with fewer
// output tiles than the GPU has SMs takes a whole wave of tiles however
// few there are; two half-K products side by side fill twice the SMs, each
// tile half as long. HIR_MATMUL_SHAPES="MxKxN,..." overrides the shapes.
func BenchmarkMatmulWaves(b *testing.B) {
	needGPU(b)
	d := openSingleRuntime(b).dev
	shapes := [][3]int64{{4096, 8192, 1024}, {2048, 8192, 1024}, {1024, 8192, 1024}, {2048, 8192, 2048}, {1024, 2048, 1024}, {4096, 2048, 1024}, {2048, 2048, 4096}}
	if env := os.Getenv("HIR_MATMUL_SHAPES"); env != "" {
		shapes = nil
		for _, f := range strings.Split(env, ",") {
			var s [3]int64
			if _, err := fmt.Sscanf(f, "%dx%dx%d", &s[0], &s[1], &s[2]); err != nil {
				b.Fatalf("HIR_MATMUL_SHAPES: %q: %v", f, err)
			}
			shapes = append(shapes, s)
		}
	}
	sh := func(s ...int64) runtime.TensorShape { return runtime.TensorShape{DType: ir.BF16, Shape: s} }
	compile := func(m, k, n int64) (runtime.Kernel, []runtime.Tensor) {
		bld := ir.NewBuilder(ir.LinearMesh(1))
		op := bld.Op(ir.OpMatmul, codegentest.In(bld, "x", ir.BF16, m, k), codegentest.In(bld, "w", ir.BF16, k, n)).Op()
		kern, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{sh(m, k), sh(k, n)}, Outputs: []runtime.TensorShape{sh(m, n)}})
		if err != nil {
			b.Fatal(err)
		}
		var args []runtime.Tensor
		for _, s := range [][]int64{{m, k}, {k, n}, {m, n}} {
			buf, err := d.Alloc(2*s[0]*s[1], ir.Global)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Free(buf) })
			args = append(args, runtime.Tensor{Buf: buf, DType: ir.BF16, Shape: s})
		}
		return kern, args
	}
	def := d.DefaultStream()
	side, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer side.Close()
	fork, _ := d.NewEvent()
	join, _ := d.NewEvent()
	defer fork.Close()
	defer join.Close()
	for _, s := range shapes {
		m, k, n := s[0], s[1], s[2]
		whole, wargs := compile(m, k, n)
		half, h1 := compile(m, k/2, n)
		_, h2 := compile(m, k/2, n)
		name := fmt.Sprintf("%dx%dx%d", m, k, n)
		b.ReportMetric(timeEvents(b, d, func() error { return d.Launch(whole, wargs, nil) })*1e6, "us/whole-"+name)
		b.ReportMetric(timeEvents(b, d, func() error { return d.Launch(half, h1, nil) })*1e6, "us/halfK-"+name)
		b.ReportMetric(timeEvents(b, d, func() error {
			return errors.Join(def.Record(fork), side.WaitEvent(fork), d.Launch(half, h1, def), d.Launch(half, h2, side), side.Record(join), def.WaitEvent(join))
		})*1e6, "us/halvesK2streams-"+name)
	}
}
