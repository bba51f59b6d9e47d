package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/runtime"
)

// A long or stuck run explains itself on stderr: a progress line, redrawn
// in place on a terminal once the run has taken progressDelay, and a line
// for every wait for peers that lasts the runtime's stall threshold
// (runtime.Config.Stalled).

// When the progress line appears and how often it is redrawn; the stall
// threshold hirrun asks of the runtime (0: runtime.DefaultStallAfter).
// Tests shorten them.
var (
	progressDelay = 2 * time.Second
	progressEvery = 250 * time.Millisecond
	stallAfter    time.Duration
)

// progressModes are --progress's values.
var progressModes = []string{"auto", "always", "never"}

func checkProgressMode(mode string) error {
	if !slices.Contains(progressModes, mode) {
		return fmt.Errorf("--progress %s: want one of %s", mode, strings.Join(progressModes, ", "))
	}
	return nil
}

// showProgress says whether --progress mode draws the line on w: always,
// never, or (auto) when w is a terminal.
func showProgress(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// watch is one hirrun run's progress line and stall reports. Everything
// it writes goes through mu, so a stall report never lands in the middle
// of the line.
type watch struct {
	w     io.Writer
	show  bool
	runs  int
	run   atomic.Int64 // the Run in progress, from 1
	job   atomic.Pointer[evaluator.Job]
	start time.Time

	mu    sync.Mutex
	drawn bool // the line is on the screen, the cursor at its end
	buf   []evaluator.Progress

	stop, done chan struct{}
}

func newWatch(w io.Writer, show bool, runs int) *watch {
	return &watch{w: w, show: show, runs: runs}
}

// config adds the stall hook to a runtime's configuration.
func (wa *watch) config(cfg runtime.Config) runtime.Config {
	cfg.Stalled, cfg.StallAfter = wa.stalled, stallAfter
	return cfg
}

// attach starts watching job: the line appears after progressDelay, if
// shown. finish stops it.
func (wa *watch) attach(job *evaluator.Job) {
	wa.job.Store(job)
	if !wa.show {
		return
	}
	wa.start = time.Now()
	wa.stop, wa.done = make(chan struct{}), make(chan struct{})
	go wa.loop()
}

// runStarted says which Run of --repeat is in progress (from 1).
func (wa *watch) runStarted(i int) { wa.run.Store(int64(i)) }

func (wa *watch) loop() {
	defer close(wa.done)
	delay := time.NewTimer(progressDelay)
	defer delay.Stop()
	select {
	case <-delay.C:
	case <-wa.stop:
		return
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		wa.draw()
		select {
		case <-tick.C:
		case <-wa.stop:
			return
		}
	}
}

// finish stops the line: drawn once more, with its final counts, and
// ended with a newline (nothing, if it never appeared).
func (wa *watch) finish() {
	if wa.stop == nil {
		return
	}
	close(wa.stop)
	<-wa.done
	wa.stop = nil
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.drawn {
		wa.drawLocked(true)
		fmt.Fprintln(wa.w)
		wa.drawn = false
	}
}

func (wa *watch) draw() {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.drawLocked(false)
}

// drawLocked redraws the line in place: a carriage return, the text, and
// an erase to the end of the line for what a longer line left.
func (wa *watch) drawLocked(final bool) {
	job := wa.job.Load()
	if job == nil {
		return
	}
	wa.buf = job.Progress(wa.buf[:0])
	line := progressText(time.Since(wa.start), int(wa.run.Load()), wa.runs, wa.buf, final)
	fmt.Fprint(wa.w, "\r"+line+"\x1b[K")
	wa.drawn = true
}

// stalled is the runtime's stall hook: one line, on a line of its own. A
// wait the runtime cannot place (the host's own) is placed at the op the
// rank's host is in.
func (wa *watch) stalled(s runtime.Stall) {
	if s.Label == nil {
		if job := wa.job.Load(); job != nil {
			for _, p := range job.Progress(nil) {
				if p.Rank == s.Rank && p.Op != nil {
					s.Label = p.Op
				}
			}
		}
	}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.drawn {
		fmt.Fprint(wa.w, "\r\x1b[K") // the next tick draws the line again, below
		wa.drawn = false
	}
	fmt.Fprintln(wa.w, s.String())
}

// maxListedRanks is the most ranks whose counts the line lists one by one;
// past it, the line gives the range.
const maxListedRanks = 8

// progressText is the progress line: the time so far, the Run of
// --repeat, the ops each rank's host has done, and where the slowest one
// (fewest ops done; the lowest rank of a tie) is, unless the line is the
// final one:
//
//	[3.2s] run 2/5, ops done: 1200 1180 40 1190 | slowest: rank 2 at prog.hir:12:3 (all_reduce)
func progressText(elapsed time.Duration, run, runs int, ranks []evaluator.Progress, final bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%.1fs] ", elapsed.Seconds())
	if runs > 1 {
		fmt.Fprintf(&b, "run %d/%d, ", run, runs)
	}
	if len(ranks) == 0 {
		return b.String() + "starting"
	}
	slow := 0
	lo, hi := ranks[0].Done, ranks[0].Done
	for i, p := range ranks {
		if p.Done < ranks[slow].Done {
			slow = i
		}
		lo, hi = min(lo, p.Done), max(hi, p.Done)
	}
	b.WriteString("ops done: ")
	if len(ranks) <= maxListedRanks {
		for i, p := range ranks {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, p.Done)
		}
	} else {
		fmt.Fprintf(&b, "%d..%d over %d ranks", lo, hi, len(ranks))
	}
	if final {
		return b.String()
	}
	if len(ranks) == 1 {
		b.WriteString(" | ")
	} else {
		fmt.Fprintf(&b, " | slowest: rank %d ", ranks[slow].Rank)
	}
	switch p := ranks[slow]; {
	case p.Op != nil:
		fmt.Fprintf(&b, "at %s (%s)", p.Op.Pos, p.Op.Code)
	case p.Done == 0:
		b.WriteString("starting") // binding its inputs
	default:
		b.WriteString("waiting for its streams") // past its last op
	}
	return b.String()
}
