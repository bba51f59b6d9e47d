package cudabench

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
)

// TopoOptions says how MeasureTopology measures each link.
type TopoOptions struct {
	// Bytes is the size of the large copies that time bandwidth (and of
	// the symmetric allocation they go through); 0 means 256 MiB.
	Bytes int64
	// Warmups copies run untimed before Iters timed ones (0: 2 and 5).
	Warmups, Iters int
	// LatencyBytes is the size of the small copies (0: 8), each timed on
	// its own between two events; LatencySamples of them (0: 50), median.
	LatencyBytes   int64
	LatencySamples int
}

func (o TopoOptions) withDefaults() TopoOptions {
	if o.Bytes <= 0 {
		o.Bytes = 256 << 20
	}
	if o.Warmups <= 0 {
		o.Warmups = 2
	}
	if o.Iters <= 0 {
		o.Iters = 5
	}
	if o.LatencyBytes <= 0 {
		o.LatencyBytes = 8
	}
	if o.LatencySamples <= 0 {
		o.LatencySamples = 50
	}
	return o
}

// TopoRank is one rank's GPU.
type TopoRank struct {
	Rank, Device int
	Name         string
}

// Link is what was measured from one rank's GPU to another's (or, for
// From == To, within one GPU: a copy between the two halves of its shard).
type Link struct {
	From, To int // ranks
	// PeerAccess is cuDeviceCanAccessPeer from From's GPU to To's.
	PeerAccess bool
	// Bytes is the size of each timed large copy.
	Bytes int64
	// GBps is Bytes × Iters over the time of Iters back-to-back copies,
	// timed with CUDA events, pushed by From through its mapping of To's
	// shard (10^9 bytes per second, each byte counted once).
	GBps float64
	// Latency is the median time of one small copy, from an event
	// recorded just before it to one just after it.
	Latency time.Duration
	// Err says why the link could not be measured, if it could not.
	Err string `json:",omitempty"`
}

// Topology is every rank's GPU and every ordered pair's link.
type Topology struct {
	Options TopoOptions
	Ranks   []TopoRank
	Links   []Link // sorted by From, then To
}

// MeasureTopology measures, for each ordered pair of ranks, peer access,
// the bandwidth of a large copy through the symmetric mapping and the
// latency of a small one. It is collective: every rank calls it, and
// every rank gets the whole table. Only one rank copies at a time, so the
// figures do not disturb each other.
func MeasureTopology(rt *cuda.Runtime, o TopoOptions) (*Topology, error) {
	o = o.withDefaults()
	d := rt.CUDADevice()
	rank, world := d.Rank(), d.WorldSize()
	topo := &Topology{Options: o}

	me := TopoRank{Rank: rank, Device: d.Ordinal(), Name: d.Info().Name}
	ranks := []TopoRank{me}
	if world > 1 {
		all, err := exchangeJSON(d, "cuda/topo/ranks", me)
		if err != nil {
			return nil, err
		}
		ranks = ranks[:0]
		for _, raw := range all {
			var r TopoRank
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("topo: rank record: %w", err)
			}
			ranks = append(ranks, r)
		}
	}
	topo.Ranks = ranks

	buf, err := d.Alloc(o.Bytes, ir.Symmetric)
	if err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	defer d.Free(buf)
	mine := make([]Link, 0, world)
	for turn := 0; turn < world; turn++ {
		if err := d.Barrier(nil); err != nil {
			return nil, fmt.Errorf("topo: %w", err)
		}
		if turn != rank {
			continue
		}
		for to := 0; to < world; to++ {
			l := Link{From: rank, To: to}
			if err := measureLink(d, &l, buf, ranks[to].Device, o); err != nil {
				l.Err = err.Error()
			}
			mine = append(mine, l)
		}
	}
	if err := d.Barrier(nil); err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	if world == 1 {
		topo.Links = mine
		return topo, nil
	}
	all, err := exchangeJSON(d, "cuda/topo/links", mine)
	if err != nil {
		return nil, err
	}
	for _, raw := range all {
		var ls []Link
		if err := json.Unmarshal(raw, &ls); err != nil {
			return nil, fmt.Errorf("topo: link records: %w", err)
		}
		topo.Links = append(topo.Links, ls...)
	}
	sort.Slice(topo.Links, func(i, j int) bool {
		a, b := topo.Links[i], topo.Links[j]
		return a.From < b.From || a.From == b.From && a.To < b.To
	})
	return topo, nil
}

func exchangeJSON(d *cuda.Device, prefix string, v any) ([][]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	all, err := d.ExchangeAll(prefix, b)
	if err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	return all, nil
}

// measureLink times copies from this rank's shard of buf into rank l.To's
// shard, through this rank's mapping of it (for l.To == this rank, from
// the first half of the shard into the second).
func measureLink(d *cuda.Device, l *Link, buf runtime.Buffer, toDevice int, o TopoOptions) error {
	var err error
	if l.PeerAccess, err = d.CanAccessPeer(toDevice); err != nil {
		return err
	}
	dstBuf, err := d.PeerBuffer(buf, l.To)
	if err != nil {
		return err
	}
	n := buf.Size()
	srcOff, dstOff := int64(0), int64(0)
	if l.To == d.Rank() {
		n /= 2
		dstOff = n
	}
	n = min(n, o.Bytes)
	l.Bytes = n
	// Contiguous copies move bytes (cuMemcpyAsync): the dtype is moot.
	flat := func(b runtime.Buffer, off, bytes int64) runtime.Tensor {
		return runtime.Tensor{Buf: b, Offset: off, DType: ir.Bool, Shape: []int64{bytes}}
	}
	dst, src := flat(dstBuf, dstOff, n), flat(buf, srcOff, n)
	if l.GBps, err = timeCopies(d, dst, src, o.Warmups, o.Iters); err != nil {
		return err
	}
	small := min(o.LatencyBytes, n)
	l.Latency, err = copyLatency(d, flat(dstBuf, dstOff, small), flat(buf, srcOff, small), o.LatencySamples)
	return err
}

// timeCopies returns the bandwidth of iters back-to-back copies of src
// into dst on the default stream, after warmups untimed ones.
func timeCopies(d *cuda.Device, dst, src runtime.Tensor, warmups, iters int) (float64, error) {
	s := d.DefaultStream()
	for i := 0; i < warmups; i++ {
		if err := d.Copy(dst, src, s); err != nil {
			return 0, err
		}
	}
	e0, e1, err := eventPair(d)
	if err != nil {
		return 0, err
	}
	defer e0.Close()
	defer e1.Close()
	if err := s.Record(e0); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := d.Copy(dst, src, s); err != nil {
			return 0, err
		}
	}
	if err := s.Record(e1); err != nil {
		return 0, err
	}
	if err := e1.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := cuda.ElapsedMillis(e0, e1)
	if err != nil {
		return 0, err
	}
	if ms <= 0 {
		return 0, fmt.Errorf("copies timed at %v ms", ms)
	}
	return float64(iters) * float64(dst.Bytes()) / (float64(ms) / 1e3) / 1e9, nil
}

// copyLatency is the median, over samples, of one copy timed alone
// between two events.
func copyLatency(d *cuda.Device, dst, src runtime.Tensor, samples int) (time.Duration, error) {
	s := d.DefaultStream()
	e0, e1, err := eventPair(d)
	if err != nil {
		return 0, err
	}
	defer e0.Close()
	defer e1.Close()
	times := make([]time.Duration, 0, samples)
	for i := 0; i < samples+2; i++ { // two warm-ups
		if err := s.Record(e0); err != nil {
			return 0, err
		}
		if err := d.Copy(dst, src, s); err != nil {
			return 0, err
		}
		if err := s.Record(e1); err != nil {
			return 0, err
		}
		if err := e1.Synchronize(); err != nil {
			return 0, err
		}
		ms, err := cuda.ElapsedMillis(e0, e1)
		if err != nil {
			return 0, err
		}
		if i >= 2 {
			times = append(times, time.Duration(float64(ms)*float64(time.Millisecond)))
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[len(times)/2], nil
}

func eventPair(d *cuda.Device) (runtime.Event, runtime.Event, error) {
	e0, err := d.NewEvent()
	if err != nil {
		return nil, nil, err
	}
	e1, err := d.NewEvent()
	if err != nil {
		e0.Close()
		return nil, nil, err
	}
	return e0, e1, nil
}
