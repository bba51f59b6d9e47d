package sim

import (
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// meshFootprint runs a tiny program on D ranks (open the runtime, a global
// and a symmetric alloc per rank, an add kernel, a barrier, a ring shift
// by send/recv, an all_reduce of one element with each of the given
// algorithms, then free and close) and returns the bytes it allocated
// (heap, cumulative) and the time it took.
func meshFootprint(t testing.TB, D int, algos ...ir.Algo) (int64, time.Duration) {
	t.Helper()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	start := time.Now()
	rt, err := New(runtime.Config{WorldSize: D, Timeout: 20 * time.Second})
	require.NoError(t, err)
	x, y := val("x"), val("y")
	addOp := &ir.Op{Code: ir.OpAdd, Operands: []*ir.Value{x, ir.Float(1)}, Results: []*ir.Value{y}}
	mustAll(t, onAll(rt, func(d *Device) error {
		k, err := d.Compile(&runtime.KernelSpec{Op: addOp, Inputs: out(ir.F32, 4), Outputs: out(ir.F32, 4)})
		if err != nil {
			return err
		}
		g, err := d.Alloc(16, ir.Global)
		if err != nil {
			return err
		}
		s, err := d.Alloc(16, ir.Symmetric)
		if err != nil {
			return err
		}
		gt, st := tensorOf(g, ir.F32, 4), tensorOf(s, ir.F32, 4)
		if err := d.Launch(k, []runtime.Tensor{gt, st}, nil); err != nil {
			return err
		}
		if err := d.Barrier(nil); err != nil {
			return err
		}
		// A ring shift on one stream: even ranks send first, odd ones
		// receive first (D is even).
		send := func() error { return d.Send(st, (d.rank+1)%D, nil) }
		recv := func() error { return d.Recv(gt, (d.rank+D-1)%D, nil) }
		first, second := send, recv
		if d.rank%2 == 1 {
			first, second = recv, send
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		one := tensorOf(s, ir.F32, 1)
		for _, algo := range algos {
			call := &runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: algo, ReduceOp: ir.ReduceSum, In: one, Out: one}
			if err := d.Collective(call, nil); err != nil {
				return err
			}
		}
		if err := d.DefaultStream().Synchronize(); err != nil {
			return err
		}
		if err := d.Free(g); err != nil {
			return err
		}
		return d.Free(s)
	}))
	require.NoError(t, rt.Close())
	elapsed := time.Since(start)
	goruntime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc), elapsed
}

// TestMeshMemoryGrowsLinearly: the bytes a tiny program allocates per rank
// stay about the same from 64 to 512 ranks. Once the runtime kept per-rank
// tables over every peer (send and recv counters, and for each collective
// a signal pad of D counters per rank and D counters per member): 512
// ranks took 4× the bytes per rank of 64.
func TestMeshMemoryGrowsLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 512 ranks")
	}
	meshFootprint(t, 8, ir.AlgoTwoShot) // warm up
	b64, _ := meshFootprint(t, 64, ir.AlgoTwoShot)
	b512, _ := meshFootprint(t, 512, ir.AlgoTwoShot)
	per64, per512 := b64/64, b512/512
	t.Logf("bytes per rank: %d at 64 ranks, %d at 512", per64, per512)
	assert.LessOrEqual(t, per512, 2*per64, "bytes per rank grew from %d at 64 ranks to %d at 512: not linear in the mesh", per64, per512)
}

// BenchmarkMeshScaling reports the bytes and time per rank of the tiny
// program of meshFootprint at 8, 64, 512 and 4096 ranks (go test -run X
// -bench MeshScaling ./runtime/sim): both stay flat when the runtime is
// linear in the mesh.
func BenchmarkMeshScaling(b *testing.B) {
	for _, D := range []int{8, 64, 512, 4096} {
		for _, algos := range [][]ir.Algo{nil, {ir.AlgoTwoShot}} {
			name := "setup"
			if algos != nil {
				name = "all_reduce_" + algos[0].String()
			}
			b.Run(name+"/D="+itoa(D), func(b *testing.B) {
				var bytes int64
				var dur time.Duration
				for i := 0; i < b.N; i++ {
					n, d := meshFootprint(b, D, algos...)
					bytes += n
					dur += d
				}
				b.ReportMetric(float64(bytes)/float64(b.N)/float64(D), "B/rank")
				b.ReportMetric(float64(dur.Nanoseconds())/float64(b.N)/float64(D), "ns/rank")
			})
		}
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}
