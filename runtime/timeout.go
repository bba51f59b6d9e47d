package runtime

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrTimeout is matched (errors.Is) by every *TimeoutError.
var ErrTimeout = errors.New("timed out waiting for peers")

// TimeoutError is a wait for peers that ran out of time (Config.Timeout): a
// collective, barrier, send/recv pair or symmetric allocation some ranks
// never reached. The CPU runtime returns it (wrapped with the rank, and by
// the evaluator with the op, in an evaluator.RunError) for every such wait;
// the rendezvous store's timeouts (store.BarrierError) can be read as one
// too. Find it with errors.As:
//
//	var te *runtime.TimeoutError
//	if errors.As(err, &te) { ... te.What, te.After, te.Missing ... }
type TimeoutError struct {
	// What names the wait: "send #0 from rank 0 to rank 1", "barrier #2",
	// "all_reduce #1 (staged_ring)", `barrier "x"`.
	What string
	// After is how long it waited.
	After time.Duration
	// Missing lists the ranks that never arrived (or never signalled),
	// ascending; empty where the wait was for keys, not ranks (a store get).
	Missing []int
	// Arrived lists the ranks that did arrive, where known (nil otherwise).
	Arrived []int
	// Awaited says what was awaited from the missing ranks when it is more
	// than their arrival: "a data signal", "the data". Empty otherwise.
	Awaited string
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	if e.What != "" {
		b.WriteString(e.What + ": ")
	}
	fmt.Fprintf(&b, "timed out after %v waiting for ", RoundDuration(e.After))
	switch {
	case e.Awaited != "" && len(e.Missing) == 0:
		b.WriteString(e.Awaited)
	case e.Awaited != "":
		b.WriteString(e.Awaited + " from " + timeoutRanks(e.Missing))
	default:
		b.WriteString(timeoutRanks(e.Missing))
	}
	if e.Arrived != nil {
		b.WriteString(" (arrived: " + timeoutJoin(e.Arrived) + ")")
	}
	return b.String()
}

// Is makes every *TimeoutError match ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// timeoutRanks writes "rank 3", "ranks 1, 3" or "no rank".
func timeoutRanks(ranks []int) string {
	switch len(ranks) {
	case 0:
		return "no rank"
	case 1:
		return "rank " + strconv.Itoa(ranks[0])
	}
	return "ranks " + timeoutJoin(ranks)
}

func timeoutJoin(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

// RoundDuration keeps a duration in a message readable: "5s", "2.5s", not
// "4.999871234s"; under a microsecond it is kept whole ("1ns", not "0s").
// Every timeout and stall message of the runtimes and the store says its
// durations through it.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}
