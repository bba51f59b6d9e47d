package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hirlab/hir/runtime"
)

// ErrTimeout is matched (errors.Is) by every error that says a wait for keys
// or ranks ran out of time.
var ErrTimeout = errors.New("store: timed out")

// ErrBadToken is matched by the error Dial returns when the store refuses the
// job token.
var ErrBadToken = errors.New("store: job token rejected")

// ErrClosed is matched by errors from a client whose connection is gone.
var ErrClosed = errors.New("store: connection closed")

// TimeoutError says which keys a Get or Wait was still missing when its
// timeout ran out.
type TimeoutError struct {
	Op      string        // "get" or "wait"
	Missing []string      // keys not set when the time ran out
	Total   int           // how many keys were waited for
	After   time.Duration // how long it waited
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s: timed out after %s waiting for ", e.Op, runtime.RoundDuration(e.After))
	if len(e.Missing) == 1 {
		b.WriteString("key ")
	} else {
		b.WriteString("keys ")
	}
	b.WriteString(quoteList(e.Missing))
	if e.Total > 1 {
		fmt.Fprintf(&b, " (%d of %d missing)", len(e.Missing), e.Total)
	}
	return b.String()
}

func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// As lets errors.As read the timeout as a *runtime.TimeoutError, the type
// every runtime's timeouts share (no rank is named: the wait was for keys).
func (e *TimeoutError) As(target any) bool {
	t, ok := target.(**runtime.TimeoutError)
	if ok {
		*t = &runtime.TimeoutError{What: "store " + e.Op, After: e.After, Awaited: keyList(e.Missing)}
	}
	return ok
}

func keyList(keys []string) string {
	if len(keys) == 1 {
		return "key " + quoteList(keys)
	}
	return "keys " + quoteList(keys)
}

// BarrierError says which ranks a barrier did not see arrive: either the
// time ran out, or a rank that had not arrived disconnected from the store
// (it died), in which case the barrier fails at once instead of waiting.
type BarrierError struct {
	Name         string
	World        int
	Missing      []int         // ranks that had not arrived (or left by dying)
	Disconnected []int         // of those, ranks whose connection closed
	After        time.Duration // the barrier's timeout
}

func (e *BarrierError) Error() string {
	if len(e.Disconnected) > 0 {
		return fmt.Sprintf("barrier %q: %s disconnected from the store; %s of %d had not arrived",
			e.Name, rankList(e.Disconnected), rankList(e.Missing), e.World)
	}
	return fmt.Sprintf("barrier %q: timed out after %s waiting for %s of %d",
		e.Name, runtime.RoundDuration(e.After), rankList(e.Missing), e.World)
}

// Unwrap makes a timed-out barrier match ErrTimeout; one that failed because
// a rank disconnected does not.
func (e *BarrierError) Unwrap() error {
	if len(e.Disconnected) > 0 {
		return nil
	}
	return ErrTimeout
}

// As lets errors.As read a timed-out barrier as a *runtime.TimeoutError
// naming the ranks that never arrived. One that failed because a rank
// disconnected is not a timeout and does not match.
func (e *BarrierError) As(target any) bool {
	t, ok := target.(**runtime.TimeoutError)
	if !ok || len(e.Disconnected) > 0 {
		return false
	}
	*t = &runtime.TimeoutError{What: fmt.Sprintf("barrier %q", e.Name), After: e.After, Missing: append([]int(nil), e.Missing...)}
	return true
}

// rankList writes "rank 3" or "ranks 2, 3".
func rankList(ranks []int) string {
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + parts[0]
	}
	return "ranks " + strings.Join(parts, ", ")
}

func quoteList(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Quote(k)
	}
	return strings.Join(parts, ", ")
}
