package cuda

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// BenchmarkRunCost: where a Run's time goes, on one GPU (issue 20: a
// Run of one matmul cost more than the matmul). For the overlap
// benchmark's communication-bound matmul on 2 ranks (bf16 4096x4096 by
// 4096x1024, the output read back as one column, as BenchmarkOverlap
// does) and for a tiny program, it prints "runcost WHAT min MIN median
// MED" in µs: a Run eager and in graph mode, the eager Run's split
// (Options.Stats: inputs, ops, outputs, drain), and the pieces alone:
// the matmul's GPU time (events), launch + synchronise with no
// evaluator, the column's read to the host, a synchronise of an idle
// stream. scripts/matmul_peer.py prints torch.mm + synchronize at the
// same shape in the same call.
func BenchmarkRunCost(b *testing.B) {
	rt := openSingleRuntime(b)
	d := rt.dev
	const runs = 50
	stat := func(ds []time.Duration) (float64, float64) {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[0].Nanoseconds()) / 1e3, float64(s[len(s)/2].Nanoseconds()) / 1e3
	}
	print := func(what string, ds []time.Duration) {
		lo, med := stat(ds)
		fmt.Printf("runcost %s min %.2f median %.2f\n", what, lo, med)
	}
	type prog struct {
		name  string
		build func(bl *ir.Builder)
	}
	progs := []prog{
		{"matmul-4096x4096x1024", func(bl *ir.Builder) {
			a := bl.Input("a", ir.Tensor(ir.BF16, 4096, 4096))
			w := bl.Input("w", ir.Tensor(ir.BF16, 4096, 1024))
			y := bl.Op(ir.OpMatmul, a, w).Value()
			bl.Output(bl.Op(ir.OpSelect, y, ir.Int(0)).Int("axis", 1).Value())
		}},
		{"tiny-relu-16", func(bl *ir.Builder) {
			x := bl.Input("x", ir.Tensor(ir.F32, 16))
			bl.Output(bl.Unary(ir.OpRelu, x))
		}},
	}
	for _, p := range progs {
		bl := ir.NewBuilder(ir.LinearMesh(1))
		p.build(bl)
		pr, err := bl.Program()
		if err != nil {
			b.Fatal(err)
		}
		if err := passes.Lower(pr, &passes.Context{}); err != nil {
			b.Fatal(err)
		}
		inputs := map[string]*host.Array{}
		for i, in := range pr.Inputs {
			inputs[in.Name] = host.Random(in.Tensor().DType, in.Tensor().Shape(), uint64(i+1))
		}
		for _, mode := range []struct {
			name         string
			graph, stats bool
		}{{"eager", false, false}, {"graph", true, false}, {"eager-stats", false, true}} {
			job, err := evaluator.NewJob(pr, rt, evaluator.Options{KeepInputs: true, Graph: mode.graph, Stats: mode.stats})
			if err != nil {
				b.Fatal(err)
			}
			var walls []time.Duration
			var res *evaluator.Result
			for run := range runs + 3 {
				in := inputs
				if run > 0 {
					in = nil
				}
				t0 := time.Now()
				res, err = job.Run(in)
				if err != nil {
					b.Fatal(err)
				}
				if run >= 3 {
					walls = append(walls, time.Since(t0))
				}
			}
			print(p.name+" run-"+mode.name, walls)
			if mode.stats {
				rs := res.Ranks[0].Stats.Runs[3:]
				for _, part := range []struct {
					name string
					of   func(evaluator.RunStat) time.Duration
				}{
					{"inputs", func(s evaluator.RunStat) time.Duration { return s.Inputs }},
					{"ops", func(s evaluator.RunStat) time.Duration { return s.Ops }},
					{"outputs", func(s evaluator.RunStat) time.Duration { return s.Outputs }},
					{"drain", func(s evaluator.RunStat) time.Duration { return s.Drain }},
				} {
					ds := make([]time.Duration, len(rs))
					for i, s := range rs {
						ds[i] = part.of(s)
					}
					print(p.name+" stats-"+part.name, ds)
				}
			}
			if err := job.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}

	// The pieces alone, at the matmul's shape.
	bl := ir.NewBuilder(ir.LinearMesh(1))
	a := bl.Input("a", ir.Tensor(ir.BF16, 4096, 4096))
	w := bl.Input("w", ir.Tensor(ir.BF16, 4096, 1024))
	op := bl.Op(ir.OpMatmul, a, w).Op()
	sh := func(s ...int64) runtime.TensorShape { return runtime.TensorShape{DType: ir.BF16, Shape: s} }
	k, err := d.Compile(&runtime.KernelSpec{Op: op, Inputs: []runtime.TensorShape{sh(4096, 4096), sh(4096, 1024)}, Outputs: []runtime.TensorShape{sh(4096, 1024)}})
	if err != nil {
		b.Fatal(err)
	}
	var args []runtime.Tensor
	for _, s := range [][]int64{{4096, 4096}, {4096, 1024}, {4096, 1024}} {
		buf, err := d.Alloc(2*s[0]*s[1], ir.Global)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Free(buf)
		args = append(args, runtime.Tensor{Buf: buf, DType: ir.BF16, Shape: s})
	}
	s := d.DefaultStream()
	launch := func() error { return d.Launch(k, args, nil) }
	fmt.Printf("runcost matmul-4096x4096x1024 gpu-events %.2f\n", timeEvents(b, d, launch)*1e6)
	timed := func(what string, f func() error) {
		var ds []time.Duration
		for i := range runs + 3 {
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			if i >= 3 {
				ds = append(ds, time.Since(t0))
			}
		}
		print(what, ds)
	}
	timed("matmul-4096x4096x1024 launch+sync", func() error {
		if err := launch(); err != nil {
			return err
		}
		return s.Synchronize()
	})
	// Reads to the host, side by side: a strided column packed by the copy
	// kernel straight into pinned memory (up to gpu.MaxDirectRead, the
	// default) or staged and copied by the copy engines; contiguous reads
	// always take the copy engines (the kernel's figures came first:
	// slower at 8 and 64 KiB).
	out := args[2]
	col := out
	col.Shape = []int64{4096}
	col.Strides = []int64{1024}
	dst := make([]byte, 4<<20)
	defaultDirect := gpu.MaxDirectRead
	defer func() { gpu.MaxDirectRead = defaultDirect }()
	for _, path := range []struct {
		name   string
		direct int
	}{{"kernel", 1 << 30}, {"copy-engine", 0}} {
		gpu.MaxDirectRead = path.direct
		timed("read-column-4096-bf16-strided "+path.name, func() error {
			return d.ReadToHost([][]byte{dst[:4096*2]}, []runtime.Tensor{col}, s)
		})
	}
	gpu.MaxDirectRead = defaultDirect
	for _, n := range []int64{8 << 10, 64 << 10, 1 << 20} {
		row := out
		row.Shape = []int64{n / 2}
		timed(fmt.Sprintf("read-contiguous-%dKiB", n>>10), func() error {
			return d.ReadToHost([][]byte{dst[:n]}, []runtime.Tensor{row}, s)
		})
	}
	timed("synchronize-idle", s.Synchronize)
}
