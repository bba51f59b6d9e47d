package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Named barriers: the rounds the ranks meet in, and what a round that
// cannot complete (a timeout, a rank gone, a cancel) reports.

// barrierRound is one use of a named barrier; when every rank has arrived
// it is done and the name starts afresh.
type barrierRound struct {
	world   int
	arrived map[int]bool  // ranks waiting in the round now
	left    map[int]bool  // ranks that arrived, then gave up (timeout, cancel, died)
	done    chan struct{} // closed when all world ranks are in arrived
}

func (st *state) barrier(ctx context.Context, name string, rank, world int, timeout time.Duration) error {
	if err := checkRank("barrier", name, rank, world); err != nil {
		return err
	}
	st.mu.Lock()
	round := st.barriers[name]
	if round == nil {
		round = &barrierRound{world: world, arrived: make(map[int]bool), left: make(map[int]bool), done: make(chan struct{})}
		st.barriers[name] = round
	}
	if round.world != world {
		st.mu.Unlock()
		return fmt.Errorf("barrier %q: rank %d says the world size is %d, but ranks already waiting say %d",
			name, rank, world, round.world)
	}
	if round.arrived[rank] {
		st.mu.Unlock()
		return fmt.Errorf("barrier %q: rank %d arrived twice", name, rank)
	}
	round.arrived[rank] = true
	delete(round.left, rank)
	if len(round.arrived) == world {
		close(round.done)
		delete(st.barriers, name)
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		st.mu.Lock()
		if isClosed(round.done) {
			st.mu.Unlock()
			return nil
		}
		if gone := round.disconnected(st); gone != nil {
			err := &BarrierError{Name: name, World: world, Missing: round.missing(gone), Disconnected: gone, After: timeout}
			round.leave(st, name, rank)
			st.mu.Unlock()
			return err
		}
		ch := st.changed
		st.mu.Unlock()

		select {
		case <-round.done:
			return nil
		case <-ch:
		case <-timer.C:
			st.mu.Lock()
			defer st.mu.Unlock()
			if isClosed(round.done) {
				return nil
			}
			gone := round.disconnected(st)
			err := &BarrierError{Name: name, World: world, Missing: round.missing(gone), Disconnected: gone, After: timeout}
			round.leave(st, name, rank)
			return err
		case <-ctx.Done():
			st.mu.Lock()
			defer st.mu.Unlock()
			if isClosed(round.done) {
				return nil
			}
			round.leave(st, name, rank)
			return ctx.Err()
		}
	}
}

// disconnected lists the ranks not waiting in the round whose connection to
// the store has closed: the round cannot complete. st.mu held.
func (r *barrierRound) disconnected(st *state) []int {
	var out []int
	for i := range r.world {
		if !r.arrived[i] && st.gone[i] {
			out = append(out, i)
		}
	}
	return out
}

// missing lists, in order, the ranks that never came to the round, plus
// those in gone. A rank that came and gave up on its own timeout is not
// blamed: it did arrive. st.mu held.
func (r *barrierRound) missing(gone []int) []int {
	var out []int
	for i := range r.world {
		if (!r.arrived[i] && !r.left[i]) || slices.Contains(gone, i) {
			out = append(out, i)
		}
	}
	return out
}

// leave takes a rank that gives up out of the round, so it may try the
// barrier again; st.mu held.
func (r *barrierRound) leave(st *state, name string, rank int) {
	delete(r.arrived, rank)
	r.left[rank] = true
	if len(r.arrived) == 0 && st.barriers[name] == r {
		delete(st.barriers, name)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
