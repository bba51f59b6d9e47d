package sim

import (
	"errors"
	"time"

	"github.com/hirlab/hir/runtime"
)

var _ runtime.EventTimer = (*Device)(nil)

// Elapsed is the time between the moments the streams passed start's and
// end's latest records: the CPU runtime's "GPU" times, for traces.
func (d *Device) Elapsed(start, end runtime.Event) (time.Duration, error) {
	a, ok1 := start.(*event)
	b, ok2 := end.(*event)
	if !ok1 || !ok2 {
		return 0, errorf(d.rank, "elapsed: events of another runtime")
	}
	ta, err := a.passed()
	if err != nil {
		return 0, errorf(d.rank, "elapsed: start: %v", err)
	}
	tb, err := b.passed()
	if err != nil {
		return 0, errorf(d.rank, "elapsed: end: %v", err)
	}
	return tb.Sub(ta), nil
}

// passed is when the stream passed e's latest record.
func (e *event) passed() (time.Time, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.recorded == 0:
		return time.Time{}, errNotRecorded
	case e.completed < e.recorded:
		return time.Time{}, errNotPassed
	}
	return e.passedAt, nil
}

var (
	errNotRecorded = errors.New("the event was never recorded")
	errNotPassed   = errors.New("the stream has not passed the event's record yet")
)
