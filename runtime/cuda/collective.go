package cuda

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/store"
)

// collPlan is one collective, validated, with its algorithm resolved.
type collPlan struct {
	op           ir.Opcode
	algo         ir.Algo // as called
	impl         ir.Algo // what runs: one_shot, two_shot, ring, copy_engine, nccl
	reduce       ir.ReduceOp
	root         int
	axis, concat int
	dt           ir.DType
	es           int64
	in, out      runtime.Tensor
	inB, outB    *buffer
	inPtr        uint64 // local addresses
	outPtr       uint64
	access       ir.RemoteAccess // of impl
	ll           bool            // all_reduce one_shot through the LL kernel (small tensors)
	cePush       bool            // copy_engine pushes into peers' (symmetric) outputs rather than pulls
	twoShotCE    bool            // two_shot's all-gather half through the copy engines
	ring         ringGeom        // all_reduce and reduce_scatter ring: the geometry
	desc         string          // what every rank must agree on
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

// collBlocks is the most blocks a collective kernel of this rank would
// launch: one per multiprocessor (override, Tuning.Blocks from
// HIR_COLL_BLOCKS, where > 0), at most the pads' maxBlocks. The ranks
// agree on the smallest (commReady), since block b of a rank meets block b
// of its peers.
func collBlocks(sms, override int) int {
	if override > 0 {
		return min(override, maxBlocks)
	}
	if sms <= 0 {
		return 32
	}
	return min(sms, maxBlocks)
}

const collThreads = 512

// grid is the grid for units of work (4 per thread before a second block
// is worth it), at most the agreed block count.
func (cs *commState) grid(units int64) uint32 {
	g := (units + collThreads*4 - 1) / (collThreads * 4)
	return uint32(max(1, min(g, int64(max(cs.blocks, 1)))))
}

// blockLayout is block k of extent ext along axis of a contiguous tensor
// of shape full: the run of elements per outer index and the pitch
// between runs; contiguous (run 0) when nothing lies outside the axis.
func blockLayout(full []int64, axis int, ext int64) (off1 int64, l lay) {
	outer := ir.Product(full[:axis])
	inner := ir.Product(full[axis+1:])
	run := ext * inner
	if outer == 1 {
		return run, lay{}
	}
	return run, lay{Run: run, Pitch: full[axis] * inner}
}

func (d *Device) planCollective(c *runtime.CollectiveCall) (*collPlan, error) {
	D := d.opts.WorldSize
	algo := c.Algo
	p := &collPlan{op: c.Op, algo: algo, reduce: c.ReduceOp, root: c.Root, axis: c.Axis, concat: c.ConcatAxis, in: c.In, out: c.Out}
	name := fmt.Sprintf("%s algo=%s", c.Op, algo)
	fail := func(format string, args ...any) (*collPlan, error) {
		return nil, fmt.Errorf("cuda: rank %d: %s: %s", d.opts.Rank, name, fmt.Sprintf(format, args...))
	}
	if !c.Op.IsCollective() {
		return fail("%s is not a collective", c.Op)
	}
	if _, ok := ir.LookupRule(c.Op, algo); !ok {
		return fail("%s has no algorithm %q (it has: %s)", c.Op, algo, strings.Join(ir.Words(ir.Algorithms(c.Op)), ", "))
	}
	var err error
	if p.inB, err = d.own(c.In.Buf); err != nil {
		return fail("input: %v", err)
	}
	if p.outB, err = d.own(c.Out.Buf); err != nil {
		return fail("output: %v", err)
	}
	if c.In.DType != c.Out.DType {
		return fail("input is %s but output is %s", c.In.DType, c.Out.DType)
	}
	p.dt, p.es = c.In.DType, int64(c.In.DType.Size())
	if p.es == 0 {
		return fail("dtype %v has no size", p.dt)
	}
	if !c.In.IsContiguous() || !c.Out.IsContiguous() {
		return fail("input and output must be contiguous (got strides %v and %v); copy a strided view into a contiguous tensor first", c.In.Strides, c.Out.Strides)
	}
	if p.inPtr, err = d.span(c.In, "collective input"); err != nil {
		return fail("%v", err)
	}
	if p.outPtr, err = d.span(c.Out, "collective output"); err != nil {
		return fail("%v", err)
	}
	switch {
	case c.Op.Info().Reduces:
		if p.reduce == ir.ReduceUnset {
			p.reduce = ir.ReduceSum
		}
		if !p.reduce.Valid() {
			return fail("unknown reduce op %q (want one of %s)", p.reduce, strings.Join(ir.ReduceOpWords, ", "))
		}
		if _, ok := reduceDTypes[p.dt]; !ok {
			return fail("cannot reduce %s tensors (op=%s); reductions take f32, f16, bf16, f64, i32 or i64", p.dt, p.reduce)
		}
		if p.reduce == ir.ReduceAvg && !p.dt.IsFloat() {
			return fail("op=avg needs a float dtype, not %s", p.dt)
		}
	default:
		p.reduce = ir.ReduceUnset
	}
	switch {
	case c.Op.Info().Rooted:
		if c.Root < 0 || c.Root >= D {
			return fail("root %d out of range [0, %d)", c.Root, D)
		}
	default:
		p.root = 0
	}
	if err := c.CheckShapes(D); err != nil {
		return fail("%v", err)
	}
	switch c.Op.Info().Layout {
	case ir.LayoutGather, ir.LayoutScatter:
		p.concat = 0
	case ir.LayoutAllToAll:
	default:
		p.axis, p.concat = 0, 0
	}
	p.impl = d.resolveAlgo(p)
	p.access = implAccess(c.Op, p.impl)
	p.ll = c.Op == ir.OpAllReduce && p.impl == ir.AlgoOneShot && useLL(p, d.tune.LLMax)
	p.cePush = p.impl == ir.AlgoCopyEngine && p.outB.kind == kindSym && d.tune.CEPush
	p.twoShotCE = c.Op == ir.OpAllReduce && p.impl == ir.AlgoTwoShot && d.tune.TwoShotCEMin > 0 && p.in.Bytes() >= d.tune.TwoShotCEMin
	if p.access.ReadsInput && p.inB.kind != kindSym {
		return fail("it reads its input from peers, so the input must be this rank's shard of a symmetric buffer; buffer #%d is %v (%s)", p.inB.id, p.inB.mem, kindName(p.inB.kind))
	}
	if p.access.WritesOutput && p.outB.kind != kindSym {
		return fail("it writes its output on peers, so the output must be this rank's shard of a symmetric buffer; buffer #%d is %v (%s)", p.outB.id, p.outB.mem, kindName(p.outB.kind))
	}
	describe := func(t runtime.Tensor, b *buffer, remote bool) string {
		s := fmt.Sprint(t.Shape)
		if remote {
			s += fmt.Sprintf("@sym#%d+%d", b.sym.seq, t.Offset)
		}
		return s
	}
	p.desc = fmt.Sprintf("%s algo=%s impl=%s %s in=%s out=%s op=%s root=%d axis=%d concat=%d", p.op, p.algo, p.impl, p.dt,
		describe(c.In, p.inB, p.access.ReadsInput), describe(c.Out, p.outB, p.access.WritesOutput), p.reduce, p.root, p.axis, p.concat)
	if p.ll {
		p.desc += " proto=ll"
	}
	if p.twoShotCE {
		p.desc += " gather=ce"
	}
	if p.cePush {
		p.desc += fmt.Sprintf(" push@sym#%d+%d", p.outB.sym.seq, c.Out.Offset)
	}
	if p.impl == ir.AlgoRing && p.op != ir.OpAllGather {
		p.ring = d.tune.ring()
		p.desc += " ring=" + p.ring.String()
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
func useLL(p *collPlan, llMax int64) bool {
	n := p.in.Bytes()
	if n > llMax || p.es < 2 || p.es > 8 {
		return false
	}
	return p.inPtr == p.outPtr || !overlaps(p.in, p.inB, p.out, p.outB)
}

func kindName(k bufKind) string {
	return [...]string{"a global allocation", "pinned host memory", "a symmetric shard", "a peer's shard", "a contiguous view"}[k]
}

// resolveAlgo picks what auto runs: the fastest algorithm the measured
// table (hirrun bench; autotable.go) ranks first for this collective,
// world size, dtype class and size whose symmetric-heap needs the operands
// meet, else the compiled-in choice (defaultAlgo).
func (d *Device) resolveAlgo(p *collPlan) ir.Algo {
	if p.algo != ir.AlgoAuto {
		return p.algo
	}
	if t := d.comm.table; t != nil {
		for _, a := range t.Ranked(p.op, d.opts.WorldSize, p.dt, benchBytes(p.op, p.in, p.out)) {
			if d.fits(p, a) {
				return a
			}
		}
	}
	return d.defaultAlgo(p)
}

// defaultAlgo is the compiled-in choice: one_shot everywhere, except
// all_reduce above Tuning.AutoOneShotMax with a symmetric output, which
// runs two_shot (same rank-order result, 1/D of the loads), and all_gather
// of a symmetric input from Tuning.AutoCEMin bytes of output, which runs
// copy_engine.
func (d *Device) defaultAlgo(p *collPlan) ir.Algo {
	switch p.op {
	case ir.OpAllReduce:
		if p.in.Bytes() > d.tune.AutoOneShotMax && p.outB.kind == kindSym {
			return ir.AlgoTwoShot
		}
	case ir.OpAllGather:
		if d.tune.AutoCEMin > 0 && p.out.Bytes() >= d.tune.AutoCEMin && p.inB.kind == kindSym {
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
// 64 MiB).

// fits says whether algorithm algo can run p as auto's choice: op has it,
// the operands are symmetric where it touches them remotely, and NCCL
// loads where it is NCCL.
func (d *Device) fits(p *collPlan, algo ir.Algo) bool {
	if _, ok := ir.LookupRule(p.op, algo); !ok || algo == ir.AlgoAuto {
		return false
	}
	acc := implAccess(p.op, algo)
	if acc.ReadsInput && p.inB.kind != kindSym || acc.WritesOutput && p.outB.kind != kindSym {
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
	return true
}

// Collective runs c on stream s: the symmetric-memory kernels of
// docs/COLLECTIVES.md, or NCCL for algo=nccl.
func (d *Device) collective(c *runtime.CollectiveCall, rs runtime.Stream) error {
	if c == nil {
		return fmt.Errorf("cuda: rank %d: collective: nil call", d.opts.Rank)
	}
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	// Every rank reaches its first collective at the same point: make the
	// pads there, before anything that could fail on one rank only.
	cs, err := d.commReady()
	if err != nil {
		return err
	}
	// A call made before (same tensors, same stream) reuses its plan,
	// already validated and agreed on: no planning, formatting or store.
	key, cacheable := planKeyOf(c, s)
	var p *collPlan
	if cacheable {
		cs.mu.Lock()
		p = cs.plans[key]
		cs.mu.Unlock()
		if p != nil && (p.inB.freed.Load() || p.outB.freed.Load()) {
			p = nil
		}
	}
	if err := d.faultErr(); err != nil {
		return err
	}
	var ch *commChannel
	var seq uint64
	if p == nil {
		if p, err = d.planCollective(c); err != nil {
			return err
		}
		cs.mu.Lock()
		ch, err = cs.channel(s, d.opts.Rank)
		if ch != nil {
			ch.seq = cs.seq.Add(1)
			seq = ch.seq
		}
		cs.mu.Unlock()
		if err != nil {
			return err
		}
		p.what = fmt.Sprintf("%s algo=%s %s%v", p.op, p.algo, p.dt, p.in.Shape)
		if p.reduce != ir.ReduceUnset {
			p.what += " op=" + p.reduce.String()
		}
		p.desc += fmt.Sprintf(" channel=%d", ch.idx)
		if err := d.agree(cs, p); err != nil {
			return err
		}
		if cacheable {
			cs.mu.Lock()
			if len(cs.plans) >= maxCachedPlans {
				clear(cs.plans)
			}
			cs.plans[key] = p
			cs.mu.Unlock()
		}
	} else {
		cs.mu.Lock()
		ch, err = cs.channel(s, d.opts.Rank)
		if ch != nil {
			ch.seq = cs.seq.Add(1)
			seq = ch.seq
		}
		cs.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if p.in.NumElements() == 0 && p.out.NumElements() == 0 {
		return nil
	}
	if d.opts.WorldSize == 1 {
		// One rank: every collective is a copy (reduce ops of one value
		// are the value, avg included).
		if p.outPtr == p.inPtr {
			return nil
		}
		return d.Copy(p.out, p.in, s)
	}
	var runErr error
	switch p.impl {
	case ir.AlgoNCCL:
		runErr = d.runNCCL(p, s)
	case ir.AlgoCopyEngine:
		runErr = d.runCopyEngine(cs, ch, p, s)
	case ir.AlgoRing:
		if p.op == ir.OpAllGather {
			runErr = d.runAllGatherRing(cs, ch, p, s)
		} else {
			runErr = d.runRing(cs, ch, p, s)
		}
	default:
		if p.ll {
			runErr = d.runLL(cs, ch, p, s)
		} else {
			runErr = d.runSymmetric(cs, ch, p, s)
		}
	}
	if runErr != nil {
		return fmt.Errorf("cuda: rank %d: %s (collective #%d, stream channel %d): %w", d.opts.Rank, p.what, seq, ch.idx, runErr)
	}
	return nil
}

// maxCachedPlans bounds the plan cache (it is emptied when full).
const maxCachedPlans = 1024

// planKey is a collective call as the plan cache knows it: everything
// planning reads, with shapes of up to maxKeyDims dimensions inline.
type planKey struct {
	op                 ir.Opcode
	algo               ir.Algo
	reduce             ir.ReduceOp
	root, axis, concat int
	in, out            tensorKey
	s                  *stream
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
func planKeyOf(c *runtime.CollectiveCall, s *stream) (k planKey, ok bool) {
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
	return planKey{op: c.Op, algo: c.Algo, reduce: c.ReduceOp, root: c.Root, axis: c.Axis, concat: c.ConcatAxis, in: in, out: out, s: s}, true
}

// agree checks, on the first call of each distinct call, that every rank
// called the same collective with the same shapes and dtype (and, for
// tensors peers touch, the same place in the same symmetric allocation):
// the descriptors travel through the job's store. A rank that does not
// come is named after the timeout. Later calls of the same descriptor
// trust the check and only meet in the kernels.
func (d *Device) agree(cs *commState, p *collPlan) error {
	world, rank := d.opts.WorldSize, d.opts.Rank
	if world == 1 {
		return nil
	}
	cs.mu.Lock()
	done := cs.checked[p.desc]
	n := cs.nchecks
	if !done {
		cs.nchecks++
	}
	cs.mu.Unlock()
	if done {
		return nil
	}
	// Compile (or load) the kernels first, so the ranks leave the check
	// together rather than a compile apart (a kernel waits for its peers
	// only up to the timeout).
	if err := d.preloadKernels(cs, p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	raw, err := store.ExchangeAll(ctx, d.opts.Store, fmt.Sprintf("cuda/coll/check/%d", n), rank, world, []byte(p.desc), d.opts.Timeout)
	if err != nil {
		// Nothing was launched, so the pads are still in step: not sticky.
		return fmt.Errorf("cuda: rank %d: %s: the ranks did not all arrive to check this call (new call #%d on this rank): %w; every rank must run the same collectives in the same order", rank, p.what, n, err)
	}
	var diff []string
	for r, b := range raw {
		if string(b) != p.desc {
			diff = append(diff, fmt.Sprintf("rank %d called %s", r, b))
		}
	}
	if len(diff) > 0 {
		return fmt.Errorf("cuda: rank %d: %s: the ranks called different collectives: rank %d called %s; %s", rank, p.what, rank, p.desc, strings.Join(diff, "; "))
	}
	cs.mu.Lock()
	cs.checked[p.desc] = true
	cs.mu.Unlock()
	return nil
}

// preloadKernels loads the modules p's algorithm launches.
func (d *Device) preloadKernels(cs *commState, p *collPlan) error {
	if p.impl == ir.AlgoNCCL || d.opts.WorldSize == 1 {
		return nil
	}
	if _, err := moveFunction(cs, d, "hir_barrier"); err != nil {
		return err
	}
	if p.reduce == ir.ReduceUnset {
		return nil
	}
	dt := p.dt
	_, err := d.commFunction(&cs.mods, "hir_comm_reduce_"+dt.String(), reduceKernelName(dt, p.reduce, false),
		func() (string, error) { return reduceModuleSource(dt) })
	return err
}

// peerPtrs is where tensor t (in this rank's shard b) lies in every
// rank's shard, as mapped here; for a tensor not touched remotely only
// this rank's entry is set.
func (d *Device) peerPtrs(b *buffer, t runtime.Tensor, remote bool) (out [maxRanks]uint64) {
	if !remote {
		out[d.opts.Rank] = b.ptr + uint64(t.Offset)
		return out
	}
	for r, m := range b.sym.maps {
		out[r] = m.ptr + uint64(t.Offset)
	}
	return out
}

func (d *Device) baseArgs(cs *commState, ch *commChannel, base uint64) collArgs {
	return collArgs{Pad: cs.padsFor(ch), Status: cs.status.ptr, Base: base, TimeoutNS: uint64(d.opts.Timeout.Nanoseconds()),
		Rank: int32(d.opts.Rank), World: int32(d.opts.WorldSize), Channel: int32(ch.idx)}
}

func (d *Device) launchColl(cs *commState, module, name string, src func() (string, error), grid uint32, a *collArgs, s *stream) error {
	f, err := d.commFunction(&cs.mods, module, name, src)
	if err != nil {
		return err
	}
	return d.launchArgs(f, grid, collThreads, s, a)
}

// launchArgs launches f with a (passed by value) on s: LaunchFunction
// without its per-argument conversions and copies, since collectives are
// issued at a rate where the host's microseconds show.
func (d *Device) launchArgs(f *Function, grid, block uint32, s *stream, a *collArgs) error {
	arg := new(collArgs)
	*arg = *a
	params := []unsafe.Pointer{unsafe.Pointer(arg)}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := d.drv.setCurrent(d.ctx); err != nil {
		return err
	}
	if err := d.drv.LaunchKernel.Call11(f.h, uintptr(grid), 1, 1, uintptr(block), 1, 1, 0, s.h,
		uintptr(unsafe.Pointer(&params[0])), 0); err != nil {
		return fmt.Errorf("cuda: rank %d: launch %s: %w", d.opts.Rank, f.Name, err)
	}
	goruntime.KeepAlive(arg)
	goruntime.KeepAlive(params)
	return nil
}

func moveFunction(cs *commState, d *Device, name string) (*Function, error) {
	return d.commFunction(&cs.mods, "hir_comm_move", name, func() (string, error) { return moveModuleSource(), nil })
}

func (d *Device) launchMove(cs *commState, name string, grid uint32, a *collArgs, s *stream) error {
	f, err := moveFunction(cs, d, name)
	if err != nil {
		return err
	}
	return d.launchArgs(f, grid, collThreads, s, a)
}

func (d *Device) launchReduce(cs *commState, p *collPlan, vec bool, grid uint32, a *collArgs, s *stream) error {
	dt := p.dt
	return d.launchColl(cs, "hir_comm_reduce_"+dt.String(), reduceKernelName(dt, p.reduce, vec),
		func() (string, error) { return reduceModuleSource(dt) }, grid, a, s)
}

// overlaps reports whether two tensors share bytes.
func overlaps(a runtime.Tensor, ab *buffer, b runtime.Tensor, bb *buffer) bool {
	if ab.ptr+uint64(a.Offset) >= bb.ptr+uint64(b.Offset)+uint64(b.Bytes()) {
		return false
	}
	return bb.ptr+uint64(b.Offset) < ab.ptr+uint64(a.Offset)+uint64(a.Bytes())
}

// reduceSpec is one launch of the reduce kernel, in elements: every
// rank's source (layout ls) reduced into the targets (layout ld).
type reduceSpec struct {
	src   [maxRanks]uint64
	ls    lay
	dst   []uint64
	ld    lay
	n     int64 // elements this rank reduces
	gridN int64 // elements that size the grid (the same on every rank)
	tmp   bool  // the output aliases the input: stage through a temporary
}

// runReduce launches the reduce kernel for spec: the 16-byte vector
// instance where every address and layout allows it, else the scalar one.
func (d *Device) runReduce(cs *commState, ch *commChannel, p *collPlan, sp reduceSpec, s *stream) error {
	D := d.opts.WorldSize
	es := p.es
	V := 16 / es
	aligned := func(x uint64) bool { return x%16 == 0 }
	vec := true
	for r := 0; r < D; r++ {
		vec = vec && aligned(sp.src[r])
	}
	for _, t := range sp.dst {
		vec = vec && aligned(t)
	}
	for _, l := range []lay{sp.ls, sp.ld} {
		if l.Run != 0 {
			vec = vec && l.Run%V == 0 && l.Pitch%V == 0
		}
	}
	a := d.baseArgs(cs, ch, 0)
	a.Src = sp.src
	for i, t := range sp.dst {
		a.Dst[i] = t
	}
	a.NOut = int32(len(sp.dst))
	a.Ls, a.Ld = sp.ls, sp.ld
	units := sp.n
	if vec {
		units = sp.n / V
		a.Ls, a.Ld = lay{sp.ls.Run / V, sp.ls.Pitch / V}, lay{sp.ld.Run / V, sp.ld.Pitch / V}
		a.TailStart, a.TailEnd = units*V, sp.n
	}
	a.N = units
	// The grid depends only on what every rank agrees on (never on this
	// rank's alignment): blocks meet their peers' blocks of the same index.
	grid := cs.grid(max(1, (sp.gridN*es+15)/16))
	launch := func() error {
		cs.mu.Lock()
		a.Base = ch.reserve(2, p.what)
		cs.mu.Unlock()
		return d.launchReduce(cs, p, vec, grid, &a, s)
	}
	if !sp.tmp {
		return launch()
	}
	a.Mode |= modeTmp
	return d.staged(int(max(sp.n*es, 16)), s, func(tmp uint64) error {
		a.Work = tmp
		return launch()
	})
}

// copySpec is one launch of the copy kernel, in elements: task t copies n
// elements from src[t] (layout ls) to dst[t] (layout ld).
type copySpec struct {
	src, dst []uint64
	ls, ld   lay
	n        int64
}

func (d *Device) runCopy(cs *commState, ch *commChannel, p *collPlan, sp copySpec, gridN int64, s *stream) error {
	es := p.es
	vec := true
	for i := range sp.src {
		vec = vec && sp.src[i]%16 == 0 && sp.dst[i]%16 == 0
	}
	for _, l := range []lay{sp.ls, sp.ld} {
		if l.Run != 0 {
			vec = vec && (l.Run*es)%16 == 0 && (l.Pitch*es)%16 == 0
		}
	}
	a := d.baseArgs(cs, ch, 0)
	copy(a.Src[:], sp.src)
	copy(a.Dst[:], sp.dst)
	a.NTask = int32(len(sp.src))
	name := fmt.Sprintf("hir_copy_s%d", es)
	gridUnits := gridN * es / 16
	if vec {
		name = "hir_copy_v16"
		bytes := sp.n * es
		a.N = bytes / 16
		a.TailStart, a.TailEnd = a.N*16, bytes
		a.Ls = lay{sp.ls.Run * es / 16, sp.ls.Pitch * es / 16}
		a.Ld = lay{sp.ld.Run * es / 16, sp.ld.Pitch * es / 16}
	} else {
		a.N = sp.n
		a.Ls, a.Ld = sp.ls, sp.ld
	}
	cs.mu.Lock()
	a.Base = ch.reserve(2, p.what)
	cs.mu.Unlock()
	return d.launchMove(cs, name, cs.grid(max(gridUnits, 1)), &a, s)
}

// runSymmetric runs the one_shot and two_shot algorithms.
func (d *Device) runSymmetric(cs *commState, ch *commChannel, p *collPlan, s *stream) error {
	D, r := d.opts.WorldSize, d.opts.Rank
	es := p.es
	ins := d.peerPtrs(p.inB, p.in, p.access.ReadsInput)
	outs := d.peerPtrs(p.outB, p.out, p.access.WritesOutput)
	nIn, nOut := p.in.NumElements(), p.out.NumElements()
	alias := overlaps(p.in, p.inB, p.out, p.outB)
	switch p.op {
	case ir.OpAllReduce:
		if p.impl == ir.AlgoTwoShot {
			// Chunk c of the flat tensor, bounds rounded to 16 bytes so
			// every chunk moves as vectors; each element is still reduced
			// in rank order, as one_shot does.
			align := 16 / es
			bound := func(c int) int64 {
				if c == D {
					return nIn
				}
				return nIn * int64(c) / int64(D) / align * align
			}
			var widest int64
			for c := 0; c < D; c++ {
				widest = max(widest, bound(c+1)-bound(c))
			}
			lo, hi := bound(r), bound(r+1)
			sp := reduceSpec{n: hi - lo, gridN: widest}
			for q := 0; q < D; q++ {
				sp.src[q] = ins[q] + uint64(lo*es)
				sp.dst = append(sp.dst, outs[q]+uint64(lo*es))
			}
			if p.twoShotCE {
				return d.runTwoShotCE(cs, ch, p, sp, lo, s)
			}
			return d.runReduce(cs, ch, p, sp, s)
		}
		sp := reduceSpec{src: ins, dst: []uint64{p.outPtr}, n: nIn, gridN: nIn, tmp: alias}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpReduce:
		sp := reduceSpec{src: ins, gridN: nIn, tmp: alias}
		if r == p.root {
			sp.dst, sp.n = []uint64{p.outPtr}, nIn
		}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpReduceScatter:
		run, l := blockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
		sp := reduceSpec{ls: l, dst: []uint64{p.outPtr}, n: nOut, gridN: nOut, tmp: alias}
		for q := 0; q < D; q++ {
			sp.src[q] = ins[q] + uint64(int64(r)*run*es)
		}
		return d.runReduce(cs, ch, p, sp, s)
	case ir.OpAllGather:
		run, l := blockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
		sp := copySpec{ld: l, n: nIn}
		for q := 0; q < D; q++ {
			sp.src = append(sp.src, p.inPtr)
			sp.dst = append(sp.dst, outs[q]+uint64(int64(r)*run*es))
		}
		return d.runCopy(cs, ch, p, sp, nIn*int64(D), s)
	case ir.OpAllToAll:
		a, b := p.concat, p.axis
		runS, ls := blockLayout(p.in.Shape, b, p.out.Shape[b])
		runD, ld := blockLayout(p.out.Shape, a, p.in.Shape[a])
		blk := nIn / int64(D)
		sp := copySpec{ls: ls, ld: ld, n: blk}
		for q := 0; q < D; q++ {
			sp.src = append(sp.src, p.inPtr+uint64(int64(q)*runS*es))
			sp.dst = append(sp.dst, outs[q]+uint64(int64(r)*runD*es))
		}
		return d.runCopy(cs, ch, p, sp, nIn, s)
	case ir.OpBroadcast:
		sp := copySpec{src: []uint64{ins[p.root]}, dst: []uint64{p.outPtr}, n: nIn}
		return d.runCopy(cs, ch, p, sp, nIn, s)
	case ir.OpScatter:
		run, l := blockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
		sp := copySpec{src: []uint64{ins[p.root] + uint64(int64(r)*run*es)}, dst: []uint64{p.outPtr}, ls: l, n: nOut}
		return d.runCopy(cs, ch, p, sp, nOut, s)
	case ir.OpGather:
		run, l := blockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
		sp := copySpec{ld: l, n: nIn}
		if r == p.root {
			for q := 0; q < D; q++ {
				sp.src = append(sp.src, ins[q])
				sp.dst = append(sp.dst, p.outPtr+uint64(int64(q)*run*es))
			}
		}
		return d.runCopy(cs, ch, p, sp, nIn*int64(D), s)
	}
	return fmt.Errorf("no %s algorithm for %s", p.impl, p.op)
}

// runTwoShotCE is two_shot for large tensors with its second half on the
// copy engines: the reduce kernel writes chunk r only into this rank's
// output, then one cuMemcpy per peer pushes it into the peer's output,
// and a barrier kernel waits until every rank's pushes are done. The
// link carries the same bytes, but the copy engines write over NVLink
// faster than SM stores do.
func (d *Device) runTwoShotCE(cs *commState, ch *commChannel, p *collPlan, sp reduceSpec, lo int64, s *stream) error {
	D, r := d.opts.WorldSize, d.opts.Rank
	sp.dst = []uint64{p.outPtr + uint64(lo*p.es)}
	if err := d.runReduce(cs, ch, p, sp, s); err != nil {
		return err
	}
	if sp.n > 0 {
		mine := runtime.Tensor{Buf: p.outB, Offset: p.out.Offset + lo*p.es, DType: p.dt, Shape: []int64{sp.n}}
		for k := 1; k < D; k++ {
			peer, err := d.PeerBuffer(p.outB, (r+k)%D)
			if err != nil {
				return err
			}
			dst := mine
			dst.Buf = peer
			if err := d.Copy(dst, mine, s); err != nil {
				return err
			}
		}
	}
	return d.barrierKernel(cs, ch, p.what, s)
}

// runAllGatherRing: blocks travel round the ring, written straight into
// the right neighbour's (symmetric) output.
func (d *Device) runAllGatherRing(cs *commState, ch *commChannel, p *collPlan, s *stream) error {
	D := d.opts.WorldSize
	es := p.es
	outs := d.peerPtrs(p.outB, p.out, true)
	run, l := blockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
	nIn := p.in.NumElements()
	a := d.baseArgs(cs, ch, 0)
	a.Src[0] = p.inPtr
	a.Dst = outs
	a.Seg = run * es
	vec := p.inPtr%16 == 0
	for q := 0; q < D; q++ {
		vec = vec && outs[q]%16 == 0
	}
	if l.Run != 0 {
		vec = vec && (l.Run*es)%16 == 0 && (l.Pitch*es)%16 == 0 && a.Seg%16 == 0
	} else {
		vec = vec && a.Seg%16 == 0
	}
	name := fmt.Sprintf("hir_ag_ring_s%d", es)
	if vec {
		name = "hir_ag_ring_v16"
		bytes := nIn * es
		a.N = bytes / 16
		a.TailStart, a.TailEnd = a.N*16, bytes
		a.Ld = lay{l.Run * es / 16, l.Pitch * es / 16}
	} else {
		a.N, a.Ld = nIn, l
	}
	grid := cs.grid(max(nIn*es/16, 1))
	cs.mu.Lock()
	a.Base = ch.reserve(uint64(max(2, D)), p.what)
	cs.mu.Unlock()
	return d.launchMove(cs, name, grid, &a, s)
}

// barrierKernel meets every rank on stream s (one block).
func (d *Device) barrierKernel(cs *commState, ch *commChannel, what string, s *stream) error {
	a := d.baseArgs(cs, ch, 0)
	cs.mu.Lock()
	a.Base = ch.reserve(1, what)
	cs.mu.Unlock()
	return d.launchMove(cs, "hir_barrier", 1, &a, s)
}

// runCopyEngine: all_gather through the copy engines: a barrier (every
// input is ready, every output free), one cuMemcpy per rank, a barrier
// (nobody changes its input while a peer reads it, every push has landed
// before anyone reads its output). Where the output is symmetric each
// rank pushes its shard into every peer's output; else it pulls every
// peer's shard through the contiguous view. The copy of this rank's own
// shard runs on a second stream, forked after the first barrier and
// joined before the second, so it overlaps the copies over NVLink
// instead of adding to them.
func (d *Device) runCopyEngine(cs *commState, ch *commChannel, p *collPlan, s *stream) error {
	view, err := d.ContiguousView(p.inB)
	if err != nil {
		return err
	}
	if err := d.ceSide(ch); err != nil {
		return err
	}
	if err := d.barrierKernel(cs, ch, p.what, s); err != nil {
		return err
	}
	D, r := d.opts.WorldSize, d.opts.Rank
	run, l := blockLayout(p.out.Shape, p.axis, p.in.Shape[p.axis])
	// copyBlock copies rank q's shard into block q of rank to's output:
	// this rank pulls (to == r, from the view) or pushes (q == r, into
	// to's output through this rank's mapping of it).
	copyBlock := func(q, to int, on *stream) error {
		src := runtime.Tensor{Buf: view, Offset: int64(q)*p.inB.size + p.in.Offset, DType: p.dt, Shape: p.in.Shape}
		var out runtime.Buffer = p.outB
		if to != r {
			var err error
			if out, err = d.PeerBuffer(p.outB, to); err != nil {
				return err
			}
		}
		dst := runtime.Tensor{Buf: out, Offset: p.out.Offset + int64(q)*run*p.es, DType: p.dt, Shape: p.in.Shape}
		if l.Run != 0 {
			dst.Strides = runtime.ContiguousStrides(p.out.Shape)
		}
		return d.Copy(dst, src, on)
	}
	if err := s.Record(ch.evFork); err != nil {
		return err
	}
	if err := ch.side.WaitEvent(ch.evFork); err != nil {
		return err
	}
	if err := copyBlock(r, r, ch.side); err != nil {
		return err
	}
	if err := ch.side.Record(ch.evJoin); err != nil {
		return err
	}
	for k := 1; k < D; k++ {
		var err error
		if q := (r + k) % D; p.cePush {
			err = copyBlock(r, q, s)
		} else {
			err = copyBlock(q, r, s)
		}
		if err != nil {
			return err
		}
	}
	if err := s.WaitEvent(ch.evJoin); err != nil {
		return err
	}
	return d.barrierKernel(cs, ch, p.what, s)
}

// ceSide makes ch's second stream and its fork and join events on first
// use (local: nothing here is collective).
func (d *Device) ceSide(ch *commChannel) error {
	if ch.side != nil {
		return nil
	}
	side, err := d.newStream(false)
	if err != nil {
		return err
	}
	var evs [2]*event
	for i := range evs {
		e := &event{dev: d}
		if err := d.withCtx(func() error {
			return d.drv.EventCreate.Call2(uintptr(unsafe.Pointer(&e.h)), eventDisableTiming)
		}); err != nil {
			side.destroy()
			if i == 1 {
				evs[0].destroy()
			}
			return fmt.Errorf("cuda: rank %d: %w", d.opts.Rank, err)
		}
		d.mu.Lock()
		d.events[e] = true
		d.mu.Unlock()
		evs[i] = e
	}
	ch.side, ch.evFork, ch.evJoin = side, evs[0], evs[1]
	return nil
}

// llStage is every rank's LL staging of channel ch (symmetric: made,
// collectively, on the channel's first LL all_reduce).
func (d *Device) llStage(ch *commChannel) ([maxRanks]uint64, error) {
	var out [maxRanks]uint64
	if ch.ll == nil {
		b, err := d.allocSymmetric(int64(2 * d.opts.WorldSize * llSeg))
		if err != nil {
			return out, fmt.Errorf("LL staging: %w", err)
		}
		ch.ll = b
		for _, m := range b.sym.maps {
			ch.llPtrs = append(ch.llPtrs, m.ptr)
		}
	}
	copy(out[:], ch.llPtrs)
	return out, nil
}

// runLL runs a small all_reduce (one_shot) as the LL kernel: one pass,
// no barrier (kernels/reduce.cu, hir_ll_*).
func (d *Device) runLL(cs *commState, ch *commChannel, p *collPlan, s *stream) error {
	stage, err := d.llStage(ch)
	if err != nil {
		return err
	}
	n := p.in.NumElements()
	perLine := 8 / p.es
	lines := (n + perLine - 1) / perLine
	a := d.baseArgs(cs, ch, 0)
	a.Src[0], a.Dst[0] = p.inPtr, p.outPtr
	a.Stage = stage
	a.N, a.TailEnd, a.Seg = lines, n, llSeg
	grid := uint32(max(1, min((lines+llThreads-1)/llThreads, int64(max(cs.blocks, 1)))))
	f, err := d.commFunction(&cs.mods, "hir_comm_reduce_"+p.dt.String(), llKernelName(p.dt, p.reduce),
		func() (string, error) { return reduceModuleSource(p.dt) })
	if err != nil {
		return err
	}
	cs.mu.Lock()
	a.Base = ch.reserve(1, p.what)
	a.Xtra = int32(ch.llSeq & 1)
	ch.llSeq++
	cs.mu.Unlock()
	return d.launchArgs(f, grid, llThreads, s, &a)
}

// ringGeom is the ring's shape: at most blocks blocks (and at most the
// agreed grid), seg bytes per segment, slots staging slots per block,
// and whether a block runs its steps in waves (MODE_WAVE, where there are
// slots enough: ringWaveSlots). Every rank must use the same one (it is
// part of the call's descriptor): HIR_COLL_RING_BLOCKS, HIR_COLL_RING_SEG
// (bytes, a multiple of 16), HIR_COLL_RING_SLOTS (2 to 16; the fused
// steps need 2) and HIR_COLL_RING_WAVE (1 or 0) set it.
type ringGeom struct {
	blocks, seg, slots int64
	wave               bool
}

// ringWaveSlots is the least number of slots per block the wave order
// runs with: a wave has a send in every step but the last, and a
// transfer is acked only in the next wave, so a block may have a wave's
// sends and those before its own in the current one outstanding (one
// fewer deadlocks in the model: TestRingWaveSlots).
func ringWaveSlots(D int, gather bool) int {
	if gather {
		return 2 * D
	}
	return D + 1
}

// useWave says whether a ring of D ranks runs in waves with g.
func (g ringGeom) useWave(D int, gather bool) bool {
	return g.wave && g.slots >= int64(ringWaveSlots(D, gather))
}

// ringDefault: measured on 2 × H200 at 1 GiB bf16 (docs/COLLECTIVES.md):
// all_reduce 359 GB/s bus bandwidth, reduce_scatter 324; 64 blocks or 128
// KiB segments ran 10-20 % slower, 512 KiB segments gave reduce_scatter
// 338 for twice the staging (128 MiB per rank and channel here).
var ringDefault = ringGeom{blocks: 128, seg: 256 << 10, slots: 4, wave: true}

func (g ringGeom) String() string {
	s := fmt.Sprintf("%dx%dx%d", g.blocks, g.seg, g.slots)
	if g.wave {
		s += "w"
	}
	return s
}

// stride is the bytes of one staging slot; stagingBytes a rank's staging.
func (g ringGeom) stride() int64       { return g.seg + ringSlotPad }
func (g ringGeom) stagingBytes() int64 { return g.blocks * g.slots * g.stride() }

// ringMinBlockBytes is the least of the widest chunk a ring block is
// given: small tensors run on fewer blocks (fewer handshakes).
const ringMinBlockBytes = 32 << 10

// ringStage is ch's ring staging (symmetric: made, collectively, on the
// channel's first ring, for geometry g; every rank runs the same rings
// on the channel in the same order, with the same geometry).
func (d *Device) ringStage(ch *commChannel, g ringGeom) ([maxRanks]uint64, error) {
	var out [maxRanks]uint64
	if ch.stage == nil {
		b, err := d.allocSymmetric(g.stagingBytes())
		if err != nil {
			return out, fmt.Errorf("ring staging: %w", err)
		}
		ch.stage = b
		for _, m := range b.sym.maps {
			ch.stagePtrs = append(ch.stagePtrs, m.ptr)
		}
	}
	if ch.stage.size < g.stagingBytes() {
		return out, fmt.Errorf("ring staging of %d bytes is too small for ring geometry %v (the geometry changed after the channel's first ring)", ch.stage.size, g)
	}
	copy(out[:], ch.stagePtrs)
	return out, nil
}

// ringLaunch is a ring launch's shape: its grid and segments per block.
func (cs *commState) ringLaunch(g ringGeom, chunk []int64, es int64) (grid uint32, seg, nseg int64) {
	D := len(chunk) - 1
	var widest int64
	for c := 0; c < D; c++ {
		widest = max(widest, chunk[c+1]-chunk[c])
	}
	G := min(g.blocks, int64(max(cs.blocks, 1)), max(1, (widest*es+ringMinBlockBytes-1)/ringMinBlockBytes))
	seg = g.seg / es
	part := (widest + G - 1) / G
	return uint32(G), seg, max(1, (part+seg-1)/seg)
}

// runRing runs all_reduce and reduce_scatter as a ring (hir_ring_*):
// this rank's values come from the input, the final chunks go straight to
// the output, and only the neighbours' staging is touched remotely.
// reduce_scatter whose blocks along the axis are strided, or whose output
// overlaps its input, runs on a packed copy of the input in a temporary.
func (d *Device) runRing(cs *commState, ch *commChannel, p *collPlan, s *stream) error {
	D, r := d.opts.WorldSize, d.opts.Rank
	es := p.es
	g := p.ring
	stage, err := d.ringStage(ch, g)
	if err != nil {
		return err
	}
	a := d.baseArgs(cs, ch, 0)
	a.Stage = stage
	a.N = g.stride()
	a.NOut = int32(g.slots)
	var total int64
	if p.op == ir.OpAllReduce {
		total = p.in.NumElements()
		for c := 0; c <= D; c++ {
			a.Chunk[c] = total * int64(c) / int64(D)
		}
		a.Mode = modeAllGather
	} else {
		nOut := p.out.NumElements()
		total = nOut * int64(D)
		for c := 0; c <= D; c++ {
			a.Chunk[c] = nOut * int64(c)
		}
	}
	grid, seg, nseg := cs.ringLaunch(g, a.Chunk[:D+1], es)
	a.Seg, a.NSeg = seg, nseg
	if g.useWave(D, a.Mode&modeAllGather != 0) {
		a.Mode |= modeWave
	}
	transfers := uint64(nseg) * uint64(D-1)
	if a.Mode&modeAllGather != 0 {
		transfers *= 2
	}
	dt := p.dt
	run := func(src, dst uint64) error {
		a.Src[0], a.Dst[0] = src, dst
		if src%16 == 0 && dst%16 == 0 {
			a.Xtra = 1
		}
		cs.mu.Lock()
		a.Base = ch.reserve(transfers+1, p.what)
		cs.mu.Unlock()
		return d.launchColl(cs, "hir_comm_reduce_"+dt.String(), ringKernelName(dt, p.reduce),
			func() (string, error) { return reduceModuleSource(dt) }, grid, &a, s)
	}
	if p.op == ir.OpAllReduce {
		// Each element is read from the input before the output's is
		// written (in-place works); a partial overlap does not.
		if p.outPtr != p.inPtr && overlaps(p.in, p.inB, p.out, p.outB) {
			return fmt.Errorf("the output partly overlaps the input")
		}
		return run(p.inPtr, p.outPtr)
	}
	nOut := p.out.NumElements()
	runLen, l := blockLayout(p.in.Shape, p.axis, p.out.Shape[p.axis])
	if l.Run == 0 && !overlaps(p.in, p.inB, p.out, p.outB) {
		// Block c of the input is chunk c already; chunk r's element i
		// goes to the output's i - chunk[r] (the address wraps below the
		// output; only chunk r's elements are ever stored).
		return run(p.inPtr, p.outPtr-uint64(int64(r)*nOut*es))
	}
	// Pack the input's blocks along the axis one after another, run the
	// ring on the copy, keep chunk r.
	return d.staged(int(total*es), s, func(tmp uint64) error {
		work := d.tempBuffer(tmp, total*es)
		for c := 0; c < D; c++ {
			src := runtime.Tensor{Buf: p.inB, Offset: p.in.Offset + int64(c)*runLen*es, DType: p.dt, Shape: p.out.Shape}
			if l.Run != 0 {
				src.Strides = runtime.ContiguousStrides(p.in.Shape)
			}
			dst := runtime.Tensor{Buf: work, Offset: int64(c) * nOut * es, DType: p.dt, Shape: p.out.Shape}
			if err := d.Copy(dst, src, s); err != nil {
				return err
			}
		}
		if err := run(tmp, tmp); err != nil {
			return err
		}
		return d.Copy(p.out, runtime.Tensor{Buf: work, Offset: int64(r) * nOut * es, DType: p.dt, Shape: p.out.Shape}, s)
	})
}

// tempBuffer wraps a stream-ordered temporary (cuMemAllocAsync) as a
// buffer Copy accepts; it is not tracked (staged frees it).
func (d *Device) tempBuffer(ptr uint64, size int64) *buffer {
	return &buffer{dev: d, size: size, mem: ir.Global, kind: kindGlobal, ptr: ptr, owner: d.opts.Rank}
}
