package sim

import (
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// benchCollective times one collective of n f32 elements per rank on D
// ranks, all ranks running at once.
func benchCollective(b *testing.B, op ir.Opcode, algo ir.Algo, D int, inN, outN int64, axis int) {
	rt := newRuntime(b, D, 30*time.Second)
	ins := make([]runtime.Tensor, D)
	outs := make([]runtime.Tensor, D)
	mustAll(b, onAll(rt, func(d *Device) error {
		ib, err := d.Alloc(inN*4, ir.Symmetric)
		if err != nil {
			return err
		}
		ob, err := d.Alloc(outN*4, ir.Symmetric)
		ins[d.rank], outs[d.rank] = tensorOf(ib, ir.F32, inN), tensorOf(ob, ir.F32, outN)
		return err
	}))
	b.SetBytes(inN * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mustAll(b, onAll(rt, func(d *Device) error {
			call := &runtime.CollectiveCall{Op: op, Algo: algo, ReduceOp: ir.ReduceSum, Axis: axis, In: ins[d.rank], Out: outs[d.rank]}
			if err := d.Collective(call, nil); err != nil {
				return err
			}
			return d.DefaultStream().Synchronize()
		}))
	}
	b.StopTimer()
	mustAll(b, onAll(rt, func(d *Device) error {
		return d.Free(ins[d.rank].Buf)
	}))
	mustAll(b, onAll(rt, func(d *Device) error {
		return d.Free(outs[d.rank].Buf)
	}))
}

func BenchmarkAllReduce(b *testing.B) {
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoTwoShot, ir.AlgoRing} {
		b.Run(algo.String(), func(b *testing.B) { benchCollective(b, ir.OpAllReduce, algo, 4, 1<<14, 1<<14, 0) })
	}
}

func BenchmarkAllGather(b *testing.B) {
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoRing, ir.AlgoCopyEngine, ir.AlgoNCCL} {
		b.Run(algo.String(), func(b *testing.B) { benchCollective(b, ir.OpAllGather, algo, 4, 1<<12, 1<<14, 0) })
	}
}

func BenchmarkReduceScatter(b *testing.B) {
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoRing} {
		b.Run(algo.String(), func(b *testing.B) { benchCollective(b, ir.OpReduceScatter, algo, 4, 1<<14, 1<<12, 0) })
	}
}

// BenchmarkFusion times a 3-op bf16 fusion with a trailing sum over 64K
// elements.
func BenchmarkFusion(b *testing.B) {
	rt := newRuntime(b, 1, 30*time.Second)
	d := rt.devices[0]
	x, t1, t2, t3 := val("x"), val("t1"), val("t2"), val("t3")
	sum := &ir.Op{Code: ir.OpSum, Operands: []*ir.Value{t2}, Results: []*ir.Value{t3}}
	sum.SetAttr("axes", ir.AttrValue{Kind: ir.KindInts, Ints: []int64{1}})
	body := &ir.Block{Ops: []*ir.Op{
		{Code: ir.OpMul, Operands: []*ir.Value{x, ir.Float(2)}, Results: []*ir.Value{t1}},
		{Code: ir.OpGelu, Operands: []*ir.Value{t1}, Results: []*ir.Value{t2}},
		sum,
		{Code: ir.OpYield, Operands: []*ir.Value{t2, t3}},
	}}
	fusion := &ir.Op{Code: ir.OpFusion, Operands: []*ir.Value{x}, Body: body, Results: []*ir.Value{val("r0"), val("r1")}}
	const rows, cols = 256, 256
	k, err := d.Compile(&runtime.KernelSpec{Op: fusion, Inputs: out(ir.BF16, rows, cols),
		Outputs: []runtime.TensorShape{{DType: ir.BF16, Shape: []int64{rows, cols}}, {DType: ir.BF16, Shape: []int64{rows}}}})
	if err != nil {
		b.Fatal(err)
	}
	in, _ := d.Alloc(rows*cols*2, ir.Global)
	o1, _ := d.Alloc(rows*cols*2, ir.Global)
	o2, _ := d.Alloc(rows*2, ir.Global)
	args := []runtime.Tensor{tensorOf(in, ir.BF16, rows, cols), tensorOf(o1, ir.BF16, rows, cols), tensorOf(o2, ir.BF16, rows)}
	b.SetBytes(rows * cols * 2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Launch(k, args, nil); err != nil {
			b.Fatal(err)
		}
		if err := d.DefaultStream().Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, buf := range []runtime.Buffer{in, o1, o2} {
		d.Free(buf)
	}
}

// BenchmarkMatmul times a matmul of [256, 512] by [512, 512] on one rank
// of the CPU runtime, f32 and bf16 (docs/RUNTIME.md, "Speed").
func BenchmarkMatmul(b *testing.B) {
	for _, dt := range []ir.DType{ir.F32, ir.BF16} {
		b.Run(dt.String(), func(b *testing.B) {
			rt := newRuntime(b, 1, 30*time.Second)
			d := rt.devices[0]
			const m, k, n int64 = 256, 512, 512
			op := &ir.Op{Code: ir.OpMatmul, Operands: []*ir.Value{val("a"), val("w")}, Results: []*ir.Value{val("c")}}
			kern, err := d.Compile(&runtime.KernelSpec{Op: op,
				Inputs:  []runtime.TensorShape{{DType: dt, Shape: []int64{m, k}}, {DType: dt, Shape: []int64{k, n}}},
				Outputs: []runtime.TensorShape{{DType: dt, Shape: []int64{m, n}}}})
			if err != nil {
				b.Fatal(err)
			}
			sz := int64(dt.Size())
			ab, _ := d.Alloc(m*k*sz, ir.Global)
			wb, _ := d.Alloc(k*n*sz, ir.Global)
			cb, _ := d.Alloc(m*n*sz, ir.Global)
			args := []runtime.Tensor{tensorOf(ab, dt, m, k), tensorOf(wb, dt, k, n), tensorOf(cb, dt, m, n)}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := d.Launch(kern, args, nil); err != nil {
					b.Fatal(err)
				}
				if err := d.DefaultStream().Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(2*m*k*n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GFLOP/s")
			for _, buf := range []runtime.Buffer{ab, wb, cb} {
				d.Free(buf)
			}
		})
	}
}
