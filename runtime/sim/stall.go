package sim

import (
	"time"

	"github.com/hirlab/hir/runtime"
)

// waitClock times one wait for peers: it fires first at the stall
// threshold, when a runtime.Config.Stalled hook is set (the wait reports
// itself once and goes on), then at the timeout. Without a hook it is the
// plain timeout timer the waits had, so they pay nothing more.
type waitClock struct {
	timer   *time.Timer
	watch   *runtime.StallWatch // nil once reported, or without a hook
	timeout time.Duration
}

func newWaitClock(timeout time.Duration, watch *runtime.StallWatch) waitClock {
	if watch != nil && watch.After < timeout {
		return waitClock{timer: time.NewTimer(watch.After), watch: watch, timeout: timeout}
	}
	return waitClock{timer: time.NewTimer(timeout), timeout: timeout}
}

// C fires at the stall threshold, then at the timeout.
func (c *waitClock) C() <-chan time.Time { return c.timer.C }

// expired is called when C fired: it reports whether the timeout has
// passed. At the stall threshold it calls stalled (which says who is
// missing and reports it), rearms for the rest of the timeout and returns
// false.
func (c *waitClock) expired(stalled func(w *runtime.StallWatch)) bool {
	if c.watch == nil {
		return true
	}
	w := c.watch
	c.watch = nil
	stalled(w)
	c.timer.Reset(c.timeout - w.After)
	return false
}

func (c *waitClock) stop() { c.timer.Stop() }
