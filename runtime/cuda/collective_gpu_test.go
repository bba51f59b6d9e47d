package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	_ "github.com/hirlab/hir/runtime/sim"
)

// Multi-process collective tests: each rank runs every case on its GPU and
// compares with the CPU runtime (sim), which every rank runs in-process
// over all ranks' inputs (it knows them: inputs come from seeds). Outputs
// are poisoned before each call, calls are enqueued back to back with
// fresh inputs (no host synchronisation between them), and every call's
// output is checked. Failures print as
//
//	FAIL all_reduce algo=two_shot bf16 [1003] op=sum iter 7: element 12: got 0x3f80 want 0x3f81 (...)
//
// one line per failing case, then a summary line per rank.

func init() {
	scenarios["coll"] = collScenario
	scenarios["coll-big"] = collBigScenario
	scenarios["coll-missing"] = collMissingScenario
	scenarios["coll-mismatch"] = collMismatchScenario
	scenarios["coll-p2p"] = collP2PScenario
}

// needCollGPUs skips unless n GPUs are here and HIR_COLL_TESTS=1:
// scripts/device-run.sh runs these in a step of their own, with their own
// time budget, rather than inside the package's whole run.
func needCollGPUs(t testing.TB, n int) {
	t.Helper()
	needGPUs(t, n)
	if os.Getenv("HIR_COLL_TESTS") != "1" {
		t.Skip("collective tests run with HIR_COLL_TESTS=1 (scripts/device-run.sh sets it)")
	}
}

func TestCollectives2(t *testing.T) {
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll"))
}

func TestCollectives4(t *testing.T) {
	needCollGPUs(t, 4)
	checkRanks(t, runRanks(t, 4, "coll"))
}

func TestCollectivesOver1GiB(t *testing.T) {
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll-big"))
}

func TestCollectiveMissingRankTimesOut(t *testing.T) {
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll-missing"))
}

func TestCollectiveMismatchedShapes(t *testing.T) {
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll-mismatch"))
}

func TestSendRecv(t *testing.T) {
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll-p2p"))
}

// openColl opens the rank with a short timeout, so a hang shows quickly.
func openColl(timeout time.Duration) (*Runtime, *Device, error) {
	// auto is checked against the compiled-in choices, which are bit for
	// bit one_shot's results; a measured table (hirrun bench) may pick
	// ring or NCCL, whose float sums round otherwise. Its choosing is
	// tested on the CPU (autotable_test.go).
	os.Setenv(autotable.AutoTableEnv, "off")
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	crt := rt.(*Runtime)
	return crt, crt.dev, nil
}

// collCase is one collective call, with shapes as the ranks see them.
type collCase struct {
	op        ir.Opcode
	algo      ir.Algo
	red       ir.ReduceOp
	dt        ir.DType
	root      int
	axis, cat int
	in, out   []int64
	iters     int
	alias     bool // the output is the input (in-place)
	symOut    bool // the output is symmetric though the algorithm does not write it remotely
}

func (c collCase) String() string {
	s := fmt.Sprintf("%s algo=%s %s in=%v out=%v", c.op, c.algo, c.dt, c.in, c.out)
	if c.red != ir.ReduceUnset {
		s += " op=" + c.red.String()
	}
	if c.op == ir.OpBroadcast || c.op == ir.OpReduce || c.op == ir.OpGather || c.op == ir.OpScatter {
		s += fmt.Sprintf(" root=%d", c.root)
	}
	if c.axis != 0 || c.cat != 0 {
		s += fmt.Sprintf(" axis=%d concat=%d", c.axis, c.cat)
	}
	if c.alias {
		s += " in-place"
	}
	if c.symOut {
		s += " out=symmetric"
	}
	return s
}

func (c collCase) call() runtime.CollectiveCall {
	return runtime.CollectiveCall{Op: c.op, Algo: c.algo, ReduceOp: c.red, Root: c.root, Axis: c.axis, ConcatAxis: c.cat}
}

// mems: symmetric where the algorithm (as called) touches the tensor
// remotely, else global, so the rules are what the test relies on; nccl
// and ring cases get global memory on purpose.
func (c collCase) mems() (in, out ir.MemoryType) {
	acc, _ := ir.LookupRule(c.op, c.algo)
	in, out = ir.Global, ir.Global
	if acc.ReadsInput || c.alias {
		in = ir.Symmetric
	}
	if acc.WritesOutput || c.alias || c.symOut {
		out = ir.Symmetric
	}
	if c.algo == ir.AlgoAuto && c.op == ir.OpAllReduce {
		out = ir.Symmetric // lets auto pick two_shot for large tensors
	}
	return in, out
}

func scaledShape(s []int64, axis int, k int64) []int64 {
	out := append([]int64(nil), s...)
	out[axis] *= k
	return out
}

// collCases is the matrix each world size runs.
func collCases(D int) []collCase {
	var cs []collCase
	d := int64(D)
	flat := [][]int64{{1}, {1003}, {131072}, {65541}} // 131072 bf16: the largest LL all_reduce (256 KiB)
	// all_reduce: every algorithm x dtype x reduce op at an awkward size,
	// then sizes for sum, and in-place.
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoTwoShot, ir.AlgoRing, ir.AlgoAuto, ir.AlgoNCCL, ir.AlgoLL} {
		for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.F16, ir.F64, ir.I32, ir.I64} {
			for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMax, ir.ReduceMin, ir.ReduceAvg, ir.ReduceProd} {
				if red == ir.ReduceAvg && !dt.IsFloat() {
					continue
				}
				cs = append(cs, collCase{op: ir.OpAllReduce, algo: algo, red: red, dt: dt, in: []int64{1003}, out: []int64{1003}, iters: 8})
			}
		}
		for _, dt := range []ir.DType{ir.F32, ir.BF16} {
			for _, sh := range flat {
				cs = append(cs, collCase{op: ir.OpAllReduce, algo: algo, red: ir.ReduceSum, dt: dt, in: sh, out: sh, iters: 100})
			}
		}
		if algo != ir.AlgoNCCL {
			cs = append(cs, collCase{op: ir.OpAllReduce, algo: algo, red: ir.ReduceSum, dt: ir.BF16, in: []int64{4099}, out: []int64{4099}, iters: 20, alias: true})
		}
	}
	// The ring over several segments per block (many more with a small
	// HIR_COLL_RING_SEG): all_reduce at an odd size, in place; and
	// reduce_scatter whose chunk r lies off 16 bytes on odd ranks (those
	// run the scalar path, the others vectors, through the same staging).
	cs = append(cs, collCase{op: ir.OpAllReduce, algo: ir.AlgoRing, red: ir.ReduceSum, dt: ir.BF16, in: []int64{3_000_017}, out: []int64{3_000_017}, iters: 4},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoRing, red: ir.ReduceAvg, dt: ir.BF16, in: []int64{1_000_003}, out: []int64{1_000_003}, iters: 4, alias: true},
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoRing, red: ir.ReduceSum, dt: ir.F32, in: []int64{1_000_003 * d}, out: []int64{1_000_003}, iters: 4})
	// reduce_scatter (copy_engine in place too: the peers' pulls end
	// before any rank writes its output over its input).
	cs = append(cs, collCase{op: ir.OpReduceScatter, algo: ir.AlgoCopyEngine, red: ir.ReduceSum, dt: ir.BF16, in: []int64{1003 * d}, out: []int64{1003}, iters: 20, alias: true},
		// 4 MB a rank: in chunks with HIR_COLL_RS_CE_CHUNK=1048576 (four
		// and a tail), whole by default
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoCopyEngine, red: ir.ReduceSum, dt: ir.F32, in: []int64{1_000_003 * d}, out: []int64{1_000_003}, iters: 4})
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoRing, ir.AlgoCopyEngine, ir.AlgoAuto, ir.AlgoNCCL, ir.AlgoLL} {
		for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.F16, ir.I32} {
			for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMax, ir.ReduceAvg} {
				if red == ir.ReduceAvg && !dt.IsFloat() {
					red = ir.ReduceMin
				}
				cs = append(cs, collCase{op: ir.OpReduceScatter, algo: algo, red: red, dt: dt, in: []int64{1003 * d}, out: []int64{1003}, iters: 8})
			}
		}
		for _, sh := range [][]int64{{1}, {65541}, {3, 5}} {
			axis := len(sh) - 1
			cs = append(cs, collCase{op: ir.OpReduceScatter, algo: algo, red: ir.ReduceSum, dt: ir.BF16, axis: axis, in: scaledShape(sh, axis, d), out: sh, iters: 100})
		}
	}
	// all_gather.
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoRing, ir.AlgoCopyEngine, ir.AlgoAuto, ir.AlgoNCCL, ir.AlgoLL} {
		for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.I64, ir.Bool} {
			for _, sh := range [][]int64{{1}, {1003}, {65541}, {3, 5}} {
				axis := len(sh) - 1
				iters := 20
				if dt == ir.BF16 {
					iters = 100
				}
				cs = append(cs, collCase{op: ir.OpAllGather, algo: algo, dt: dt, axis: axis, in: sh, out: scaledShape(sh, axis, d), iters: iters})
				if algo == ir.AlgoCopyEngine {
					// A symmetric output: copy_engine pushes into the peers'.
					cs = append(cs, collCase{op: ir.OpAllGather, algo: algo, dt: dt, axis: axis, in: sh, out: scaledShape(sh, axis, d), iters: iters, symOut: true})
				}
			}
		}
	}
	// all_to_all: split axis 1 concatenated on 0, and the reverse.
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoAuto, ir.AlgoNCCL, ir.AlgoLL} {
		for _, dt := range []ir.DType{ir.F32, ir.BF16} {
			cs = append(cs, collCase{op: ir.OpAllToAll, algo: algo, dt: dt, axis: 1, cat: 0, in: []int64{4, 3 * d}, out: []int64{4 * d, 3}, iters: 50})
			cs = append(cs, collCase{op: ir.OpAllToAll, algo: algo, dt: dt, axis: 0, cat: 1, in: []int64{7 * d, 3}, out: []int64{7, 3 * d}, iters: 50})
			cs = append(cs, collCase{op: ir.OpAllToAll, algo: algo, dt: dt, axis: 0, cat: 1, in: []int64{1001 * d, 1}, out: []int64{1001, d}, iters: 20})
		}
	}
	// rooted collectives.
	for _, algo := range []ir.Algo{ir.AlgoOneShot, ir.AlgoNCCL} {
		for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.I32} {
			for _, root := range []int{0, D - 1} {
				cs = append(cs,
					collCase{op: ir.OpBroadcast, algo: algo, dt: dt, root: root, in: []int64{1003}, out: []int64{1003}, iters: 20},
					collCase{op: ir.OpReduce, algo: algo, red: ir.ReduceSum, dt: dt, root: root, in: []int64{1003}, out: []int64{1003}, iters: 20},
					collCase{op: ir.OpGather, algo: algo, dt: dt, root: root, in: []int64{1003}, out: []int64{1003 * d}, iters: 20},
					collCase{op: ir.OpScatter, algo: algo, dt: dt, root: root, in: []int64{1003 * d}, out: []int64{1003}, iters: 20},
					collCase{op: ir.OpGather, algo: algo, dt: dt, root: root, axis: 1, in: []int64{3, 5}, out: []int64{3, 5 * d}, iters: 10},
				)
			}
		}
	}
	// ll: broadcast from every root, bytes that are no whole line (bool,
	// 3 elements), a reduce_scatter whose output overlaps the input (staged
	// first), and an all_gather across a strided axis of
	// odd bytes.
	for root := 0; root < D; root++ {
		cs = append(cs, collCase{op: ir.OpBroadcast, algo: ir.AlgoLL, dt: ir.BF16, root: root, in: []int64{1003}, out: []int64{1003}, iters: 50},
			collCase{op: ir.OpBroadcast, algo: ir.AlgoLL, dt: ir.Bool, root: root, in: []int64{3}, out: []int64{3}, iters: 20})
	}
	cs = append(cs,
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.BF16, in: []int64{1003 * d}, out: []int64{1003}, iters: 20, alias: true},
		// Above Tuning.LLTwoShotMin: two hops on more than two ranks.
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.F32, in: []int64{200003}, out: []int64{200003}, iters: 10, alias: true},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceMax, dt: ir.BF16, in: []int64{300001}, out: []int64{300001}, iters: 10},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceAvg, dt: ir.F16, in: []int64{524288}, out: []int64{524288}, iters: 10},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.Bool, axis: 1, in: []int64{5, 3}, out: []int64{5, 3 * d}, iters: 20},
		collCase{op: ir.OpAllToAll, algo: ir.AlgoLL, dt: ir.BF16, axis: 1, cat: 0, in: []int64{5, 3 * d}, out: []int64{5 * d, 3}, iters: 20})
	// ll in LL128 lines (pieces between Tuning.LL128Min and LLBulkMin;
	// HIR_COLL_LL128_MIN=0 sends every LL-lines case above so too) at
	// odd sizes (tails inside a line and inside a lane's 16 bytes),
	// strided blocks and in place; the all_reduces of more than 200 KiB
	// go in two hops on more than two ranks.
	cs = append(cs,
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.BF16, in: []int64{70_001 * d}, out: []int64{70_001}, iters: 6, alias: true},
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceAvg, dt: ir.F32, axis: 1, in: []int64{3, 10_003 * d}, out: []int64{3, 10_003}, iters: 6},
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceMin, dt: ir.F64, in: []int64{12_345 * d}, out: []int64{12_345}, iters: 6},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.BF16, in: []int64{40_003}, out: []int64{40_003}, iters: 6},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceAvg, dt: ir.F32, in: []int64{30_001}, out: []int64{30_001}, iters: 6, alias: true},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceMax, dt: ir.F64, in: []int64{20_000}, out: []int64{20_000}, iters: 6},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.I64, in: []int64{100_003}, out: []int64{100_003}, iters: 6, alias: true},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoOneShot, red: ir.ReduceSum, dt: ir.BF16, in: []int64{100_001}, out: []int64{100_001}, iters: 6},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.F32, in: []int64{30_001}, out: []int64{30_001 * d}, iters: 6},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.BF16, axis: 1, in: []int64{3, 20_003}, out: []int64{3, 20_003 * d}, iters: 6},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.Bool, in: []int64{70_001}, out: []int64{70_001 * d}, iters: 6},
		collCase{op: ir.OpAllToAll, algo: ir.AlgoLL, dt: ir.BF16, axis: 0, cat: 1, in: []int64{20_003 * d, 3}, out: []int64{20_003, 3 * d}, iters: 6},
		collCase{op: ir.OpBroadcast, algo: ir.AlgoLL, dt: ir.BF16, root: D - 1, in: []int64{50_001}, out: []int64{50_001}, iters: 6})
	// ll in bulk (pieces above Tuning.LLBulkMin; HIR_COLL_LL_BULK_MIN=-1
	// sends every case above in bulk too) at odd sizes, strided blocks and
	// in place; two_shot's first hop in bulk (TwoShotBulk).
	cs = append(cs,
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.BF16, in: []int64{1_500_007 * d}, out: []int64{1_500_007}, iters: 4},
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceAvg, dt: ir.F32, axis: 1, in: []int64{3, 100_003 * d}, out: []int64{3, 100_003}, iters: 4},
		collCase{op: ir.OpReduceScatter, algo: ir.AlgoLL, red: ir.ReduceMax, dt: ir.BF16, in: []int64{600_001 * d}, out: []int64{600_001}, iters: 4, alias: true},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceSum, dt: ir.BF16, in: []int64{1_500_001}, out: []int64{1_500_001}, iters: 4},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceAvg, dt: ir.F32, in: []int64{700_001}, out: []int64{700_001}, iters: 4, alias: true},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoLL, red: ir.ReduceProd, dt: ir.I32, in: []int64{400_003}, out: []int64{400_003}, iters: 4},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.F32, in: []int64{300_001}, out: []int64{300_001 * d}, iters: 4},
		collCase{op: ir.OpAllGather, algo: ir.AlgoLL, dt: ir.BF16, axis: 1, in: []int64{3, 100_003}, out: []int64{3, 100_003 * d}, iters: 4},
		collCase{op: ir.OpAllToAll, algo: ir.AlgoLL, dt: ir.BF16, axis: 0, cat: 1, in: []int64{200_003 * d, 3}, out: []int64{200_003, 3 * d}, iters: 4},
		collCase{op: ir.OpAllToAll, algo: ir.AlgoLL, dt: ir.F32, axis: 1, cat: 0, in: []int64{1000, 150 * d}, out: []int64{1000 * d, 150}, iters: 4},
		collCase{op: ir.OpBroadcast, algo: ir.AlgoLL, dt: ir.BF16, root: D - 1, in: []int64{1_000_003}, out: []int64{1_000_003}, iters: 4},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoTwoShot, red: ir.ReduceSum, dt: ir.BF16, in: []int64{3_000_017}, out: []int64{3_000_017}, iters: 4},
		collCase{op: ir.OpAllReduce, algo: ir.AlgoTwoShot, red: ir.ReduceMin, dt: ir.F32, in: []int64{1_000_003}, out: []int64{1_000_003}, iters: 4, alias: true})
	// ll runs only up to its size limit (ir.AlgoFits).
	kept := cs[:0]
	for _, c := range cs {
		es := int64(c.dt.Size())
		if ir.AlgoFits(c.op, c.algo, ir.Product(c.in)*es, ir.Product(c.out)*es, D) == nil {
			kept = append(kept, c)
		}
	}
	return kept
}

// collInput is rank r's input of input set k of case c.
func collInput(c collCase, k, r int) *host.Array {
	seed := uint64(k*1000003+r*7919) ^ uint64(len(c.String()))*2654435761
	return host.Random(c.dt, c.in, seed)
}

// poisonByte fills outputs before a call: NaN for floats, -1 for ints.
const poisonByte = 0xff

// simResults runs case c on the CPU runtime over every rank's inputs and
// returns each rank's output.
func simResults(c collCase, inputs []*host.Array) ([][]byte, error) {
	D := len(inputs)
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: D, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	inMem, outMem := c.mems()
	outs := make([][]byte, D)
	errs := make([]error, D)
	var wg sync.WaitGroup
	for r := 0; r < D; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				dev, err := rt.Device(r)
				if err != nil {
					return err
				}
				es := int64(c.dt.Size())
				inB, err := dev.Alloc(ir.Product(c.in)*es, inMem)
				if err != nil {
					return err
				}
				in := runtime.Tensor{Buf: inB, DType: c.dt, Shape: c.in}
				out := runtime.Tensor{Buf: inB, DType: c.dt, Shape: c.out}
				if !c.alias {
					outB, err := dev.Alloc(ir.Product(c.out)*es, outMem)
					if err != nil {
						return err
					}
					out.Buf = outB
				}
				s := dev.DefaultStream()
				if !c.alias {
					if err := dev.CopyFromHost(out, bytes.Repeat([]byte{poisonByte}, int(out.Bytes())), s); err != nil {
						return err
					}
				}
				if err := dev.CopyFromHost(in, inputs[r].Data, s); err != nil {
					return err
				}
				call := c.call()
				call.Algo = simAlgo(c)
				call.In, call.Out = in, out
				if err := dev.Collective(&call, s); err != nil {
					return err
				}
				outs[r] = make([]byte, out.Bytes())
				if err := dev.CopyToHost(outs[r], out, s); err != nil {
					return err
				}
				return s.Synchronize()
			}()
		}(r)
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// simAlgo is the algorithm whose CPU result the GPU must match: the same
// one, except auto (the GPU may pick two_shot: the same rank order).
func simAlgo(c collCase) ir.Algo {
	if c.algo == ir.AlgoAuto {
		return ir.AlgoOneShot
	}
	return c.algo
}

// exactFor says whether the GPU must match the CPU bit for bit; NCCL's
// float sums run in its own order, so those are compared with a tolerance.
func exactFor(c collCase) bool {
	if c.algo != ir.AlgoNCCL || !c.dt.IsFloat() {
		return true
	}
	return c.red == ir.ReduceUnset || c.red == ir.ReduceMax || c.red == ir.ReduceMin
}

func collTolerance(dt ir.DType) float64 {
	switch dt {
	case ir.BF16:
		return 2e-2
	case ir.F16:
		return 4e-3
	case ir.F32:
		return 1e-5
	}
	return 1e-12
}

// compareColl compares a GPU output with the CPU's: bits (NaNs equal as
// NaNs), or values within the dtype's tolerance.
func compareColl(c collCase, got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes, want %d", len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return nil
	}
	es := c.dt.Size()
	n := len(got) / es
	ga := &host.Array{DType: c.dt, Shape: []int64{int64(n)}, Data: got}
	wa := &host.Array{DType: c.dt, Shape: []int64{int64(n)}, Data: want}
	exact := exactFor(c)
	bad, first := 0, -1
	for i := 0; i < n; i++ {
		if bytes.Equal(got[i*es:(i+1)*es], want[i*es:(i+1)*es]) {
			continue
		}
		g, w := ga.At(int64(i)), wa.At(int64(i))
		if g != g && w != w {
			continue
		}
		if !exact && math.Abs(g-w) <= collTolerance(c.dt)*(1+math.Abs(w))*float64(4) {
			continue
		}
		bad++
		if first < 0 {
			first = i
		}
	}
	if bad == 0 {
		return nil
	}
	i := first
	return fmt.Errorf("%d of %d elements differ; first at %d: got %v (bits %x) want %v (bits %x)%s",
		bad, n, i, ga.At(int64(i)), got[i*es:(i+1)*es], wa.At(int64(i)), want[i*es:(i+1)*es], poisonNote(got[i*es:(i+1)*es]))
}

func poisonNote(b []byte) string {
	for _, x := range b {
		if x != poisonByte {
			return ""
		}
	}
	return " (still the poison: nothing was written there)"
}

// runCollCase runs case c iters times on the GPU, back to back, and checks
// every result. All ranks run the same cases in the same order.
func runCollCase(d *Device, c collCase) error {
	D, rank := d.WorldSize(), d.Rank()
	const sets = 4
	want := make([][][]byte, sets)
	ins := make([][]byte, sets)
	for k := 0; k < sets; k++ {
		inputs := make([]*host.Array, D)
		for r := range inputs {
			inputs[r] = collInput(c, k, r)
		}
		ins[k] = inputs[rank].Data
		res, err := simResults(c, inputs)
		if err != nil {
			return fmt.Errorf("CPU reference: %w", err)
		}
		want[k] = res
	}
	inMem, outMem := c.mems()
	es := int64(c.dt.Size())
	inB, err := d.Alloc(ir.Product(c.in)*es, inMem)
	if err != nil {
		return err
	}
	defer d.Free(inB)
	in := runtime.Tensor{Buf: inB, DType: c.dt, Shape: c.in}
	out := runtime.Tensor{Buf: inB, DType: c.dt, Shape: c.out}
	if !c.alias {
		outB, err := d.Alloc(ir.Product(c.out)*es, outMem)
		if err != nil {
			return err
		}
		defer d.Free(outB)
		out.Buf = outB
	}
	s := d.DefaultStream()
	outPtr, _ := d.Span(out, "test output")
	got := make([][]byte, c.iters)
	for it := 0; it < c.iters; it++ {
		if !c.alias {
			if err := d.WithCtx(func() error {
				return d.Drv.MemsetD8Async.Call4(uintptr(outPtr), poisonByte, uintptr(out.Bytes()), d.Def.H)
			}); err != nil {
				return err
			}
		}
		if err := d.CopyFromHost(in, ins[it%sets], s); err != nil {
			return err
		}
		call := c.call()
		call.In, call.Out = in, out
		if err := d.Collective(&call, s); err != nil {
			return err
		}
		got[it] = make([]byte, out.Bytes())
		if err := d.CopyToHost(got[it], out, s); err != nil {
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	var errs []string
	for it := range got {
		if err := compareColl(c, got[it], want[it%sets][rank]); err != nil {
			errs = append(errs, fmt.Sprintf("iter %d (input set %d): %v", it, it%sets, err))
		}
	}
	if len(errs) > 0 {
		if len(errs) > 3 {
			errs = append(errs[:3], fmt.Sprintf("... %d of %d iterations wrong", len(errs), c.iters))
		}
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func collScenario() error {
	rt, d, err := openColl(20 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	rank := d.Rank()
	ver, nerr := coll.NCCLVersion()
	if rank == 0 {
		fmt.Printf("rank 0: NCCL: %s %v\n", ver, nerr)
	}
	cases := collCases(d.WorldSize())
	failed := 0
	byOp := map[string][2]int{}
	start := time.Now()
	only := os.Getenv("HIR_COLL_CASES") // run only the cases whose description contains it
	for _, c := range cases {
		// NCCL refuses two ranks on one GPU (HIR_CUDA_SHARE_GPUS=1).
		skipNCCL := nerr != nil || SharingGPUs()
		if c.algo == ir.AlgoNCCL && skipNCCL || only != "" && !strings.Contains(c.String(), only) {
			continue
		}
		key := fmt.Sprintf("%s algo=%s", c.op, c.algo)
		cnt := byOp[key]
		cnt[0]++
		if err := runCollCase(d, c); err != nil {
			failed++
			cnt[1]++
			fmt.Printf("FAIL rank %d: %s: %v\n", rank, c, err)
			if ferr := d.FaultErr(); ferr != nil {
				// A timed-out kernel leaves the pads out of step: stop here.
				return fmt.Errorf("stopping after a collective fault: %v", ferr)
			}
		}
		byOp[key] = cnt
	}
	for k, v := range byOp {
		if rank == 0 || v[1] > 0 {
			fmt.Printf("rank %d: %-32s %3d cases, %d failed\n", rank, k, v[0], v[1])
		}
	}
	fmt.Printf("rank %d: %d cases in %v, %d failed\n", rank, len(cases), time.Since(start).Round(time.Millisecond), failed)
	if kc := KernelCache(); rank == 0 {
		// what a fresh machine's first run spends compiling
		fmt.Printf("rank 0: kernel cache: %d compiles in %.1f s, %d from disk, %d written (%s)\n", kc.Compiles, kc.CompileTime, kc.DiskHits, kc.DiskWrites, kc.Dir)
	}
	if err := d.ReleaseComm(); err != nil {
		return err
	}
	if st := d.Stats(); st.Allocations != 0 || st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 {
		return fmt.Errorf("leaked after ReleaseComm: %+v", st)
	}
	if failed > 0 {
		return fmt.Errorf("%d cases failed", failed)
	}
	return nil
}
