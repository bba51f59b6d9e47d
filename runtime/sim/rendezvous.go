package sim

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hirlab/hir/runtime"
)

// A meeting is where the ranks taking part in one collective event (a
// symmetric alloc or free, a collective's entry, a barrier, a send/recv
// pair) find each other. Events are matched by kind and sequence number: the
// k-th event of a kind on every rank meets the others' k-th. The last rank to
// arrive checks the payloads agree and computes the shared result; a rank
// that waits longer than the timeout fails the meeting with an error naming
// the ranks that never came, and late comers see that error at once.

type meetKey struct {
	kind     string
	src, dst int // for point-to-point pairs
	seq      int64
	// graph and replay: for captured work, which graph (the k-th captured
	// on each rank) and which of its replays; zero for eager work.
	graph  int64
	replay uint64
	trip   uint64 // the trip of a loop the device repeats (0: none)
}

type meeting struct {
	parties  []int
	payloads map[int]any
	done     chan struct{}
	result   any
	err      error
	departed int
}

type rendezvous struct {
	mu       sync.Mutex
	meetings map[meetKey]*meeting
	closed   <-chan struct{}
	stall    *runtime.StallWatch // runtime.Config.Stalled, nil without a hook
	// opened, when set (by tests), sees the key of every meeting made.
	opened func(meetKey)
}

func newRendezvous(closed <-chan struct{}, stall *runtime.StallWatch) *rendezvous {
	return &rendezvous{meetings: map[meetKey]*meeting{}, closed: closed, stall: stall}
}

// meet registers the arrival of party me (an index into parties, which
// holds the ranks used in messages) with payload and blocks until every
// party has arrived (complete then runs once, under the lock, over all
// payloads by party index) or the timeout passes. label is the waiting
// work's label (runtime.Stall.Label), for the stall report.
func (rv *rendezvous) meet(key meetKey, parties []int, me int, payload any, timeout time.Duration, what string, label any,
	complete func(payloads map[int]any) (any, error)) (any, error) {
	rv.mu.Lock()
	m, ok := rv.meetings[key]
	if !ok {
		m = &meeting{parties: parties, payloads: map[int]any{}, done: make(chan struct{})}
		rv.meetings[key] = m
		if rv.opened != nil {
			rv.opened(key)
		}
	}
	if _, dup := m.payloads[me]; dup {
		rv.mu.Unlock()
		return nil, fmt.Errorf("%s: rank %d arrived twice", what, parties[me])
	}
	m.payloads[me] = payload
	select {
	case <-m.done: // failed before this rank came
		rv.depart(key, m)
		err := m.err
		rv.mu.Unlock()
		return nil, fmt.Errorf("rank %d came late: the others gave up: %w", parties[me], err)
	default:
	}
	if len(m.payloads) == len(m.parties) {
		m.result, m.err = complete(m.payloads)
		close(m.done)
	}
	rv.mu.Unlock()

	clock := newWaitClock(timeout, rv.stall)
	defer clock.stop()
	switch rv.await(m, &clock, func(w *runtime.StallWatch) {
		rv.mu.Lock()
		missing := m.missing()
		rv.mu.Unlock()
		w.Report(runtime.Stall{Rank: parties[me], What: what, Label: label, Waited: w.After, Waiting: missing})
	}) {
	case timedOut:
		rv.mu.Lock()
		select {
		case <-m.done: // completed while we took the lock
		default:
			m.err = &runtime.TimeoutError{What: what, After: timeout, Missing: m.missing(), Arrived: m.arrived()}
			close(m.done)
		}
		rv.mu.Unlock()
	case closedDown:
		rv.mu.Lock()
		select {
		case <-m.done:
		default:
			m.err = fmt.Errorf("%s: %w while waiting for %s", what, ErrClosed, rankList("rank", m.missing()))
			close(m.done)
		}
		rv.mu.Unlock()
	}
	rv.mu.Lock()
	rv.depart(key, m)
	rv.mu.Unlock()
	return m.result, m.err
}

// How a wait ended.
const (
	met = iota
	timedOut
	closedDown
)

// await blocks until m completes, the clock's timeout passes (telling
// stalled at the stall threshold on the way) or the runtime closes.
func (rv *rendezvous) await(m *meeting, clock *waitClock, stalled func(*runtime.StallWatch)) int {
	for {
		select {
		case <-m.done:
			return met
		case <-clock.C():
			if clock.expired(stalled) {
				return timedOut
			}
		case <-rv.closed:
			return closedDown
		}
	}
}

// depart forgets the meeting once every party has been through it.
func (rv *rendezvous) depart(key meetKey, m *meeting) {
	m.departed++
	if m.departed == len(m.parties) {
		delete(rv.meetings, key)
	}
}

func (m *meeting) missing() []int {
	var out []int
	for i, r := range m.parties {
		if _, ok := m.payloads[i]; !ok {
			out = append(out, r)
		}
	}
	return out
}

func (m *meeting) arrived() []int {
	var out []int
	for i := range m.payloads {
		out = append(out, m.parties[i])
	}
	sort.Ints(out)
	return out
}

// rankList renders "rank 3" or "ranks 1, 3".
func rankList(word string, rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("%s %d", word, rs[0])
	}
	return fmt.Sprintf("%ss %s", word, joinInts(rs))
}

// Signal channels of a group: each kind of signal counts separately.
const (
	chBarrier = iota
	chData    // a chunk was written into the receiver's memory
	chAck     // the receiver consumed a chunk from its staging slot
	numChannels
)

var channelNames = [numChannels]string{"barrier", "data", "ack"}

// group is the shared state of one collective instance: a signal pad per
// rank (counters per sender and channel, as GPU signal pads are flags in
// symmetric memory that peers bump) and the ranks' staging buffers.
type group struct {
	size    int
	timeout time.Duration
	what    string
	closed  <-chan struct{}
	pads    []*signalPad
	staging []*buffer // rank r's private staging: one slot per sender
	slot    int64     // bytes per staging slot
	bar     barrier
	stall   *runtime.StallWatch // runtime.Config.Stalled, nil without a hook
}

// A group's memory is linear in the ranks: pads and members keep counters
// only for the peers that signalled (maps, not slices of the world size),
// and the barrier is one counter, not a signal from every rank to every
// other. Tables of D counters per rank made every collective quadratic in
// the mesh (64 MiB of counters per collective at 4096 ranks).

type signalPad struct {
	mu      sync.Mutex
	counts  map[int]*[numChannels]uint64 // by sender; absent: no signal yet
	changed chan struct{}                // closed and replaced on every signal
}

// barrier counts the ranks that entered the group's current barrier. Every
// rank runs the same algorithm, so the k-th barrier of every rank is the
// same one, and a rank cannot enter the next before the current completed.
type barrier struct {
	mu      sync.Mutex
	entered []int64       // barriers each rank entered, for the timeout's message
	arrived int           // ranks in the current barrier
	done    chan struct{} // closed (and replaced) when the current one completes
}

func newGroup(size int, timeout time.Duration, what string, closed <-chan struct{}) *group {
	g := &group{size: size, timeout: timeout, what: what, closed: closed}
	g.pads = make([]*signalPad, size)
	for r := range g.pads {
		g.pads[r] = &signalPad{counts: map[int]*[numChannels]uint64{}, changed: make(chan struct{})}
	}
	g.bar = barrier{entered: make([]int64, size), done: make(chan struct{})}
	return g
}

// member is one rank's handle on a group: what it has consumed of its pad.
type member struct {
	g     *group
	rank  int
	label any                          // the collective's work label, for stall reports
	seen  map[int]*[numChannels]uint64 // signals consumed, by sender
	sent  map[int]int64                // staged chunks sent, by receiver
}

func (g *group) member(rank int) *member {
	return &member{g: g, rank: rank, seen: map[int]*[numChannels]uint64{}, sent: map[int]int64{}}
}

// counter returns m[k], made on first use.
func counter(m map[int]*[numChannels]uint64, k int) *[numChannels]uint64 {
	c, ok := m[k]
	if !ok {
		c = new([numChannels]uint64)
		m[k] = c
	}
	return c
}

// signal bumps peer's pad slot for this rank on channel ch. The pad's mutex
// orders the memory writes made before it with the reads after the wait.
func (m *member) signal(peer, ch int) {
	p := m.g.pads[peer]
	p.mu.Lock()
	counter(p.counts, m.rank)[ch]++
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// wait blocks until every rank in from has signalled this rank once more on
// ch than consumed so far, or fails naming the ones that did not.
func (m *member) wait(ch int, from ...int) error {
	p := m.g.pads[m.rank]
	clock := newWaitClock(m.g.timeout, m.g.stall)
	defer clock.stop()
	for {
		p.mu.Lock()
		var missing []int
		for _, f := range from {
			var got, seen uint64
			if c := p.counts[f]; c != nil {
				got = c[ch]
			}
			if c := m.seen[f]; c != nil {
				seen = c[ch]
			}
			if got <= seen {
				missing = append(missing, f)
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if len(missing) == 0 {
			for _, f := range from {
				counter(m.seen, f)[ch]++
			}
			return nil
		}
		select {
		case <-changed:
		case <-clock.C():
			if clock.expired(func(w *runtime.StallWatch) { m.reportStall(w, missing) }) {
				return &runtime.TimeoutError{What: m.g.what, After: m.g.timeout, Missing: missing,
					Awaited: "a " + channelNames[ch] + " signal"}
			}
		case <-m.g.closed:
			return fmt.Errorf("%s: %w", m.g.what, ErrClosed)
		}
	}
}

// barrier returns once every rank of the group entered it (as many times
// as this rank has), or fails naming the ranks that did not. The mutex and
// the closed channel order every rank's writes before it with the reads
// after it.
func (m *member) barrier() error {
	b := &m.g.bar
	b.mu.Lock()
	k := b.entered[m.rank]
	b.entered[m.rank]++
	b.arrived++
	if b.arrived == m.g.size {
		b.arrived = 0
		close(b.done)
		b.done = make(chan struct{})
		b.mu.Unlock()
		return nil
	}
	done := b.done
	b.mu.Unlock()
	// absent lists the ranks that have not entered barrier k.
	absent := func() []int {
		b.mu.Lock()
		defer b.mu.Unlock()
		var out []int
		for r, n := range b.entered {
			if n <= k {
				out = append(out, r)
			}
		}
		return out
	}
	clock := newWaitClock(m.g.timeout, m.g.stall)
	defer clock.stop()
	for {
		select {
		case <-done:
			return nil
		case <-clock.C():
			if !clock.expired(func(w *runtime.StallWatch) { m.reportStall(w, absent()) }) {
				continue
			}
			missing := absent()
			select {
			case <-done: // completed while we looked
				return nil
			default:
			}
			return &runtime.TimeoutError{What: m.g.what, After: m.g.timeout, Missing: missing,
				Awaited: "a " + channelNames[chBarrier] + " signal"}
		case <-m.g.closed:
			return fmt.Errorf("%s: %w", m.g.what, ErrClosed)
		}
	}
}

// reportStall tells the stall hook this member has waited w.After for
// the ranks in missing.
func (m *member) reportStall(w *runtime.StallWatch, missing []int) {
	w.Report(runtime.Stall{Rank: m.rank, What: m.g.what, Label: m.label, Waited: w.After, Waiting: missing})
}

// send stages data in peer's private staging slot for this rank (waiting
// first until the peer consumed the previous chunk) and signals it.
func (m *member) send(peer int, data []byte) error {
	if int64(len(data)) > m.g.slot {
		return fmt.Errorf("%s: internal error: chunk of %d bytes exceeds the %d-byte staging slot", m.g.what, len(data), m.g.slot)
	}
	if m.sent[peer] > 0 {
		if err := m.wait(chAck, peer); err != nil {
			return err
		}
	}
	st := m.g.staging[peer]
	copy(st.data[int64(m.rank)*m.g.slot:], data)
	m.sent[peer]++
	m.signal(peer, chData)
	return nil
}

// recv waits for the next chunk from peer, hands its bytes to use, then
// tells the peer the slot is free again.
func (m *member) recv(peer int, n int64, use func([]byte) error) error {
	if err := m.wait(chData, peer); err != nil {
		return err
	}
	st := m.g.staging[m.rank]
	off := int64(peer) * m.g.slot
	err := use(st.data[off : off+n])
	m.signal(peer, chAck)
	return err
}

// finish waits until every peer consumed the last chunk this rank sent, so
// staging buffers can be released.
func (m *member) finish() error {
	for p, n := range m.sent {
		if n > 0 {
			if err := m.wait(chAck, p); err != nil {
				return err
			}
		}
	}
	return nil
}
