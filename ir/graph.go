package ir

import "fmt"

// MaxGraphOps bounds the ops one run of a program may issue in graph mode.
// Loops are unrolled into the graph unless they run on the device (a
// device loop: DeviceLoop), so a long loop that cannot makes a graph as
// long as its trips: past this many ops capture time and the graph's
// memory grow out of proportion.
const MaxGraphOps = 1 << 20

// DeviceLoopMinOps is how many ops a loop must unroll to before graph mode
// captures its body once and has the device repeat it (CUDA: a WHILE
// conditional node) instead of unrolling it: below it, unrolled kernels
// cost less than the per-trip condition kernel.
const DeviceLoopMinOps = 512

// CaptureBlocker is an op that stops a graph capture, or splits it, and why.
type CaptureBlocker struct {
	Op  *Op
	Why string
}

// CaptureBlockers lists the loop, if any, that would unroll to more than
// MaxGraphOps ops in p's graph: graph mode refuses such a program. Fusion
// bodies are not walked: a fusion is one kernel.
func CaptureBlockers(p *Program) []CaptureBlocker {
	if p == nil || p.Body == nil {
		return nil
	}
	f := loopFacts{}
	if n, loop := f.graphOps(p.Body, 1); n > MaxGraphOps && loop != nil {
		return []CaptureBlocker{{Op: loop, Why: fmt.Sprintf(
			"the loop unrolls to more than %d ops in the graph, and its body cannot run as a device loop (%s): run it eagerly, or make it shorter",
			MaxGraphOps, f.of(loop).blocker)}}
	}
	return nil
}

// DeviceLoops lists, in program order, the loops graph mode captures once
// and has the device repeat (IsDeviceLoop), each with what a note says.
func DeviceLoops(p *Program) []CaptureBlocker {
	if p == nil || p.Body == nil {
		return nil
	}
	f := loopFacts{}
	var out []CaptureBlocker
	var walk func(b *Block)
	walk = func(b *Block) {
		for _, op := range b.Ops {
			if op.Code != OpFor {
				continue
			}
			if f.of(op).device {
				out = append(out, CaptureBlocker{Op: op, Why: fmt.Sprintf(
					"its body is captured once and the device repeats it for the %d trips (on GPUs a CUDA conditional node), not unrolled into the graph", loopTrips(op))})
				continue
			}
			walk(op.Body)
		}
	}
	walk(p.Body)
	return out
}

// IsDeviceLoop says whether graph mode captures loop op's body once and
// has the device repeat it: the loop unrolls to more than
// DeviceLoopMinOps ops and its body can (DeviceLoopBlocker).
func IsDeviceLoop(op *Op) bool {
	return op.Code == OpFor && op.Body != nil && loopFacts{}.of(op).device
}

// deviceLoopBodyOps is about how many ops graph mode puts in a device
// loop's body: a short body is unrolled up to it (DeviceLoopUnroll), so
// the per-trip condition kernel is a small part of a trip.
const deviceLoopBodyOps = 64

// DeviceLoopUnroll is how many of loop op's trips one trip of its device
// loop runs: enough to make the body about deviceLoopBodyOps ops, at
// least 1, at most half the trips (so the device repeats it); 0 when op
// is not a device loop.
func DeviceLoopUnroll(op *Op) uint64 {
	if op.Code != OpFor || op.Body == nil {
		return 0
	}
	if li := (loopFacts{}).of(op); li.device {
		return li.unroll
	}
	return 0
}

// DeviceLoopBlocker says why loop op's body cannot be captured once and
// repeated by the device, "" when it can. Every trip must be the same
// work on the one stream the loop runs on: the body may not read the
// loop's index (a captured kernel's arguments are fixed), rotate streams,
// wait on the host, or use another stream (OpInfo.OffStream; async
// collectives), its collectives may not run NCCL (its kernels join a
// conditional node's body only as far as NCCL documents, which it does
// not), and no loop in it may be a device loop itself: they do not nest
// (a conditional node's default value is assigned when the top graph
// launches, not when an enclosing loop's body runs again).
func DeviceLoopBlocker(op *Op) string {
	if op.Code != OpFor || op.Body == nil {
		return "it is not a loop"
	}
	return loopFacts{}.of(op).blocker
}

// loopInfo is what graph mode knows of a loop.
type loopInfo struct {
	bodyOps uint64 // the ops one run of its body puts in a graph (saturating)
	device  bool   // a device loop
	blocker string // why it cannot be one ("" when it is, or could be if longer)
	unroll  uint64 // a device loop's trips a node trip runs (DeviceLoopUnroll)
}

// loopFacts works each loop's loopInfo out once, inner loops first, so a
// question about a loop costs the size of its body times the nesting
// depth, not a power of the depth.
type loopFacts map[*Op]*loopInfo

func (f loopFacts) of(op *Op) *loopInfo {
	if li := f[op]; li != nil {
		return li
	}
	li := &loopInfo{}
	f[op] = li
	if op.Code != OpFor || op.Body == nil {
		li.blocker = "it is not a loop"
		return li
	}
	li.bodyOps, _ = f.graphOps(op.Body, 1) // inner loops' facts first
	li.blocker = f.blockerOf(op)
	trips := loopTrips(op)
	li.device = li.blocker == "" && trips > 1 && satMul(li.bodyOps, trips) > DeviceLoopMinOps
	li.unroll = max(1, min(uint64(deviceLoopBodyOps)/max(li.bodyOps, 1), trips/2))
	return li
}

// blockerOf is DeviceLoopBlocker's answer for op (inner loops' facts are
// known: f.graphOps ran on its body).
func (f loopFacts) blockerOf(op *Op) string {
	if op.IntAttr("streams", 0) > 1 {
		return "its trips rotate over streams"
	}
	var index *Value
	if len(op.Body.Args) > 0 {
		index = op.Body.Args[0]
	}
	why := ""
	var walk func(b *Block)
	walk = func(b *Block) {
		for _, o := range b.Ops {
			if why != "" {
				return
			}
			at := o.Pos.String() + ": " + o.Code.String()
			info := o.Code.Info()
			switch {
			case index != nil && usesValue(o, index):
				why = fmt.Sprintf("%s reads the loop index %s", at, index)
			case info.HostWait != "":
				why = fmt.Sprintf("%s waits on the host", at)
			case info.OffStream != "":
				why = fmt.Sprintf("%s %s", at, info.OffStream)
			case info.Class == ClassCollective && o.Async():
				why = fmt.Sprintf("%s is async: it runs on the communication stream", at)
			case info.Class == ClassCollective && o.Algo() == AlgoNCCL:
				why = fmt.Sprintf("%s runs NCCL, which does not document its kernels in a conditional node's body", at)
			case o.Code == OpFor && o.IntAttr("streams", 0) > 1:
				why = fmt.Sprintf("%s rotates its trips over streams", at)
			case o.Code == OpFor && f.of(o).device:
				why = fmt.Sprintf("%s runs on the device itself (device loops do not nest)", at)
			}
			if why == "" && o.Body != nil {
				walk(o.Body)
			}
		}
	}
	walk(op.Body)
	return why
}

// usesValue reports whether op takes v as an operand.
func usesValue(op *Op, v *Value) bool {
	for _, a := range op.Operands {
		if a == v {
			return true
		}
	}
	return false
}

func loopTrips(op *Op) uint64 {
	return LoopTrips(op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1))
}

// GraphSplits lists, in program order, the ops of p that wait on the host
// (OpInfo.HostWait): a graph cannot hold them, so graph mode ends the
// graph before each, runs it on the host, and starts a new graph after.
func GraphSplits(p *Program) []CaptureBlocker {
	if p == nil || p.Body == nil {
		return nil
	}
	var out []CaptureBlocker
	collectHostWaits(p.Body, &out)
	return out
}

// CheckCapturable is CaptureBlockers as an error: one "file:line:col: op
// cannot be captured in a graph: why" per blocker, nil when there is none.
func CheckCapturable(p *Program) error {
	var errs ErrorList
	for _, b := range CaptureBlockers(p) {
		errs.Add(b.Op.Pos, "%s cannot be captured in a graph: %s", b.Op.Code, b.Why)
	}
	return errs.Err()
}

func collectHostWaits(b *Block, out *[]CaptureBlocker) {
	for _, op := range b.Ops {
		if why := op.Code.Info().HostWait; why != "" {
			*out = append(*out, CaptureBlocker{Op: op, Why: why})
		}
		if op.Code == OpFor {
			collectHostWaits(op.Body, out)
		}
	}
}

// graphOps counts the ops one run of b issues, each counted times times
// (saturating past MaxGraphOps), and the outermost loop that took the
// count past MaxGraphOps. A device loop counts what its capture holds:
// its body unrolled DeviceLoopUnroll times and the trips left over.
func (f loopFacts) graphOps(b *Block, times uint64) (uint64, *Op) {
	var n uint64
	var culprit *Op
	for _, op := range b.Ops {
		n = satAdd(n, times)
		if op.Code != OpFor || op.Body == nil {
			continue
		}
		li := f.of(op)
		trips := loopTrips(op)
		if li.device {
			trips = li.unroll + trips%li.unroll
		}
		n = satAdd(n, satMul(satMul(times, trips), li.bodyOps))
		if n > MaxGraphOps && culprit == nil {
			culprit = op
		}
	}
	return n, culprit
}

func satAdd(a, b uint64) uint64 {
	if a+b < a || a+b > MaxGraphOps+1 {
		return MaxGraphOps + 1
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a != 0 && b > (MaxGraphOps+1)/a {
		return MaxGraphOps + 1
	}
	return a * b
}
