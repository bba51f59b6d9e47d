package ir

import "fmt"

// MaxGraphOps bounds the ops one run of a program may issue in graph mode.
// Loops are unrolled into the graph (CUDA conditional nodes are not used
// yet), so a long loop makes a graph as long as its trips: past this many
// ops capture time and the graph's memory grow out of proportion.
const MaxGraphOps = 1 << 20

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
	if n, loop := graphOps(p.Body, 1); n > MaxGraphOps && loop != nil {
		return []CaptureBlocker{{Op: loop, Why: fmt.Sprintf(
			"the loop unrolls to more than %d ops in the graph (loops are unrolled into it): run it eagerly, or make it shorter", MaxGraphOps)}}
	}
	return nil
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
// count past MaxGraphOps.
func graphOps(b *Block, times uint64) (uint64, *Op) {
	var n uint64
	var culprit *Op
	for _, op := range b.Ops {
		n = satAdd(n, times)
		if op.Code != OpFor {
			continue
		}
		trips := LoopTrips(op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1))
		inner, _ := graphOps(op.Body, satMul(times, trips))
		n = satAdd(n, inner)
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
