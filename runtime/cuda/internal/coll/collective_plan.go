package coll

import (
	"context"
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/store"
)

// Planning a collective: validating the call, resolving algo=auto (the
// measured table, then the compiled-in choice), the plan cache, and the
// ranks' agreement on each distinct call.

// collPlan is one collective, validated, with its algorithm resolved.
type CollPlan struct {
	op           ir.Opcode
	algo         ir.Algo // as called
	Impl         ir.Algo // what runs: one_shot, two_shot, ring, copy_engine, nccl
	reduce       ir.ReduceOp
	root         int
	axis, concat int
	dt           ir.DType
	es           int64
	in, out      runtime.Tensor
	inB, outB    *gpu.Buffer
	inPtr        uint64 // local addresses
	outPtr       uint64
	access       ir.RemoteAccess // of impl
	ll           bool            // all_reduce one_shot through the LL kernel (small tensors)
	proto        llProto         // how an LL launch of this call moves its pieces (llProtocol), by its sizes alone
	cePush       bool            // copy_engine pushes into peers' (symmetric) outputs rather than pulls
	twoShotCE    bool            // two_shot's all-gather half through the copy engines
	twoShotBulk  bool            // two_shot's first hop in bulk (launchBulk2), no barriers
	a2aCE        bool            // one_shot's all_to_all pushes through the copy engines (runAllToAllCE)
	ring         RingGeom        // all_reduce and reduce_scatter ring: the geometry
	Desc         string          // what every rank must agree on
	what         string          // for messages
}

// The compiled-in thresholds (Tuning, knobs.go, sets them per device):
// AutoOneShotMax is the largest all_reduce auto runs one_shot for
// without a measured table; above it auto runs two_shot where the output
// is symmetric (one_shot reads the whole input of every peer, two_shot a
// 1/D share). Measured on 2 × H200: up to 256 KiB one_shot runs as the
// LL kernel in 3.7-5.5 µs of GPU time, two_shot in 8-11 µs; from 512 KiB
// to 1 MiB they are within a microsecond (HIR_COLL_AUTO_ONESHOT_MAX,
// bytes; default llCapBytes).
//
// LLMax is the largest all_reduce (bytes) one_shot runs through the LL
// kernel: one pass, no barrier, each 8 bytes of data stored with a flag
// into every peer's staging (HIR_COLL_LL_MAX, up to llCapBytes; 0 turns
// it off). Measured on 2 × H200, GPU time per call: 3.7 µs at 8 KiB,
// 4.1 at 64 KiB, 5.5 at 256 KiB, against 8.2, 10.5 and 10.9 µs for
// two_shot.

func (d *Comm) PlanCollective(c *runtime.CollectiveCall, graph bool) (*CollPlan, error) {
	D := d.Opts.WorldSize
	algo := c.Algo
	p := &CollPlan{op: c.Op, algo: algo, reduce: c.ReduceOp, root: c.Root, axis: c.Axis, concat: c.ConcatAxis, in: c.In, out: c.Out}
	name := fmt.Sprintf("%s algo=%s", c.Op, algo)
	fail := func(format string, args ...any) (*CollPlan, error) {
		return nil, fmt.Errorf("cuda: rank %d: %s: %s", d.Opts.Rank, name, fmt.Sprintf(format, args...))
	}
	// Where the tensors lie first, then the contract both runtimes share.
	var err error
	if p.inB, err = d.Own(c.In.Buf); err != nil {
		return fail("input: %v", err)
	}
	if p.outB, err = d.Own(c.Out.Buf); err != nil {
		return fail("output: %v", err)
	}
	p.dt, p.es = c.In.DType, int64(c.In.DType.Size())
	if p.es == 0 {
		return fail("dtype %v has no size", p.dt)
	}
	if !c.In.IsContiguous() || !c.Out.IsContiguous() {
		return fail("input and output must be contiguous (got strides %v and %v); copy a strided view into a contiguous tensor first", c.In.Strides, c.Out.Strides)
	}
	if p.inPtr, err = d.Span(c.In, "collective input"); err != nil {
		return fail("%v", err)
	}
	if p.outPtr, err = d.Span(c.Out, "collective output"); err != nil {
		return fail("%v", err)
	}
	rc, err := c.Resolve(D)
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: %w", d.Opts.Rank, err)
	}
	p.reduce, p.root, p.axis, p.concat = rc.ReduceOp, rc.Root, rc.Axis, rc.ConcatAxis
	p.proto = d.llProtocol(p)
	p.Impl = d.resolveAlgo(p, graph)
	if err := ir.AlgoFits(c.Op, p.Impl, c.In.Bytes(), c.Out.Bytes(), D); err != nil {
		return fail("%v", err)
	}
	p.access = implAccess(c.Op, p.Impl)
	p.ll = c.Op == ir.OpAllReduce && p.Impl == ir.AlgoOneShot && useLL(p, d.Tune.LLMax)
	p.cePush = p.Impl == ir.AlgoCopyEngine && p.outB.Kind == gpu.KindSym && d.Tune.CEPush
	p.twoShotCE = c.Op == ir.OpAllReduce && p.Impl == ir.AlgoTwoShot && d.Tune.TwoShotCEMin > 0 && p.in.Bytes() >= d.Tune.TwoShotCEMin
	p.twoShotBulk = c.Op == ir.OpAllReduce && p.Impl == ir.AlgoTwoShot && !p.twoShotCE && d.Tune.TwoShotBulk
	p.a2aCE = c.Op == ir.OpAllToAll && p.Impl == ir.AlgoOneShot && d.Tune.AllToAllCEMin > 0 && p.in.Bytes() >= d.Tune.AllToAllCEMin && contiguousBlocks(p)
	if p.access.ReadsInput && p.inB.Kind != gpu.KindSym {
		return fail("it reads its input from peers, so the input must be this rank's shard of a symmetric buffer; buffer #%d is %v (%s)", p.inB.BufID, p.inB.MemType, kindName(p.inB.Kind))
	}
	if p.access.WritesOutput && p.outB.Kind != gpu.KindSym {
		return fail("it writes its output on peers, so the output must be this rank's shard of a symmetric buffer; buffer #%d is %v (%s)", p.outB.BufID, p.outB.MemType, kindName(p.outB.Kind))
	}
	describe := func(t runtime.Tensor, b *gpu.Buffer, remote bool) string {
		s := fmt.Sprint(t.Shape)
		if remote {
			s += fmt.Sprintf("@sym#%d+%d", b.Sym.Seq, t.Offset)
		}
		return s
	}
	p.Desc = fmt.Sprintf("%s algo=%s impl=%s %s in=%s out=%s op=%s root=%d axis=%d concat=%d", p.op, p.algo, p.Impl, p.dt,
		describe(c.In, p.inB, p.access.ReadsInput), describe(c.Out, p.outB, p.access.WritesOutput), p.reduce, p.root, p.axis, p.concat)
	if p.ll {
		p.Desc += " proto=ll"
	}
	if p.twoShotCE {
		p.Desc += " gather=ce"
	}
	runsLL := p.Impl == ir.AlgoLL || p.ll
	if runsLL && p.proto == protoLL128 {
		p.Desc += " proto=ll128"
	}
	if p.twoShotBulk || runsLL && p.proto == protoBulk {
		p.Desc += fmt.Sprintf(" proto=bulk/%d", d.Tune.BulkPortion)
		if c.Op == ir.OpAllReduce && bulkDirect(p) {
			p.Desc += fmt.Sprintf(" hop2@sym#%d+%d", p.outB.Sym.Seq, c.Out.Offset)
		}
	}
	if p.cePush {
		p.Desc += fmt.Sprintf(" push@sym#%d+%d", p.outB.Sym.Seq, c.Out.Offset)
	}
	if p.a2aCE {
		p.Desc += " push=ce"
	}
	if p.Impl == ir.AlgoRing && p.op != ir.OpAllGather {
		p.ring = d.Tune.Ring()
		p.Desc += " ring=" + p.ring.String()
	}
	return p, nil
}

// implAccess is what algorithm impl of op touches remotely as this
// runtime runs it: the rules table, except the ring, which goes through
// its own staging.
func implAccess(op ir.Opcode, impl ir.Algo) ir.RemoteAccess {
	access, _ := ir.LookupRule(op, impl)
	if impl == ir.AlgoRing && (op == ir.OpAllReduce || op == ir.OpReduceScatter) {
		access = ir.RemoteAccess{}
	}
	return access
}

// useLL says whether all_reduce one_shot runs as the LL kernel: up to
// llMax bytes (Tuning.LLMax), the output the input itself or apart from it (each thread
// reads its 8 bytes before it writes them), and reduce dtypes of 2, 4 or
// 8 bytes.
func useLL(p *CollPlan, llMax int64) bool {
	n := p.in.Bytes()
	if n > llMax || p.es < 2 || p.es > 8 {
		return false
	}
	return p.inPtr == p.outPtr || !overlaps(p.in, p.inB, p.out, p.outB)
}

func kindName(k gpu.BufKind) string {
	return [...]string{"a global allocation", "pinned host memory", "a symmetric shard", "a peer's shard", "a contiguous view"}[k]
}

// resolveAlgo picks what auto runs: the fastest algorithm the measured
// table (hirrun bench; autotable.go) ranks first for this collective,
// world size, dtype class and size — replayed from a graph where the call
// is being captured (graph) — whose symmetric-heap needs the operands
// meet, else the compiled-in choice (defaultAlgo).
func (d *Comm) resolveAlgo(p *CollPlan, graph bool) ir.Algo {
	if p.algo != ir.AlgoAuto {
		return p.algo
	}
	if t := d.State.Table; t != nil {
		for _, a := range t.RankedFor(p.op, d.Opts.WorldSize, p.dt, autotable.BenchBytes(p.op, p.in, p.out), graph) {
			if d.Fits(p, a) {
				return a
			}
		}
	}
	return d.DefaultAlgo(p, graph)
}

// llOneShotAbove: on more than two ranks, all_reduce runs one_shot rather
// than one-hop ll from here (bytes; from any size in a graph) to
// Tuning.LLTwoShotMin (DefaultAlgo).
const llOneShotAbove = 64 << 10

// agRingMax: on two ranks, an all_gather in bulk runs the ring up to this
// much output (bytes), one_shot past it (DefaultAlgo).
const agRingMax = 4 << 20

// a2aBulkLLMax: an all_to_all in bulk stays ll up to this much input
// (bytes), one_shot past it (DefaultAlgo).
const a2aBulkLLMax = 1 << 20

// arLLMax2: on two ranks, an all_reduce runs ll up to this much (bytes),
// one_shot past it (DefaultAlgo).
const arLLMax2 = 2 << 20

// defaultAlgo is the compiled-in choice, where no measured table has
// the call (graph: the call is being captured): ll where it fits (each
// rank sends each peer at most ir.LLMaxBytes; but one_shot for the
// copying collectives in bulk, for all_reduce on more than two ranks
// from llOneShotAbove, or any size in a graph, to where ll goes two
// hops, and two_shot where ll's two hops would go in bulk); past
// it, what the sweeps on 2 and 4 H200s (docs/bench/h200-x2.json, -x4.json)
// found fastest, wherever the operands allow it:
//   - all_reduce: on two ranks one_shot up to Tuning.AutoOneShotMax
//     (64 MiB; bulk two_shot was 7–13 % slower there); on more, the ring
//     from Tuning.AutoRingMin (64 MiB: 310 against two_shot's 331 µs on
//     4 GPUs); else two_shot (same rank-order result, 1/D of the data);
//   - reduce_scatter: one_shot on two ranks, the ring on more (32 MiB on
//     4 GPUs: 105 against 124 µs);
//   - all_gather of a symmetric input from Tuning.AutoCEMin bytes of
//     output (256 MiB): copy_engine;
//   - else one_shot.
func (d *Comm) DefaultAlgo(p *CollPlan, graph bool) ir.Algo {
	D := d.Opts.WorldSize
	if d.Fits(p, ir.AlgoLL) {
		// On more than two ranks, an all_reduce that ll still sends in one
		// hop (up to Tuning.LLTwoShotMin) carries the whole tensor to
		// every peer as LL lines, twice its bytes: one_shot was faster past
		// 64 KiB, and at every size in a graph (4 × H200, bf16,
		// docs/bench/h200-x4.json: 128 KiB 7.90 against 9.01 µs eager,
		// 6.82 against 7.05 in a graph; 256 KiB 10.51 against 11.79, 9.14
		// against 9.21; in a graph 16 KiB 4.70 against 5.24, 32 KiB 4.82
		// against 5.02; eager below 64 KiB ll won, 32 KiB 6.83 against
		// 7.41).
		n := p.in.Bytes()
		if p.op == ir.OpAllReduce && D > 2 && (n > llOneShotAbove || graph) && !d.llTwoShot(n) && d.Fits(p, ir.AlgoOneShot) {
			return ir.AlgoOneShot
		}
		// On more than two ranks, an all_reduce whose two hops ll sends in
		// bulk (chunks past LL128's): two_shot, the same hops with the
		// second straight into the peers' outputs (4 × H200, 4 MiB in a
		// graph: 29.6-29.7 against 32.9 µs; eager 31.5 each).
		if p.op == ir.OpAllReduce && D > 2 && d.llTwoShot(n) && p.proto == protoBulk && d.Fits(p, ir.AlgoTwoShot) {
			return ir.AlgoTwoShot
		}
		// On two ranks, an all_reduce past 2 MiB: one_shot (2 × H200, 4
		// MiB: 23.50 against ll's 24.64 µs eager, 22.23 against 22.50 in
		// a graph in docs/bench/h200-x2.json; 22.66 against 23.75 in a
		// graph in the sweep before it).
		if p.op == ir.OpAllReduce && D == 2 && n > arLLMax2 && d.Fits(p, ir.AlgoOneShot) {
			return ir.AlgoOneShot
		}
		// In bulk, ll's all_gather, all_to_all and broadcast move the data
		// twice (into the peer's staging, then out of it): one_shot's
		// stores straight into the peers' outputs beat them where
		// one_shot can run (measured on 2 × H200, docs/COLLECTIVES.md).
		if !p.op.Info().Reduces && p.proto == protoBulk && d.Fits(p, ir.AlgoOneShot) {
			// An all_gather on two ranks up to 4 MiB of output: the ring
			// (2 × H200, docs/bench/h200-x2.json, graph: 1 MiB 8.15
			// against 8.42 µs, 2 MiB 9.81 against 10.86, 4 MiB 13.87
			// against 14.55; eager within 1 % or faster).
			if p.op == ir.OpAllGather && D == 2 && p.out.Bytes() <= agRingMax && d.Fits(p, ir.AlgoRing) {
				return ir.AlgoRing
			}
			// An all_to_all of up to 1 MiB (in bulk only on two ranks):
			// ll still (2 × H200, docs/bench/h200-x2.json: 1 MiB 8.10
			// against one_shot's 8.73 µs in a graph, 8.94 against 9.60
			// eager; from 2 MiB within a few per cent either way, and
			// one_shot ahead from 8 MiB).
			if p.op == ir.OpAllToAll && p.in.Bytes() <= a2aBulkLLMax {
				return ir.AlgoLL
			}
			return ir.AlgoOneShot
		}
		return ir.AlgoLL
	}
	switch p.op {
	case ir.OpAllReduce:
		n := p.in.Bytes()
		switch {
		case D == 2 && n <= d.Tune.AutoOneShotMax && d.Fits(p, ir.AlgoOneShot):
			return ir.AlgoOneShot
		case D > 2 && d.Tune.AutoRingMin > 0 && n >= d.Tune.AutoRingMin:
			return ir.AlgoRing
		case d.Fits(p, ir.AlgoTwoShot):
			return ir.AlgoTwoShot
		case !d.Fits(p, ir.AlgoOneShot):
			return ir.AlgoRing // touches nothing of the tensors remotely
		}
	case ir.OpReduceScatter:
		if D > 2 || !d.Fits(p, ir.AlgoOneShot) {
			return ir.AlgoRing
		}
	case ir.OpAllGather:
		if d.Tune.AutoCEMin > 0 && p.out.Bytes() >= d.Tune.AutoCEMin && p.inB.Kind == gpu.KindSym {
			return ir.AlgoCopyEngine
		}
	}
	return ir.AlgoOneShot
}

// Tuning.CEPush says whether copy_engine pushes each rank's shard into
// the peers' outputs where those are symmetric (HIR_COLL_CE_PUSH=0:
// always pull through the contiguous view).
//
// Tuning.TwoShotCEMin is the smallest all_reduce two_shot runs with its
// all-gather half on the copy engines (HIR_COLL_TWO_SHOT_CE_MIN, bytes;
// 0: never; default 128 MiB). Measured on 2 × H200: 16 MiB 75 µs against
// 60 µs with SM stores, 256 MiB 776 against 799, 1 GiB 3024 against 3152
// (the copy engines' fixed cost, a barrier and a memcpy per peer, pays
// from about 100 MiB).
//
// Tuning.AutoCEMin is the smallest all_gather output auto sends through
// the copy engines (HIR_COLL_AUTO_CE_MIN, bytes; 0: never; default
// 256 MiB: on 2 and 4 H200s copy_engine was slower than one_shot up to
// 128 MiB and faster from 256).

// contiguousBlocks says whether every block an all_to_all moves is one
// contiguous range of its input and of its output (the split and concat
// axes are outermost where their extent is not 1), so one memcpy moves it.
func contiguousBlocks(p *CollPlan) bool {
	_, ls := BlockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
	_, ld := BlockLayout(p.out.Shape, p.concat, p.in.Shape[p.concat])
	return ls.Run == 0 && ld.Run == 0 && p.in.IsContiguous() && p.out.IsContiguous()
}

// Tuning.AllToAllCEMin is the smallest all_to_all (input bytes) one_shot
// runs through the copy engines where its blocks are contiguous
// (HIR_COLL_A2A_CE_MIN, bytes; 0: never; default 256 MiB). all_gather's
// copy_engine against one_shot on 2 × H200 (graph, µs): 256 MiB 379 vs
// 388, 512 MiB 748 vs 784, 1 GiB 1402 vs 1550, when one_shot's all_to_all
// at 512 MiB and 1 GiB lost to NCCL in a graph (791 vs 758, 1555 vs 1495).

// fits says whether algorithm algo can run p as auto's choice: op has it,
// the operands are symmetric where it touches them remotely, and NCCL
// loads where it is NCCL.
func (d *Comm) Fits(p *CollPlan, algo ir.Algo) bool {
	if _, ok := ir.LookupRule(p.op, algo); !ok || algo == ir.AlgoAuto {
		return false
	}
	acc := implAccess(p.op, algo)
	if acc.ReadsInput && p.inB.Kind != gpu.KindSym || acc.WritesOutput && p.outB.Kind != gpu.KindSym {
		return false
	}
	if algo == ir.AlgoNCCL {
		if _, err := NCCLVersion(); err != nil {
			return false
		}
	}
	if algo == ir.AlgoRing && p.op == ir.OpAllReduce && p.inPtr != p.outPtr && overlaps(p.in, p.inB, p.out, p.outB) {
		return false
	}
	if ir.AlgoFits(p.op, algo, p.in.Bytes(), p.out.Bytes(), d.Opts.WorldSize) != nil {
		return false
	}
	return true
}

// maxCachedPlans bounds the plan cache (it is emptied when full).
const maxCachedPlans = 1024

// planKey is a collective call as the plan cache knows it: everything
// planning reads, with shapes of up to maxKeyDims dimensions inline.
type PlanKey struct {
	op                 ir.Opcode
	algo               ir.Algo
	reduce             ir.ReduceOp
	root, axis, concat int
	in, out            tensorKey
	S                  *gpu.Stream
	graph              bool // planned while a capture was open (auto may choose otherwise)
}

const maxKeyDims = 8

type tensorKey struct {
	buf   runtime.Buffer
	off   int64
	dt    ir.DType
	nd    int
	shape [maxKeyDims]int64
}

// planKeyOf is c's cache key; ok is false for calls the cache does not
// hold (strided tensors, many dimensions).
func planKeyOf(c *runtime.CollectiveCall, s *gpu.Stream, graph bool) (k PlanKey, ok bool) {
	tk := func(t runtime.Tensor) (tensorKey, bool) {
		if t.Strides != nil || len(t.Shape) > maxKeyDims {
			return tensorKey{}, false
		}
		k := tensorKey{buf: t.Buf, off: t.Offset, dt: t.DType, nd: len(t.Shape)}
		copy(k.shape[:], t.Shape)
		return k, true
	}
	in, ok1 := tk(c.In)
	out, ok2 := tk(c.Out)
	if !ok1 || !ok2 {
		return k, false
	}
	return PlanKey{op: c.Op, algo: c.Algo, reduce: c.ReduceOp, root: c.Root, axis: c.Axis, concat: c.ConcatAxis, in: in, out: out, S: s, graph: graph}, true
}

// agree checks, on the first call of each distinct call, that every rank
// called the same collective with the same shapes and dtype (and, for
// tensors peers touch, the same place in the same symmetric allocation):
// the descriptors travel through the job's store. A rank that does not
// come is named after the timeout. Later calls of the same descriptor
// trust the check and only meet in the kernels.
func (d *Comm) agree(cs *CommState, p *CollPlan) error {
	world, rank := d.Opts.WorldSize, d.Opts.Rank
	if world == 1 {
		return nil
	}
	cs.Mu.Lock()
	done := cs.checked[p.Desc]
	n := cs.nchecks
	if !done {
		cs.nchecks++
	}
	cs.Mu.Unlock()
	if done {
		return nil
	}
	// Compile (or load) the kernels first, so the ranks leave the check
	// together rather than a compile apart (a kernel waits for its peers
	// only up to the timeout).
	if err := d.preloadKernels(cs, p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	raw, err := store.ExchangeAll(ctx, d.Opts.Store, fmt.Sprintf("cuda/coll/check/%d", n), rank, world, []byte(p.Desc), d.Opts.Timeout)
	if err != nil {
		// Nothing was launched, so the pads are still in step: not sticky.
		return fmt.Errorf("cuda: rank %d: %s: the ranks did not all arrive to check this call (new call #%d on this rank): %w; every rank must run the same collectives in the same order", rank, p.what, n, err)
	}
	var diff []string
	for r, b := range raw {
		if string(b) != p.Desc {
			diff = append(diff, fmt.Sprintf("rank %d called %s", r, b))
		}
	}
	if len(diff) > 0 {
		return fmt.Errorf("cuda: rank %d: %s: the ranks called different collectives: rank %d called %s; %s", rank, p.what, rank, p.Desc, strings.Join(diff, "; "))
	}
	cs.Mu.Lock()
	cs.checked[p.Desc] = true
	cs.Mu.Unlock()
	return nil
}
