package cuda

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// Planning needs no GPU: these tests run everywhere, on a Device with
// hand-made buffers (addresses only; nothing is dereferenced).

func fakeDevice(rank, world int) *Device {
	return &Device{Comm: &coll.Comm{Device: &gpu.Device{Opts: gpu.Options{Rank: rank, WorldSize: world, Timeout: time.Second}, Live: map[uint64]*gpu.Buffer{}}, Tune: coll.TuningFromEnv()}}
}

func fakeBuf(d *Device, size int64, mem ir.MemoryType) *gpu.Buffer {
	b := &gpu.Buffer{Dev: d.Device, Bytes: size, MemType: mem, Kind: gpu.KindGlobal, Ptr: 0x7f0000000000 + uint64(d.NextID.Add(1))<<32, Owner: d.Opts.Rank}
	b.BufID = d.NextID.Load()
	if mem == ir.Symmetric {
		b.Kind = gpu.KindSym
		a := &gpu.SymAlloc{Seq: 3, Size: uint64(size)}
		for r := 0; r < d.Opts.WorldSize; r++ {
			a.Maps = append(a.Maps, gpu.Mapping{Ptr: b.Ptr + uint64(r)<<28, Size: uint64(size)})
		}
		b.Sym = a
	}
	return b
}

func tensor(b *gpu.Buffer, dt ir.DType, shape ...int64) runtime.Tensor {
	return runtime.Tensor{Buf: b, DType: dt, Shape: shape}
}

func TestPlanRejectsBadCalls(t *testing.T) {
	d := fakeDevice(1, 4)
	sym := fakeBuf(d, 1<<20, ir.Symmetric)
	glob := fakeBuf(d, 1<<20, ir.Global)
	cases := []struct {
		name string
		call runtime.CollectiveCall
		want string
	}{
		{"avg of ints", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceAvg, In: tensor(sym, ir.I32, 8), Out: tensor(glob, ir.I32, 8)}, "op=avg needs a float dtype, not i32"},
		{"bool sum", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceSum, In: tensor(sym, ir.Bool, 8), Out: tensor(glob, ir.Bool, 8)}, "cannot reduce bool tensors"},
		{"unknown reduce", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceOp(99), In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.F32, 8)}, `unknown reduce op "ReduceOp(99)"`},
		{"unknown algo", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.Algo(99), In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.F32, 8)}, `no algorithm "Algo(99)"`},
		{"dtype", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.BF16, 8)}, "input is f32 but output is bf16"},
		{"shape", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.F32, 9)}, "differ"},
		{"gather shape", runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoOneShot, In: tensor(glob, ir.F32, 8), Out: tensor(sym, ir.F32, 24)}, "not the input's [8] with axis 0 times 4"},
		{"root", runtime.CollectiveCall{Op: ir.OpBroadcast, Algo: ir.AlgoOneShot, Root: 4, In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.F32, 8)}, "root 4 out of range"},
		{"remote write to global", runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoOneShot, In: tensor(glob, ir.F32, 8), Out: tensor(glob, ir.F32, 32)}, "writes its output on peers"},
		{"remote read of global", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: tensor(glob, ir.F32, 8), Out: tensor(glob, ir.F32, 8)}, "reads its input from peers"},
		{"two_shot output", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoTwoShot, In: tensor(sym, ir.F32, 8), Out: tensor(glob, ir.F32, 8)}, "writes its output on peers"},
		{"strided", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, In: runtime.Tensor{Buf: glob, DType: ir.F32, Shape: []int64{4}, Strides: []int64{2}}, Out: tensor(glob, ir.F32, 4)}, "must be contiguous"},
		{"out of bounds", runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, In: tensor(glob, ir.F32, 1<<20), Out: tensor(glob, ir.F32, 1<<20)}, "reaches bytes"},
		{"all_to_all", runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoOneShot, Axis: 1, ConcatAxis: 0, In: tensor(sym, ir.F32, 2, 6), Out: tensor(sym, ir.F32, 8, 2)}, "do not fit"},
	}
	for _, c := range cases {
		_, err := d.PlanCollective(&c.call, false)
		if !assert.ErrorContains(t, err, c.want, c.name) {
			continue
		}
		assert.ErrorContains(t, err, "rank 1", "%s: the error does not name the rank", c.name)
	}
}

// TestPlanAuto: auto's compiled-in choices (no measured table), as
// DefaultAlgo documents them, on 2 and on 4 ranks.
func TestPlanAuto(t *testing.T) {
	for _, c := range []struct {
		world   int
		op      ir.Opcode
		symIn   bool
		symOut  bool
		n       int64 // bf16 elements of the input
		want    string
		comment string
		inGraph string // what a capture picks, where it differs (else unchecked)
	}{
		{2, ir.OpAllReduce, true, true, 1024, "ll", "fits ll", ""},
		{2, ir.OpAllReduce, true, false, 1024, "ll", "ll needs nothing symmetric", ""},
		{2, ir.OpAllReduce, true, true, 4 << 20, "one_shot", "two ranks, up to AutoOneShotMax", ""},
		{2, ir.OpAllReduce, true, false, 4 << 20, "one_shot", "one_shot writes only its own output", ""},
		{2, ir.OpAllReduce, true, true, 40 << 20, "two_shot", "two ranks, past AutoOneShotMax", ""},
		{2, ir.OpAllReduce, false, false, 40 << 20, "ring", "nothing symmetric", ""},
		{4, ir.OpAllReduce, true, true, 16 << 10, "ll", "more ranks, 32 KiB: ll eagerly, one_shot in a graph", "one_shot"},
		{2, ir.OpAllReduce, true, true, 16 << 10, "ll", "two ranks, 32 KiB: ll, in a graph too", "ll"},
		{4, ir.OpAllReduce, true, true, 64 << 10, "one_shot", "more ranks, 128 KiB: ll would send it whole to every peer", ""},
		{4, ir.OpAllReduce, true, false, 64 << 10, "one_shot", "one_shot writes only its own output", ""},
		{4, ir.OpAllReduce, false, false, 64 << 10, "ll", "one_shot reads the peers' inputs: not symmetric, ll", ""},
		{4, ir.OpAllReduce, true, true, 256 << 10, "ll", "more ranks, 512 KiB: ll in two hops", ""},
		{2, ir.OpAllReduce, true, true, 64 << 10, "ll", "two ranks, 128 KiB: ll", ""},
		{2, ir.OpAllReduce, true, true, 1 << 20, "ll", "two ranks, 2 MiB: ll", ""},
		{2, ir.OpAllReduce, true, true, 2 << 20, "one_shot", "two ranks, 4 MiB: one_shot (past arLLMax2)", ""},
		{4, ir.OpAllReduce, true, true, 1 << 20, "ll", "more ranks, 2 MiB: ll in two hops of LL128 lines", ""},
		{4, ir.OpAllReduce, true, true, 2 << 20, "two_shot", "more ranks, 4 MiB: ll's two hops would go in bulk", ""},
		{4, ir.OpAllReduce, true, true, 4 << 20, "two_shot", "more ranks, below AutoRingMin", ""},
		{4, ir.OpAllReduce, true, true, 40 << 20, "ring", "more ranks, from AutoRingMin", ""},
		{2, ir.OpReduceScatter, true, false, 8 << 20, "one_shot", "reduce_scatter on two ranks", ""},
		{4, ir.OpReduceScatter, true, false, 40 << 20, "ring", "reduce_scatter on more ranks", ""},
		{2, ir.OpReduceScatter, false, false, 8 << 20, "ring", "reduce_scatter of a global input", ""},
		{2, ir.OpAllGather, true, true, 64 << 10, "ll", "all_gather, 128 KiB a peer: ll lines", ""},
		{2, ir.OpAllGather, true, true, 256 << 10, "ll", "all_gather on two ranks, 512 KiB a peer: LL128 lines", ""},
		{2, ir.OpAllGather, true, true, 1 << 20, "ring", "all_gather on two ranks, 4 MiB out: the ring", ""},
		{2, ir.OpAllGather, true, true, 2 << 20, "one_shot", "all_gather on two ranks in bulk, 8 MiB out: one_shot", ""},
		{4, ir.OpAllGather, true, true, 256 << 10, "ll", "all_gather on more ranks, 512 KiB a peer: LL128 lines", ""},
		{4, ir.OpAllGather, true, true, 512 << 10, "one_shot", "all_gather on more ranks in bulk: one_shot", ""},
		{2, ir.OpAllGather, true, true, 64 << 20, "copy_engine", "all_gather, 256 MiB out: the copy engines", ""},
	} {
		d := fakeDevice(0, c.world)
		mem := func(sym bool) ir.MemoryType {
			if sym {
				return ir.Symmetric
			}
			return ir.Global
		}
		in, out := fakeBuf(d, 256<<20, mem(c.symIn)), fakeBuf(d, 256<<20, mem(c.symOut))
		nOut := c.n
		switch c.op {
		case ir.OpReduceScatter:
			nOut = c.n / int64(c.world)
		case ir.OpAllGather:
			nOut = c.n * int64(c.world)
		}
		call := runtime.CollectiveCall{Op: c.op, Algo: ir.AlgoAuto, ReduceOp: ir.ReduceSum, In: tensor(in, ir.BF16, c.n), Out: tensor(out, ir.BF16, nOut)}
		p, err := d.PlanCollective(&call, false)
		require.NoError(t, err, c.comment)
		assert.Equal(t, c.want, p.Impl.String(), "%s on %d ranks, bf16[%d]: %s", c.op, c.world, c.n, c.comment)
		if c.inGraph != "" {
			p, err := d.PlanCollective(&call, true)
			require.NoError(t, err, c.comment)
			assert.Equal(t, c.inGraph, p.Impl.String(), "%s on %d ranks, bf16[%d], captured: %s", c.op, c.world, c.n, c.comment)
		}
	}
}

// Every rank must describe the same call the same way, and a different
// shape must change the description.
func TestPlanDescriptorIsRankIndependent(t *testing.T) {
	plan := func(rank int, n int64) string {
		d := fakeDevice(rank, 2)
		sym := fakeBuf(d, 1<<20, ir.Symmetric)
		glob := fakeBuf(d, 1<<20, ir.Global)
		p, err := d.PlanCollective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceMax,
			In: runtime.Tensor{Buf: sym, Offset: 64, DType: ir.F32, Shape: []int64{n}}, Out: tensor(glob, ir.F32, n)}, false)
		require.NoError(t, err)
		return p.Desc
	}
	assert.Equal(t, plan(0, 100), plan(1, 100), "rank 0's descriptor, rank 1's")
	assert.NotEqual(t, plan(0, 100), plan(1, 101), "different shapes, same descriptor")
	assert.Contains(t, plan(0, 100), "@sym#3+64", "the descriptor does not place the remotely read input")
}

// blockLayout's (first unit offset, run, pitch) must address block p along
// an axis exactly as a brute-force walk over the block's indices does.
func TestBlockLayoutMatchesIndexing(t *testing.T) {
	shapes := [][]int64{{12}, {6, 4}, {3, 8, 5}, {2, 3, 4, 6}, {1, 6, 1}}
	for _, full := range shapes {
		for axis := range full {
			for _, D := range []int64{1, 2, 3} {
				if full[axis]%D != 0 {
					continue
				}
				ext := full[axis] / D
				strides := runtime.ContiguousStrides(full)
				block := append([]int64(nil), full...)
				block[axis] = ext
				n := ir.Product(block)
				run, l := coll.BlockLayout(full, axis, ext)
				for p := int64(0); p < D; p++ {
					idx := make([]int64, len(block))
					for i := int64(0); i < n; i++ {
						// The i-th element of the block in row-major order.
						rem := i
						for k := len(block) - 1; k >= 0; k-- {
							idx[k] = rem % block[k]
							rem /= block[k]
						}
						want := p * ext * strides[axis]
						for k := range idx {
							want += idx[k] * strides[k]
						}
						got := p*run + i
						if l.Run != 0 {
							got = p*run + (i/l.Run)*l.Pitch + i%l.Run
						}
						require.Equal(t, want, got, "shape %v axis %d D %d block %d element %d: offset", full, axis, D, p, i)
					}
				}
			}
		}
	}
}

// The ring kernel's segments must cover every element of every chunk
// exactly once, whatever the block count and geometry.
func TestRingSegmentsCoverChunks(t *testing.T) {
	for _, g := range []coll.RingGeom{coll.RingDefault, {Blocks: 3, Seg: 48, Slots: 2}, {Blocks: 256, Seg: 1 << 20, Slots: 16}} {
		for _, n := range []int64{1, 7, 1003, 100_000, 3_000_017} {
			for _, D := range []int64{2, 3, 4} {
				for _, es := range []int64{2, 4, 8} {
					cs := &coll.CommState{Blocks: 132}
					bounds := make([]int64, D+1)
					for c := int64(0); c <= D; c++ {
						bounds[c] = n * c / D
					}
					grid, seg, nseg := cs.RingLaunch(g, bounds, es)
					G := int64(grid)
					require.GreaterOrEqual(t, G, int64(1), "geometry %v n=%d: grid %d seg %d", g, n, grid, seg)
					require.LessOrEqual(t, G, g.Blocks, "geometry %v n=%d: grid %d seg %d", g, n, grid, seg)
					require.LessOrEqual(t, G, int64(132), "geometry %v n=%d: grid %d seg %d", g, n, grid, seg)
					require.Equal(t, g.Seg, seg*es, "geometry %v n=%d: grid %d seg %d", g, n, grid, seg)
					seen := make([]int, n)
					for c := int64(0); c < D; c++ {
						c0, ln := bounds[c], bounds[c+1]-bounds[c]
						for b := int64(0); b < G; b++ {
							plo, phi := c0+ln*b/G, c0+ln*(b+1)/G
							for k := int64(0); k < nseg; k++ {
								lo := min(plo+k*seg, phi)
								hi := min(lo+seg, phi)
								// The segment fits its slot at its 16-byte phase.
								if hi > lo && (hi-lo+lo%(16/es))*es > g.Stride() { // checked here, not by testify: it runs for each segment
									require.Failf(t, "a segment overflows its slot", "segment [%d,%d) overflows a %d-byte slot", lo, hi, g.Stride())
								}
								for i := lo; i < hi; i++ {
									seen[i]++
								}
							}
						}
					}
					for i, s := range seen {
						if s != 1 { // checked here, not by testify: it runs for each of millions of elements
							require.Failf(t, "an element not covered exactly once", "geometry %v n=%d D=%d: element %d covered %d times", g, n, D, i, s)
						}
					}
				}
			}
		}
	}
}

// TestCUDARunsEveryRule: every (collective, algorithm) of ir's table but
// auto has an implementation in collAlgorithms, and nothing else does.
func TestCUDARunsEveryRule(t *testing.T) {
	want := map[coll.CollKey]bool{}
	for _, r := range ir.SymmetricRules() {
		if r.Algo != ir.AlgoAuto {
			want[coll.CollKey{Op: r.Op, Algo: r.Algo}] = true
			assert.NotNil(t, coll.CollAlgorithms[coll.CollKey{Op: r.Op, Algo: r.Algo}], "%s algo=%s has no cuda implementation", r.Op, r.Algo)
		}
	}
	for k := range coll.CollAlgorithms {
		assert.True(t, want[k], "%s algo=%s is in collAlgorithms but not in ir's table", k.Op, k.Algo)
	}
}

// TestChannelsComeBack: a closed stream gives its channel back, the lowest
// free number goes to the next new stream (the same on every rank whatever
// order the streams closed in), and a process that makes and closes many
// jobs' streams never runs out (issue 20: the overlap benchmark's fifth
// job stopped with "more than 16 streams").
func TestChannelsComeBack(t *testing.T) {
	c := &coll.CommState{Chans: map[*gpu.Stream]*coll.CommChannel{}, Plans: map[coll.PlanKey]*coll.CollPlan{}}
	streams := make([]*gpu.Stream, coll.MaxChannels)
	for i := range streams {
		streams[i] = &gpu.Stream{}
		ch, err := c.Channel(streams[i], 0)
		require.NoError(t, err)
		assert.Equal(t, i, ch.Idx)
	}
	_, err := c.Channel(&gpu.Stream{}, 0)
	require.ErrorContains(t, err, "more than 16 streams", "a 17th stream while 16 are open")
	c.Plans[coll.PlanKey{S: streams[5]}] = &coll.CollPlan{}
	c.ReleaseChannel(streams[5])
	c.ReleaseChannel(streams[2])
	assert.Empty(t, c.Plans, "the closed stream's plans")
	for _, want := range []int{2, 5} {
		ch, err := c.Channel(&gpu.Stream{}, 0)
		require.NoError(t, err)
		assert.Equal(t, want, ch.Idx)
	}
	for _, s := range streams[6:9] {
		c.ReleaseChannel(s)
	}
	for job := 0; job < 100; job++ {
		var open []*gpu.Stream
		for i := 0; i < 3; i++ {
			s := &gpu.Stream{}
			_, err := c.Channel(s, 0)
			require.NoError(t, err, "job %d", job)
			open = append(open, s)
		}
		// this job's streams, closed: 3 numbers come back each time
		for _, s := range open {
			c.ReleaseChannel(s)
		}
	}
}

// TestPlanSpeaksTheSharedContract: a call that breaks the backend-neutral
// contract gets exactly runtime.CollectiveCall.Resolve's message, behind
// the backend's prefix (the CPU runtime's TestCollectiveBadCalls asks the
// same of its own).
func TestPlanSpeaksTheSharedContract(t *testing.T) {
	d := fakeDevice(1, 4)
	sym := fakeBuf(d, 64<<20, ir.Symmetric)
	for _, c := range []runtime.CollectiveCall{
		{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceAvg, In: tensor(sym, ir.I32, 8), Out: tensor(sym, ir.I32, 8)},
		{Op: ir.OpAllReduce, Algo: ir.AlgoCopyEngine, In: tensor(sym, ir.F32, 8), Out: tensor(sym, ir.F32, 8)},
		{Op: ir.OpBroadcast, Algo: ir.AlgoNCCL, Root: -1, In: tensor(sym, ir.F32, 8), Out: tensor(sym, ir.F32, 8)},
		{Op: ir.OpAllGather, Algo: ir.AlgoLL, In: tensor(sym, ir.F32, 2<<20), Out: tensor(sym, ir.F32, 8<<20)},
		{Op: ir.OpAllToAll, Algo: ir.AlgoNCCL, Axis: 0, ConcatAxis: 0, In: tensor(sym, ir.F32, 8), Out: tensor(sym, ir.F32, 8)},
	} {
		_, want := c.Resolve(4)
		require.Error(t, want, "%s algo=%s", c.Op, c.Algo)
		_, err := d.PlanCollective(&c, false)
		assert.EqualError(t, err, "cuda: rank 1: "+want.Error())
	}
}

// The ll protocol by the size of a piece (kernels/collective.cu): LL lines
// up to Tuning.LL128Min, LL128 lines up to the world's bulk limit (1 MiB
// a piece on two ranks, 512 KiB on more) and what the LL128 staging holds,
// bulk past it; the all_reduce of more than two ranks past
// Tuning.LLTwoShotMin by the size of its chunks (a piece over the world).
func TestPlanLLProtocol(t *testing.T) {
	for _, c := range []struct {
		world int
		op    ir.Opcode
		n     int64 // bf16 elements of the input
		want  string
	}{
		{2, ir.OpAllGather, 32 << 10, "ll"},         // 64 KiB a peer
		{2, ir.OpAllGather, 32<<10 + 1, "ll128"},    // past LL128Min
		{2, ir.OpAllGather, 512 << 10, "ll128"},     // 1 MiB a peer on two ranks
		{2, ir.OpAllGather, 512<<10 + 8, "bulk"},    // past it
		{4, ir.OpAllGather, 256 << 10, "ll128"},     // 512 KiB a peer on four
		{4, ir.OpAllGather, 256<<10 + 8, "bulk"},    // past it
		{4, ir.OpReduceScatter, 4 << 10, "ll"},      // 2 KiB a block
		{4, ir.OpReduceScatter, 512 << 10, "ll128"}, // 256 KiB a block
		{4, ir.OpReduceScatter, 2 << 20, "bulk"},    // 1 MiB a block
		{4, ir.OpAllToAll, 4 * 128 * 256, "ll"},     // [512, 256]: 64 KiB a peer
		{4, ir.OpAllToAll, 4 * 129 * 256, "ll128"},  // [516, 256]: 512 bytes past it
		{2, ir.OpAllReduce, 256 << 10, "ll128"},     // one hop, 512 KiB
		{2, ir.OpAllReduce, 1 << 20, "bulk"},        // one hop, 2 MiB
		{4, ir.OpAllReduce, 64 << 10, "ll128"},      // one hop, 128 KiB
		{4, ir.OpAllReduce, 512 << 10, "ll128"},     // two hops of 256 KiB chunks
		{4, ir.OpAllReduce, 2 << 20, "bulk"},        // two hops of 1 MiB chunks
	} {
		d := fakeDevice(0, c.world)
		in, out := fakeBuf(d, 64<<20, ir.Global), fakeBuf(d, 64<<20, ir.Global)
		nOut := c.n
		switch c.op {
		case ir.OpReduceScatter:
			nOut = c.n / int64(c.world)
		case ir.OpAllGather:
			nOut = c.n * int64(c.world)
		}
		call := runtime.CollectiveCall{Op: c.op, Algo: ir.AlgoLL, In: tensor(in, ir.BF16, c.n), Out: tensor(out, ir.BF16, nOut)}
		if c.op.Info().Reduces {
			call.ReduceOp = ir.ReduceSum
		}
		if c.op == ir.OpAllToAll { // [D*rows, 256] split by rows, gathered along columns
			rows := c.n / 256
			call.In = tensor(in, ir.BF16, rows, 256)
			call.Out = tensor(out, ir.BF16, rows/int64(c.world), 256*int64(c.world))
			call.ConcatAxis = 1
		}
		p, err := d.PlanCollective(&call, false)
		require.NoError(t, err, "%s on %d ranks, bf16[%d]", c.op, c.world, c.n)
		got := "ll"
		switch {
		case strings.Contains(p.Desc, "proto=ll128"):
			got = "ll128"
		case strings.Contains(p.Desc, "proto=bulk"):
			got = "bulk"
		}
		assert.Equal(t, c.want, got, "%s on %d ranks, bf16[%d]: %s", c.op, c.world, c.n, p.Desc)
	}
	// The knobs: LL128 off, and a bulk limit of one's own.
	proto := func(world int, n int64) string {
		d := fakeDevice(0, world)
		in, out := fakeBuf(d, 64<<20, ir.Global), fakeBuf(d, 64<<20, ir.Global)
		p, err := d.PlanCollective(&runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoLL, In: tensor(in, ir.BF16, n), Out: tensor(out, ir.BF16, n*int64(world))}, false)
		require.NoError(t, err)
		return p.Desc
	}
	t.Setenv("HIR_COLL_LL128_MIN", "-1")
	assert.NotContains(t, proto(2, 256<<10), "proto=", "LL128 off: 512 KiB a peer as LL lines")
	t.Setenv("HIR_COLL_LL128_MIN", "")
	t.Setenv("HIR_COLL_LL_BULK_MIN", "131072")
	assert.Contains(t, proto(2, 64<<10), "proto=ll128", "128 KiB a peer, bulk past 128 KiB")
	assert.Contains(t, proto(2, 64<<10+8), "proto=bulk", "past 128 KiB a peer, bulk")
}
