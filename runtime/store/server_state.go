package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// The server's data: the keys (set, add, delete, waits for keys) and which
// ranks are connected, under one mutex with a channel that wakes waiters.

// state is the store's data. Every change closes changed and makes a new
// one, so a waiter takes the current channel under mu, lets go of mu, and
// wakes on the next change to look again.
type state struct {
	mu       sync.Mutex
	data     map[string][]byte
	barriers map[string]*barrierRound
	live     map[int]int  // open connections per rank
	gone     map[int]bool // ranks whose last connection closed
	changed  chan struct{}
}

func (st *state) init() {
	st.data = make(map[string][]byte)
	st.barriers = make(map[string]*barrierRound)
	st.live = make(map[int]int)
	st.gone = make(map[int]bool)
	st.changed = make(chan struct{})
}

// notify wakes every waiter; st.mu must be held.
func (st *state) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

func (st *state) set(key string, val []byte) {
	st.mu.Lock()
	st.data[key] = val
	st.notify()
	st.mu.Unlock()
}

func (st *state) delete(key string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.data[key]
	delete(st.data, key)
	return ok
}

// add treats a missing key as 0 and stores the sum as decimal text, so Get
// of a counter reads "3".
func (st *state) add(key string, delta int64) (int64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var cur int64
	if v, ok := st.data[key]; ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("add to %q: its value is not an integer", key)
		}
		cur = n
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, fmt.Errorf("add %d to %q (%d) overflows int64", delta, key, cur)
	}
	cur += delta
	st.data[key] = []byte(strconv.FormatInt(cur, 10))
	st.notify()
	return cur, nil
}

// waitKeys waits until every key is set and returns their values.
func (st *state) waitKeys(ctx context.Context, op string, keys []string, timeout time.Duration) ([][]byte, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		st.mu.Lock()
		vals, missing := st.lookup(keys)
		ch := st.changed
		st.mu.Unlock()
		if missing == nil {
			return vals, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			st.mu.Lock()
			vals, missing = st.lookup(keys)
			st.mu.Unlock()
			if missing == nil {
				return vals, nil
			}
			return nil, &TimeoutError{Op: op, Missing: missing, Total: len(keys), After: timeout}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lookup returns the values of keys, or the keys that are missing; st.mu
// must be held.
func (st *state) lookup(keys []string) ([][]byte, []string) {
	var missing []string
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		v, ok := st.data[k]
		if !ok {
			missing = append(missing, k)
		}
		vals[i] = v
	}
	return vals, missing
}

func (st *state) rankConnected(rank int) {
	st.mu.Lock()
	st.live[rank]++
	delete(st.gone, rank)
	st.mu.Unlock()
}

func (st *state) rankDisconnected(rank int) {
	st.mu.Lock()
	st.live[rank]--
	if st.live[rank] <= 0 {
		delete(st.live, rank)
		st.gone[rank] = true
		st.notify()
	}
	st.mu.Unlock()
}
