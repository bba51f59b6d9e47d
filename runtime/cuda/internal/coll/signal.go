package coll

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/nccl"
	"github.com/hirlab/hir/runtime/store"
)

// Comm is one rank's collectives over its device: the knobs, and what
// they keep (signal pads, kernels, NCCL, p2p inboxes).
type Comm struct {
	*gpu.Device
	Tune  Tuning    // the knobs: Options.Tuning, else the environment's (knobs.go)
	State CommState // signal pads, kernels, NCCL, p2p inboxes
}

// commState is what a device keeps for collectives: the signal pads (one
// symmetric allocation, made at the first collective, which every rank
// reaches at the same point), the host-mapped status words kernels report
// timeouts in, one channel per stream that runs collectives, the compiled
// kernels, the cross-rank checks already done, the NCCL communicator and
// the point-to-point inboxes.
type CommState struct {
	Mu      sync.Mutex
	ready   bool
	pad     *gpu.Buffer // maxChannels × channelPad bytes per rank
	padPtrs []uint64    // each rank's pad as mapped here
	epochs  *gpu.Buffer // maxChannels × epochWords counters, this rank's (device memory)
	status  *gpu.Buffer // statusWords words of pinned, device-mapped host memory
	words   []uint64    // the same words as the host sees them

	Chans    map[*gpu.Stream]*CommChannel
	chanList []*CommChannel
	last     *CommChannel    // the channel of the collective issued last (order.go)
	checked  map[string]bool // call descriptors every rank agreed on
	nchecks  int
	seq      atomic.Uint64 // collectives launched, for messages
	Plans    map[PlanKey]*CollPlan

	// blocks is the most blocks a kernel launches, the same on every
	// rank (the smallest rank's collBlocks); table is auto's measured
	// table where every rank loaded the same one (else nil: compiled-in
	// choices), tableNote what became of it.
	Blocks    int
	Table     *autotable.AutoTable
	tableNote string

	fault atomic.Pointer[error] // sticky: a collective timed out or failed

	mods   commModules
	warmMu sync.Mutex
	warmed map[string]bool // modules WarmCollectives has started compiling

	ncclComm *nccl.Comm
	ncclErr  error
	ncclInit bool

	p2pMu sync.Mutex
	p2p   map[int]*p2pPair
	// p2pCounts: per peer, the transfer counters of sends to it, then of
	// recvs from it, epochWords/2 words each, on the device (as the
	// channels' signal counters: a replayed send counts anew).
	p2pCounts *gpu.Buffer
}

// commChannel orders the collectives of one stream: its own pad region
// (so collectives on different streams never share signal slots) and
// epoch (the signal values handed out so far), and the staging its ring
// kernels use.
type CommChannel struct {
	Idx       int
	free      bool // its stream closed: the next new stream takes it
	epoch     uint64
	seq       uint64 // the collective being launched (cs.seq), for messages
	log       []launchRecord
	stage     *gpu.Buffer // ring staging, symmetric, made on the channel's first ring
	stagePtrs []uint64
	ll        *gpu.Buffer // LL staging, symmetric, made on the channel's first LL launch
	llPtrs    []uint64
	bulk      *gpu.Buffer // LL bulk staging, symmetric, made on the channel's first bulk launch
	bulkPtrs  []uint64
	ll128     *gpu.Buffer // LL128 staging, symmetric, made on the channel's first LL128 launch
	ll128Ptrs []uint64

	// copy_engine: a second stream for the local copy, and the events
	// that fork it from and join it to the collective's stream.
	side           *gpu.Stream
	evFork, evJoin *gpu.Event
	// reduce_scatter copy_engine in chunks (Tuning.RSCEChunk): a chunk's
	// pulls landed ([0], [1]: its double-buffer slot) and its reduce done
	// ([2], [3]), made with side.
	evChunk [4]*gpu.Event

	// The stream the channel serves (nil once it closed), and the event
	// recorded after its last collective while several streams ran
	// collectives (order.go): doneSet says it was, doneIn in which
	// capture (nil: eagerly).
	stream  *gpu.Stream
	done    *gpu.Event
	doneSet bool
	doneIn  any
}

// launchRecord remembers which collective owns signal values (lo, hi], so
// a timed-out wait can be named.
type launchRecord struct {
	lo, hi uint64
	seq    uint64
	what   string
	start  time.Time
}

const launchLogSize = 512

// commReady makes the comm state on first use: collective (every rank
// calls it at its first collective).
func (d *Comm) commReady() (*CommState, error) {
	c := &d.State
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.ready {
		return c, nil
	}
	if err := d.CheckOpen(); err != nil {
		return nil, err
	}
	if d.Opts.WorldSize > maxRanks {
		return nil, fmt.Errorf("cuda: symmetric-memory collectives handle up to %d ranks, not %d: use algo=nccl", maxRanks, d.Opts.WorldSize)
	}
	if err := d.ensureStatusLocked(); err != nil {
		return nil, err
	}
	if err := d.commSetup(c); err != nil {
		return nil, err
	}
	pad, err := d.AllocSymmetric(int64(MaxChannels * ChannelPad))
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d: allocating the collectives' signal pads: %w", d.Opts.Rank, err)
	}
	eb, err := d.Alloc(MaxChannels*epochWords*8, ir.Global) // zero-filled
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cuda: rank %d: allocating the collectives' signal counters: %w", d.Opts.Rank, err), d.Free(pad))
	}
	c.epochs = eb.(*gpu.Buffer)
	ptrs := make([]uint64, len(pad.Sym.Maps))
	for r, m := range pad.Sym.Maps {
		ptrs[r] = m.Ptr
	}
	c.pad, c.padPtrs = pad, ptrs
	c.Chans = map[*gpu.Stream]*CommChannel{}
	c.checked = map[string]bool{}
	c.Plans = map[PlanKey]*CollPlan{}
	c.ready = true
	return c, nil
}

// commSetup settles, with every rank, what kernels and auto depend on:
// the grid (the smallest of the ranks' collBlocks, since block b meets
// block b) and the auto table (used only where every rank loaded the
// same one). Called with c.mu held, at the first collective.
func (d *Comm) commSetup(c *CommState) error {
	blocks := collBlocks(d.Props.Multiprocessors, d.Tune.Blocks)
	table, digest, note := autotable.LoadAutoTableFor(d.Props.Name)
	if w := d.Opts.WorldSize; w > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
		defer cancel()
		raw, err := store.ExchangeAll(ctx, d.Opts.Store, "cuda/coll/setup", d.Opts.Rank, w, []byte(fmt.Sprintf("%d %s", blocks, digest)), d.Opts.Timeout)
		if err != nil {
			return fmt.Errorf("cuda: rank %d: the ranks did not all arrive at their first collective: %w", d.Opts.Rank, err)
		}
		for r, v := range raw {
			var b int
			var dg string
			if _, err := fmt.Sscanf(string(v), "%d %s", &b, &dg); err != nil {
				return fmt.Errorf("cuda: rank %d: malformed setup record from rank %d: %q", d.Opts.Rank, r, v)
			}
			blocks = min(blocks, b)
			if dg != digest && table != nil {
				table, note = nil, fmt.Sprintf("not used: rank %d has another auto table", r)
			}
		}
	}
	c.Blocks, c.Table, c.tableNote = max(blocks, 1), table, note
	return nil
}

// ensureStatus makes, locally, what point-to-point transfers need too:
// the status words kernels report in and the kernel table.
func (d *Comm) ensureStatus() error {
	d.State.Mu.Lock()
	defer d.State.Mu.Unlock()
	return d.ensureStatusLocked()
}

func (d *Comm) ensureStatusLocked() error {
	c := &d.State
	if c.status != nil {
		return nil
	}
	if err := d.CheckOpen(); err != nil {
		return err
	}
	sb, err := d.Alloc(StatusWords*8, ir.Host)
	if err != nil {
		return fmt.Errorf("cuda: rank %d: allocating the collectives' status words: %w", d.Opts.Rank, err)
	}
	st := sb.(*gpu.Buffer)
	c.status = st
	c.words = unsafe.Slice((*uint64)(st.Host), StatusWords)
	c.mods = commModules{mods: map[string]*gpu.Module{}, errs: map[string]error{}, fns: map[string]*gpu.Function{}}
	return nil
}

// channel returns s's channel, assigning on first use the free channel
// of the lowest number (one a closed stream gave back: releaseChannel),
// else a new one. Every rank runs the same collectives on matching streams
// in the same order and closes the same streams, so channel numbers agree
// across ranks. A reused channel keeps its counters and staging. Called
// with c.mu held.
func (c *CommState) Channel(s *gpu.Stream, rank int) (*CommChannel, error) {
	if ch, ok := c.Chans[s]; ok {
		return ch, nil
	}
	for _, ch := range c.chanList {
		if ch.free {
			ch.free, ch.stream, ch.doneSet = false, s, false
			c.Chans[s] = ch
			return ch, nil
		}
	}
	if len(c.chanList) >= MaxChannels {
		return nil, fmt.Errorf("cuda: rank %d: collectives ran on more than %d streams; symmetric-memory collectives have %d channels", rank, MaxChannels, MaxChannels)
	}
	ch := &CommChannel{Idx: len(c.chanList), stream: s}
	c.Chans[s] = ch
	c.chanList = append(c.chanList, ch)
	return ch, nil
}

// releaseChannel gives back the channel of a stream that is closing (its
// work done: stream.destroy synchronises first), so a process that makes
// and closes many jobs never runs out of channels; the stream's cached
// plans go with it.
func (c *CommState) ReleaseChannel(s *gpu.Stream) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	ch, ok := c.Chans[s]
	if !ok {
		return
	}
	delete(c.Chans, s)
	ch.free, ch.stream, ch.doneSet = true, nil, false
	if c.last == ch {
		c.last = nil // its work is done: the stream synchronised before closing
	}
	for k := range c.Plans {
		if k.S == s {
			delete(c.Plans, k)
		}
	}
}

// padsFor is every rank's pad region of channel ch, as mapped here.
func (c *CommState) padsFor(ch *CommChannel) (out [maxRanks]uint64) {
	for r, p := range c.padPtrs {
		out[r] = p + uint64(ch.Idx*ChannelPad)
	}
	return out
}

// take gives launch a the next k signal values of ch (a.Base, a.NSig).
// Called with c.mu held.
func (ch *CommChannel) take(a *CollArgs, k uint64, what string) {
	a.Base, a.NSig = ch.reserve(k, what), k
}

// reserve hands a launch the signal values base+1..base+k of ch and
// records them. The kernel takes the same values from the channel's
// device-side counters (a.Epochs), which advance by k on the device:
// ch.epoch mirrors them for eager launches, to name a launch whose wait
// timed out; graph replays advance only the device's. Called with c.mu
// held.
func (ch *CommChannel) reserve(k uint64, what string) uint64 {
	base := ch.epoch
	ch.epoch += k
	if len(ch.log) >= launchLogSize {
		ch.log = append(ch.log[:0], ch.log[launchLogSize/2:]...)
	}
	ch.log = append(ch.log, launchRecord{lo: base, hi: base + k, seq: ch.seq, what: what, start: time.Now()})
	return base
}

// faultErr is the sticky error of this device's collectives, nil while
// none failed. It reads the status words (host memory the kernels write
// when a wait times out), so it costs a load when all is well.
func (d *Comm) FaultErr() error {
	c := &d.State
	if p := c.fault.Load(); p != nil {
		return *p
	}
	if c.words == nil || atomic.LoadUint64(&c.words[0]) == 0 {
		return nil
	}
	err := d.describeFault()
	c.fault.CompareAndSwap(nil, &err)
	return *c.fault.Load()
}

// setFault makes err the sticky collective error (the first one wins).
func (d *Comm) setFault(err error) {
	d.State.fault.CompareAndSwap(nil, &err)
}

// ErrCollectiveTimeout matches the error of a collective whose kernel
// waited too long for a peer.
var ErrCollectiveTimeout = errors.New("collective timed out")

// describeFault names every wait that timed out: the collective, the
// block and the rank that never signalled.
func (d *Comm) describeFault() error {
	c := &d.State
	type miss struct {
		ch, blk, peer int
		plane         uint64
		want          uint64
	}
	var misses []miss
	for i := 1; i < len(c.words); i++ {
		v := atomic.LoadUint64(&c.words[i])
		if v == 0 {
			continue
		}
		k := i - 1
		misses = append(misses, miss{ch: k / (MaxBlocks * maxRanks), blk: k / maxRanks % MaxBlocks, peer: k % maxRanks,
			plane: v>>56 - 1, want: v & (1<<56 - 1)})
	}
	if len(misses) == 0 {
		return fmt.Errorf("cuda: rank %d: %w (no detail recorded)", d.Opts.Rank, ErrCollectiveTimeout)
	}
	sort.Slice(misses, func(i, j int) bool { return misses[i].peer < misses[j].peer })
	timeout := d.Opts.Timeout
	var parts []string
	missing := map[int]bool{}
	seen := map[string]bool{}
	for _, m := range misses {
		var what string
		switch {
		case m.ch == chanP2PRecv && m.plane == 3:
			what = fmt.Sprintf("recv from rank %d: it sent %d bytes, but this recv expects a different size", m.peer, m.want)
		case m.ch == chanP2PSend:
			what = fmt.Sprintf("send to rank %d: rank %d did not take the data (transfer %d) within %v; is it receiving from rank %d?", m.peer, m.peer, m.want, timeout, d.Opts.Rank)
		case m.ch == chanP2PRecv:
			what = fmt.Sprintf("recv from rank %d: nothing arrived (transfer %d) within %v; is rank %d sending to rank %d?", m.peer, m.want-1, timeout, m.peer, d.Opts.Rank)
		default:
			missing[m.peer] = true
			what = fmt.Sprintf("%s: waited %v for rank %d (block %d, %s signal %d)", c.launchFor(m.ch, m.want), timeout, m.peer, m.blk,
				[]string{"barrier", "data", "ack"}[min(m.plane, 2)], m.want)
		}
		if !seen[what] {
			seen[what] = true
			parts = append(parts, what)
		}
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("and %d more", len(parts)-4))
	}
	msg := strings.Join(parts, "; ")
	if len(missing) > 0 {
		var ranks []string
		for r := range missing {
			ranks = append(ranks, fmt.Sprint(r))
		}
		sort.Strings(ranks)
		msg += fmt.Sprintf(". Rank(s) %s never reached this collective: every rank must run the same collectives in the same order (did a rank fail, exit, or take another branch?)", strings.Join(ranks, ", "))
	}
	return fmt.Errorf("cuda: rank %d: %w: %s", d.Opts.Rank, ErrCollectiveTimeout, msg)
}

// launchFor names the collective of channel ch that owns signal value v.
func (c *CommState) launchFor(ch int, v uint64) string {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if ch < len(c.chanList) {
		for i := len(c.chanList[ch].log) - 1; i >= 0; i-- {
			r := c.chanList[ch].log[i]
			if v > r.lo && v <= r.hi {
				return fmt.Sprintf("%s (collective #%d, stream channel %d)", r.what, r.seq, ch)
			}
		}
	}
	return fmt.Sprintf("a collective on channel %d", ch)
}

// CommCheck decorates a stream or event synchronisation: when a
// collective on this device timed out, that is the error to report.
func (d *Comm) CommCheck(err error) error {
	if ferr := d.FaultErr(); ferr != nil {
		if err == nil {
			return ferr
		}
		return errors.Join(ferr, err)
	}
	return err
}

// ReleaseComm frees what collectives allocated: the signal pads (a
// collective free: every rank calls it), the ring staging, the status
// words, the point-to-point inboxes and the NCCL communicator. The next
// collective makes them again. Tests call it before checking for leaks.
func (d *Comm) ReleaseComm() error {
	return d.releaseComm(true)
}

// closeComm is ReleaseComm without the collective step (Runtime.Close).
func (d *Comm) CloseComm() error { return d.releaseComm(false) }

func (d *Comm) releaseComm(collective bool) error {
	c := &d.State
	c.Mu.Lock()
	defer c.Mu.Unlock()
	var errs []error
	if c.ncclComm != nil {
		errs = append(errs, d.WithCtx(func() error {
			if collective {
				return c.ncclComm.Destroy()
			}
			return c.ncclComm.Abort()
		}))
		c.ncclComm, c.ncclInit, c.ncclErr = nil, false, nil
	}
	errs = append(errs, d.releaseP2P())
	free := d.Release
	if collective {
		free = func(b *gpu.Buffer) error { return d.Free(b) }
	}
	for _, ch := range c.chanList {
		if ch.stage != nil {
			errs = append(errs, free(ch.stage))
		}
		for _, b := range []*gpu.Buffer{ch.ll, ch.bulk, ch.ll128} {
			if b != nil {
				errs = append(errs, free(b))
			}
		}
		if ch.side != nil {
			errs = append(errs, ch.side.Destroy())
		}
		for _, e := range append([]*gpu.Event{ch.evFork, ch.evJoin, ch.done}, ch.evChunk[:]...) {
			if e != nil {
				errs = append(errs, e.Destroy())
			}
		}
	}
	if c.pad != nil {
		errs = append(errs, free(c.pad))
	}
	if c.epochs != nil {
		errs = append(errs, d.Release(c.epochs))
	}
	if c.status != nil {
		errs = append(errs, d.Release(c.status))
	}
	for _, m := range c.mods.mods {
		errs = append(errs, m.Unload())
	}
	// Back to the state before the first collective (the locks stay).
	c.ready, c.pad, c.padPtrs, c.epochs, c.status, c.words = false, nil, nil, nil, nil, nil
	c.Chans, c.chanList, c.checked, c.nchecks, c.Plans, c.last = nil, nil, nil, 0, nil, nil
	c.Blocks, c.Table, c.tableNote = 0, nil, ""
	c.mods = commModules{}
	c.fault.Store(nil)
	return errors.Join(errs...)
}

// AutoTableNote says which auto table this device's collectives follow
// (after its first collective), or why none.
func (d *Comm) AutoTableNote() string {
	d.State.Mu.Lock()
	defer d.State.Mu.Unlock()
	if !d.State.ready {
		return "not loaded yet (at the first collective)"
	}
	return d.State.tableNote
}
