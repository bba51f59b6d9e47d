package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hirlab/hir/ir"
)

// DefaultStallAfter is how long a rank waits for its peers before
// Config.Stalled hears of it, when Config.StallAfter is zero.
const DefaultStallAfter = 5 * time.Second

// EffectiveStallAfter returns c.StallAfter or the default.
func (c Config) EffectiveStallAfter() time.Duration {
	if c.StallAfter > 0 {
		return c.StallAfter
	}
	return DefaultStallAfter
}

// StallWatch is what a backend needs to report stalls: the hook and the
// threshold; nil when there is nothing to report (no hook, or a threshold
// the timeout reaches first).
type StallWatch struct {
	After  time.Duration
	Report func(Stall)
}

// StallWatch returns c's stall watch, or nil when c has no Stalled hook or
// its threshold is not before the timeout.
func (c Config) StallWatch() *StallWatch {
	if c.Stalled == nil || c.EffectiveStallAfter() >= c.EffectiveTimeout() {
		return nil
	}
	return &StallWatch{After: c.EffectiveStallAfter(), Report: c.Stalled}
}

// Stall is a wait for peers that has lasted Config.StallAfter: the run is
// not over (the wait goes on until the peers come or Config.Timeout ends
// it with a *TimeoutError), but a person watching wants to know who waits
// where, and for whom.
type Stall struct {
	// Rank is the rank that waits.
	Rank int
	// What is the runtime's name for the wait: "all_reduce algo=ring
	// (collective #0)", "send #0 from rank 0 to rank 1", "barrier #2".
	What string
	// Label is the label of the stream work that waits (Labeler): the
	// evaluator labels work with its *ir.Op. Nil where the wait is the
	// host's own or the backend does not label work; a caller that knows
	// where the rank's host is may fill it in.
	Label any
	// Waited is how long it has waited so far.
	Waited time.Duration
	// Waiting lists the ranks it waits for, ascending; nil where the
	// backend cannot tell.
	Waiting []int
}

// String is "rank 1 has waited 5s at prog.hir:12:3 (all_reduce) for ranks
// 0, 3": the op's position and code when Label is an *ir.Op, else the
// runtime's name for the wait ("in barrier #2").
func (s Stall) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d has waited %v ", s.Rank, RoundDuration(s.Waited))
	if op, ok := s.Label.(*ir.Op); ok && op != nil {
		if op.Pos.IsValid() {
			fmt.Fprintf(&b, "at %s (%s)", op.Pos, op.Code)
		} else {
			fmt.Fprintf(&b, "at %s", op.Code)
		}
	} else {
		b.WriteString("in " + s.What)
	}
	b.WriteString(" for ")
	if s.Waiting == nil {
		b.WriteString("its peers")
	} else {
		b.WriteString(stallRanks(s.Waiting))
	}
	return b.String()
}

// stallRanks writes "rank 3" or "ranks 0, 3", the first few of a long
// list and how many more.
func stallRanks(ranks []int) string {
	const shown = 8
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	parts := make([]string, 0, min(len(ranks), shown)+1)
	for i, r := range ranks {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(ranks)-shown))
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	return "ranks " + strings.Join(parts, ", ")
}
