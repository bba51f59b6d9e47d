package evaluator

import "github.com/hirlab/hir/ir"

// Progress is where one rank's host is in the Run in progress, for a
// progress line or a watchdog (Job.Progress, with Options.Progress); it
// may be read while Run runs, from any goroutine.
type Progress struct {
	Rank int
	// Done counts the ops the rank's host finished in this Run: every
	// iteration's body ops count, and a loop once.
	Done int64
	// Op is the op the host is in now: enqueueing work, or waiting (a
	// wait, a sync_stream, a barrier, a stream full of work ahead). Nil
	// before the first op, once the body is done (the host then waits for
	// its streams and reads the outputs), and for an op past the first
	// 2^24-1 of a very large program.
	Op *ir.Op
}

// The rank's host publishes its place with one atomic store per op (the
// hot path stores nothing else for it): the ops it started in this Run
// above progressShift bits, the op id below (progressNone: none, or an
// id too large for the word). A reader derives Done and Op from it.
const (
	progressShift = 24
	progressNone  = 1<<progressShift - 1
)

// startProgress resets the rank's count for a new Run.
func (r *rank) startProgress() {
	r.started = 0
	r.progress.Store(progressNone)
}

// endProgress says the host left the body: every op it started is done.
func (r *rank) endProgress() {
	r.progress.Store(r.started<<progressShift | progressNone)
}

// Progress appends where every hosted rank is in the Run in progress (or
// the last one) to dst, in rank order, and returns it; it adds nothing for
// a job made without Options.Progress, whose hosts publish nothing. It costs a load
// per rank and allocates nothing when dst has room. In graph mode's
// replays the host runs no op of the program: Done stays 0.
func (j *Job) Progress(dst []Progress) []Progress {
	if !j.opts.Progress {
		return dst
	}
	for _, r := range j.ranks {
		w := r.progress.Load()
		p := Progress{Rank: r.id, Done: int64(w >> progressShift)}
		if slot := w & progressNone; slot != progressNone {
			p.Done-- // the op it is in is started, not done
			p.Op = j.plan.ops[slot].op
		}
		dst = append(dst, p)
	}
	return dst
}
