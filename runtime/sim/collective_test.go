package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
)

type collCase struct {
	op              ir.Opcode
	algo            ir.Algo
	red             ir.ReduceOp
	dt              ir.DType
	root, axis, cat int
	inShape         []int64
	outShape        []int64
	inMem, outMem   ir.MemoryType
	nonZeroOutput   bool // fill outputs with a marker before, to see what is left untouched
}

func (c collCase) String() string {
	s := fmt.Sprintf("%s algo=%s %s in=%v out=%v", c.op, c.algo, c.dt, c.inShape, c.outShape)
	if c.red != ir.ReduceUnset {
		s += " op=" + c.red.String()
	}
	return s + fmt.Sprintf(" root=%d axis=%d concat=%d", c.root, c.axis, c.cat)
}

// inputFor makes rank r's input: values whose sums, products and maxima
// over up to 4 ranks are exact in every dtype tested, so one reference fits
// every algorithm whatever its reduction order.
func inputFor(dt ir.DType, r int, n int64) []float64 {
	floats := []float64{-3, -2, -1, -0.5, 0.5, 1, 2, 3}
	xs := make([]float64, n)
	for i := range xs {
		k := (int(n)*7 + r*5 + i*3 + i*i) % len(floats)
		xs[i] = floats[k]
		if !dt.IsFloat() {
			xs[i] = float64(k - 4)
		}
	}
	return xs
}

func reduceRef(red ir.ReduceOp, dt ir.DType, parts [][]float64) []float64 {
	out := append([]float64(nil), parts[0]...)
	for _, p := range parts[1:] {
		for i := range out {
			switch red {
			case ir.ReduceSum, ir.ReduceAvg:
				out[i] += p[i]
			case ir.ReduceProd:
				out[i] *= p[i]
			case ir.ReduceMax:
				out[i] = math.Max(out[i], p[i])
			case ir.ReduceMin:
				out[i] = math.Min(out[i], p[i])
			}
		}
	}
	for i := range out {
		if red == ir.ReduceAvg {
			out[i] = float64(float32(out[i] / float64(len(parts))))
		}
		out[i] = numeric.RoundTo(dt, out[i])
	}
	return out
}

// collRef is the straightforward meaning of the collective (SEMANTICS.md).
func collRef(c collCase, D int, ins []nd) []nd {
	outs := make([]nd, D)
	zero := nd{shape: c.outShape, data: make([]float64, ir.Product(c.outShape))}
	parts := func() [][]float64 {
		var ps [][]float64
		for _, in := range ins {
			ps = append(ps, in.data)
		}
		return ps
	}
	for r := 0; r < D; r++ {
		switch c.op {
		case ir.OpAllReduce:
			outs[r] = nd{shape: c.outShape, data: reduceRef(c.red, c.dt, parts())}
		case ir.OpReduceScatter:
			full := nd{shape: c.inShape, data: reduceRef(c.red, c.dt, parts())}
			outs[r] = full.block(c.axis, r, c.outShape[c.axis])
		case ir.OpAllGather:
			outs[r] = concat(ins, c.axis)
		case ir.OpAllToAll:
			var blocks []nd
			for src := 0; src < D; src++ {
				blocks = append(blocks, ins[src].block(c.axis, r, c.outShape[c.axis]))
			}
			outs[r] = concat(blocks, c.cat)
		case ir.OpBroadcast:
			outs[r] = ins[c.root]
		case ir.OpReduce:
			outs[r] = zero
			if r == c.root {
				outs[r] = nd{shape: c.outShape, data: reduceRef(c.red, c.dt, parts())}
			}
		case ir.OpGather:
			outs[r] = zero
			if r == c.root {
				outs[r] = concat(ins, c.axis)
			}
		case ir.OpScatter:
			outs[r] = ins[c.root].block(c.axis, r, c.outShape[c.axis])
		}
	}
	return outs
}

// runColl runs one collective on every rank and returns the outputs.
func runColl(rt *Runtime, c collCase, ins []nd) ([]nd, []error) {
	outs := make([]nd, rt.size)
	errs := onAll(rt, func(d *Device) error {
		in, err := upload(d, c.inMem, c.dt, ins[d.rank].data, c.inShape...)
		if err != nil {
			return err
		}
		defer d.Free(in.Buf)
		ob, err := d.Alloc(ir.Product(c.outShape)*int64(c.dt.Size()), c.outMem)
		if err != nil {
			return err
		}
		defer d.Free(ob.(*buffer))
		out := tensorOf(ob, c.dt, c.outShape...)
		call := &runtime.CollectiveCall{Op: c.op, Algo: c.algo, ReduceOp: c.red, Root: c.root, Axis: c.axis, ConcatAxis: c.cat, In: in, Out: out}
		if err := d.Collective(call, d.DefaultStream()); err != nil {
			return err
		}
		if err := d.DefaultStream().Synchronize(); err != nil {
			return err
		}
		xs, err := download(d, out)
		outs[d.rank] = nd{shape: c.outShape, data: xs}
		return err
	})
	return outs, errs
}

// collCases lists every collective × algorithm × dtype × reduce op, with
// shards along axis 0 and 1 and odd sizes.
func collCases(D int) []collCase {
	var cases []collCase
	dts := []ir.DType{ir.F32, ir.BF16, ir.I32}
	root := D - 1
	d := int64(D)
	for _, op := range ir.Opcodes() {
		if !op.IsCollective() {
			continue
		}
		for _, algo := range ir.Algorithms(op) {
			for _, dt := range dts {
				reds := []ir.ReduceOp{ir.ReduceUnset}
				if op.Info().Reduces {
					reds = ir.ReduceOps()
				}
				for _, red := range reds {
					if red == ir.ReduceAvg && !dt.IsFloat() {
						continue
					}
					base := collCase{op: op, algo: algo, red: red, dt: dt, inMem: ir.Symmetric, outMem: ir.Symmetric}
					add := func(root, axis, cat int, in, out []int64) {
						c := base
						c.root, c.axis, c.cat, c.inShape, c.outShape = root, axis, cat, in, out
						cases = append(cases, c)
					}
					switch op {
					case ir.OpAllReduce:
						add(0, 0, 0, []int64{1}, []int64{1})
						add(0, 0, 0, []int64{5}, []int64{5})
						add(0, 0, 0, []int64{2, 3}, []int64{2, 3})
					case ir.OpBroadcast, ir.OpReduce:
						add(root, 0, 0, []int64{1}, []int64{1})
						add(root, 0, 0, []int64{2, 3}, []int64{2, 3})
					case ir.OpAllGather, ir.OpGather:
						add(root, 0, 0, []int64{1}, []int64{d})
						add(root, 0, 0, []int64{2, 3}, []int64{2 * d, 3})
						add(root, 1, 0, []int64{2, 3}, []int64{2, 3 * d})
					case ir.OpReduceScatter, ir.OpScatter:
						add(root, 0, 0, []int64{d}, []int64{1})
						add(root, 0, 0, []int64{2 * d, 3}, []int64{2, 3})
						add(root, 1, 0, []int64{2, 3 * d}, []int64{2, 3})
					case ir.OpAllToAll:
						add(0, 1, 0, []int64{2, 3 * d}, []int64{2 * d, 3})
						add(0, 0, 1, []int64{2 * d, 3}, []int64{2, 3 * d})
						add(0, 1, 0, []int64{1, d}, []int64{d, 1})
					default:
						panic(fmt.Sprintf("collCases: no shapes for %s", op))
					}
				}
			}
		}
	}
	return cases
}

// The sim's table of algorithms has exactly the rows of the symmetric-heap
// table: adding an algorithm to ir means adding it to algorithms.go.
func TestSimRunsEveryRule(t *testing.T) {
	rules := map[algoKey]bool{}
	for _, r := range ir.SymmetricRules() {
		k := algoKey{r.Op, r.Algo}
		rules[k] = true
		a, ok := algorithms[k]
		if assert.True(t, ok, "%s algo=%s: the sim has no implementation", r.Op, r.Algo) {
			assert.NotNil(t, a.run, "%s algo=%s: the sim has no implementation", r.Op, r.Algo)
		}
	}
	for k := range algorithms {
		assert.True(t, rules[k], "%s algo=%s: in the sim's table but not in ir.SymmetricRules", k.op, k.algo)
	}
}

func TestCollectivesAgainstReference(t *testing.T) {
	// 1 to 4 ranks, and 8 (an 8-GPU node's world, issue 23).
	for _, D := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("D=%d", D), func(t *testing.T) {
			rt := newRuntime(t, D, 10*time.Second)
			n := 0
			for _, c := range collCases(D) {
				ins := make([]nd, D)
				for r := range ins {
					ins[r] = nd{shape: c.inShape, data: inputFor(c.dt, r, ir.Product(c.inShape))}
				}
				got, errs := runColl(rt, c, ins)
				for r, err := range errs {
					require.NoError(t, err, "%v: rank %d", c, r)
				}
				want := collRef(c, D, ins)
				for r := range want {
					assert.Empty(t, floatsDiff(want[r].data, got[r].data), "%v: rank %d (-want +got)", c, r)
				}
				n++
			}
			require.GreaterOrEqual(t, n, 100, "only %d cases", n)
		})
	}
}

// Algorithms that touch nothing remotely (ring all-reduce and reduce-scatter,
// nccl) run on global buffers; the others refuse them, saying why.
func TestCollectiveSymmetricRequirements(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 5*time.Second)
	for _, rule := range ir.SymmetricRules() {
		c := collCase{op: rule.Op, algo: rule.Algo, dt: ir.F32, inMem: ir.Global, outMem: ir.Global}
		switch rule.Op {
		case ir.OpAllGather, ir.OpGather:
			c.inShape, c.outShape = []int64{2}, []int64{2 * D}
		case ir.OpReduceScatter, ir.OpScatter:
			c.inShape, c.outShape = []int64{2 * D}, []int64{2}
		case ir.OpAllToAll:
			c.axis, c.cat, c.inShape, c.outShape = 1, 0, []int64{1, D}, []int64{D, 1}
		default:
			c.inShape, c.outShape = []int64{4}, []int64{4}
		}
		if rule.Op.Info().Reduces {
			c.red = ir.ReduceSum
		}
		ins := make([]nd, D)
		for r := range ins {
			ins[r] = nd{shape: c.inShape, data: inputFor(c.dt, r, ir.Product(c.inShape))}
		}
		got, errs := runColl(rt, c, ins)
		needsSym := rule.Access.ReadsInput || rule.Access.WritesOutput
		if !needsSym {
			mustAll(t, errs)
			want := collRef(c, D, ins)
			for r := range want {
				assert.Empty(t, floatsDiff(want[r].data, got[r].data), "%v on global buffers: rank %d (-want +got)", c, r)
			}
			continue
		}
		for r, err := range errs {
			assert.ErrorContains(t, err, "symmetric buffer", "%v on global buffers: rank %d: want an error asking for a symmetric buffer", c, r)
		}
	}
}

// The ring reduces chunk c in ring order c+1, …, c and rounds partials to
// the dtype at every hop; one_shot reduces in rank order in f32. With bf16
// values where order and rounding matter, both are checked by hand.
func TestReductionOrderAndRounding(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 5*time.Second)
	// Three elements, one per ring chunk. Element 0 (chunk 0) is reduced by
	// ranks 1, 2, 0 in turn; element 2 (chunk 2) by ranks 0, 1, 2.
	ins := []nd{
		{[]int64{3}, []float64{-256, 0, 1}},
		{[]int64{3}, []float64{256, 0, 256}},
		{[]int64{3}, []float64{1, 0, -256}},
	}
	run := func(algo ir.Algo) []nd {
		c := collCase{op: ir.OpAllReduce, algo: algo, red: ir.ReduceSum, dt: ir.BF16, inShape: []int64{3}, outShape: []int64{3}, inMem: ir.Symmetric, outMem: ir.Symmetric}
		got, errs := runColl(rt, c, ins)
		mustAll(t, errs)
		return got
	}
	// one_shot and two_shot: rank order, in f32, rounded once: both 1.
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoTwoShot} {
		for r, g := range run(algo) {
			assert.Empty(t, floatsDiff([]float64{1, 0, 1}, g.data), "%s rank %d (-want +got)", algo, r)
		}
	}
	// ring, element 0: 256 + 1 = 257 rounds to 256 at the hop, + -256 = 0.
	// Element 2: 1 + 256 = 257 -> 256, + -256 = 0.
	for r, g := range run(ir.AlgoRing) {
		assert.Empty(t, floatsDiff([]float64{0, 0, 0}, g.data), "ring rank %d (-want +got)", r)
	}
	// Swap ranks 0 and 2 for element 2 only: ring order 0,1,2 gives
	// -256 + 256 = 0, + 1 = 1, while element 0 stays 0.
	ins[0].data[2], ins[2].data[2] = -256, 1
	for r, g := range run(ir.AlgoRing) {
		assert.Empty(t, floatsDiff([]float64{0, 0, 1}, g.data), "ring rank %d (-want +got)", r)
	}
}

func TestIntegerReductionsWrap(t *testing.T) {
	const D = 2
	rt := newRuntime(t, D, 5*time.Second)
	ins := []nd{{[]int64{1}, []float64{math.MaxInt32}}, {[]int64{1}, []float64{1}}}
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoTwoShot, ir.AlgoRing} {
		c := collCase{op: ir.OpAllReduce, algo: algo, red: ir.ReduceSum, dt: ir.I32, inShape: []int64{1}, outShape: []int64{1}, inMem: ir.Symmetric, outMem: ir.Symmetric}
		got, errs := runColl(rt, c, ins)
		mustAll(t, errs)
		for r := range got {
			assert.Equal(t, float64(math.MinInt32), got[r].data[0], "%s: rank %d, want wraparound", algo, r)
		}
	}
}

// A rank that never calls the collective makes the others fail naming it.
func TestCollectiveMissingRankTimesOut(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 200*time.Millisecond)
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 2 {
			return nil
		}
		in, err := upload(d, ir.Symmetric, ir.F32, []float64{1}, 1)
		if err != nil {
			return err
		}
		return d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, ReduceOp: ir.ReduceSum, In: in, Out: in}, nil)
	})
	// The symmetric alloc itself is collective: rank 2 missing it is
	// already a timeout naming rank 2.
	require.ErrorContains(t, errs[0], "timed out", "rank 0: want a timeout naming rank 2")
	require.ErrorContains(t, errs[0], "rank 2", "rank 0: want a timeout naming rank 2")
}

func TestCollectiveMissingRankTimesOutOnStream(t *testing.T) {
	const D = 3
	rt := newRuntime(t, D, 200*time.Millisecond)
	bufs := make([]runtime.Tensor, D)
	mustAll(t, onAll(rt, func(d *Device) error {
		var err error
		bufs[d.rank], err = upload(d, ir.Symmetric, ir.F32, []float64{1, 2}, 2)
		return err
	}))
	errs := onAll(rt, func(d *Device) error {
		if d.rank == 1 {
			return nil
		}
		t := bufs[d.rank]
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceSum, In: t, Out: t}, nil); err != nil {
			return err
		}
		return d.DefaultStream().Synchronize()
	})
	for _, r := range []int{0, 2} {
		assert.ErrorContains(t, errs[r], "timed out", "rank %d: want a timeout naming rank 1", r)
		assert.ErrorContains(t, errs[r], "waiting for rank 1", "rank %d: want a timeout naming rank 1", r)
	}
	mustAll(t, onAll(rt, func(d *Device) error { return d.Free(bufs[d.rank].Buf) }))
}

// Collectives that disagree across ranks fail on every rank, naming them.
func TestCollectiveMismatchIsReported(t *testing.T) {
	const D = 2
	rt := newRuntime(t, D, 2*time.Second)
	bufs := make([]runtime.Tensor, D)
	mustAll(t, onAll(rt, func(d *Device) error {
		var err error
		bufs[d.rank], err = upload(d, ir.Symmetric, ir.F32, []float64{1, 2, 3, 4}, 4)
		return err
	}))
	errs := onAll(rt, func(d *Device) error {
		t := bufs[d.rank]
		red := ir.ReduceSum
		if d.rank == 1 {
			red = ir.ReduceMax
			t.Shape = []int64{2}
		}
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: red, In: t, Out: t}, nil); err != nil {
			return err
		}
		return d.DefaultStream().Synchronize()
	})
	for r, err := range errs {
		assert.ErrorContains(t, err, "disagree", "rank %d: want a mismatch naming the ranks", r)
		assert.ErrorContains(t, err, "rank 1: all_reduce", "rank %d: want a mismatch naming the ranks", r)
	}
	mustAll(t, onAll(rt, func(d *Device) error { return d.Free(bufs[d.rank].Buf) }))
}

func TestCollectiveBadCalls(t *testing.T) {
	rt := newRuntime(t, 2, time.Second)
	d := rt.devices[0]
	g, _ := d.Alloc(64, ir.Global)
	defer d.Free(g)
	t4 := tensorOf(g, ir.F32, 4)
	cases := []struct {
		call runtime.CollectiveCall
		want string
	}{
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoCopyEngine, In: t4, Out: t4}, "no algorithm"},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, ReduceOp: ir.ReduceAvg, In: tensorOf(g, ir.I32, 4), Out: tensorOf(g, ir.I32, 4)}, "avg needs a float"},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, ReduceOp: ir.ReduceOp(99), In: t4, Out: t4}, "unknown reduce op"},
		{runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoNCCL, In: t4, Out: t4}, "output shape"},
		{runtime.CollectiveCall{Op: ir.OpBroadcast, Algo: ir.AlgoNCCL, Root: 2, In: t4, Out: t4}, "root 2 out of range"},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, In: tensorOf(g, ir.F32, 17), Out: t4}, "reaches byte"},
		{runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoNCCL, Axis: 0, ConcatAxis: 0, In: t4, Out: t4}, "both 0"},
		{runtime.CollectiveCall{Op: ir.OpSend, In: t4, Out: t4}, "not a collective"},
	}
	for _, c := range cases {
		err := d.Collective(&c.call, nil)
		assert.ErrorContains(t, err, c.want, "%s %s", c.call.Op, c.call.Algo)
		// A breach of the shared contract reads exactly as Resolve says it
		// (runtime/cuda's TestPlanSpeaksTheSharedContract asks the same).
		if _, want := c.call.Resolve(2); want != nil && strings.Contains(want.Error(), c.want) {
			assert.EqualError(t, err, "rank 0: "+want.Error())
		}
	}
}

// A collective that reads its input remotely refuses a contiguous view
// (this rank's mapping of every shard, which peers cannot address) and
// says what the buffer is: never "global" for a symmetric view.
func TestRemoteReadOfAContiguousViewSaysWhatItIs(t *testing.T) {
	const D = 2
	rt := newRuntime(t, D, 5*time.Second)
	errs := onAll(rt, func(d *Device) error {
		b, err := d.Alloc(16, ir.Symmetric)
		if err != nil {
			return err
		}
		view, err := d.ContiguousView(b)
		if err != nil {
			return err
		}
		out, err := d.Alloc(int64(D)*int64(view.Size()), ir.Global)
		if err != nil {
			return err
		}
		in := runtime.Tensor{Buf: view, DType: ir.F32, Shape: []int64{view.Size() / 4}}
		c := &runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, In: in, Out: runtime.Tensor{Buf: out, DType: ir.F32, Shape: in.Shape}}
		err = d.Collective(c, d.DefaultStream())
		return errors.Join(err, d.Free(out), d.Free(b))
	})
	for r, err := range errs {
		if assert.ErrorContains(t, err, "is the contiguous view of every rank's shard", "rank %d: want an error naming the contiguous view", r) {
			assert.NotContains(t, err.Error(), "global", "rank %d: the contiguous view is no global buffer", r)
		}
	}
}
