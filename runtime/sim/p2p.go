package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// Send and Recv: the k-th send from a to b meets b's k-th recv from a (both
// numbered when enqueued). The two meet when both streams reach them; the
// sender then copies straight into the receiver's tensor (as a GPU send
// writes into the peer's memory) and tells the receiver it is done.

type p2pArrival struct {
	v *view
}

type p2pPair struct {
	send, recv *view
	done       chan struct{}
}

// Send sends t to peer, ordered on s.
func (d *Device) Send(t runtime.Tensor, peer int, rs runtime.Stream) error {
	return d.p2p(t, peer, rs, true)
}

// Recv receives the next tensor peer sends to this rank into t, ordered on s.
func (d *Device) Recv(t runtime.Tensor, peer int, rs runtime.Stream) error {
	return d.p2p(t, peer, rs, false)
}

func (d *Device) p2p(t runtime.Tensor, peer int, rs runtime.Stream, sending bool) error {
	verb := "recv from"
	if sending {
		verb = "send to"
	}
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	if peer < 0 || peer >= d.rt.size {
		return errorf(d.rank, "%s rank %d: out of range [0, %d)", verb, peer, d.rt.size)
	}
	v, err := d.rt.view(t)
	if err != nil {
		return errorf(d.rank, "%s rank %d: %v", verb, peer, err)
	}
	src, dst := d.rank, peer
	d.mu.Lock()
	var seq int64
	if sending {
		seq = d.sendSeq[peer]
		d.sendSeq[peer]++
	} else {
		src, dst = peer, d.rank
		seq = d.recvSeq[peer]
		d.recvSeq[peer]++
	}
	d.mu.Unlock()
	what := fmt.Sprintf("send #%d from rank %d to rank %d", seq, src, dst)
	me := 1
	if sending {
		me = 0
	}
	return s.enqueue(work{run: func(s *stream) error {
		if v.buf.freed.Load() {
			return errorf(d.rank, "%s: buffer freed before it ran", what)
		}
		key := s.key(meetKey{kind: "p2p", src: src, dst: dst, seq: seq})
		res, err := d.rt.rv.meet(key, []int{src, dst}, me, p2pArrival{v}, d.rt.timeout, what, s.running,
			func(payloads map[int]any) (any, error) {
				sv, rv := payloads[0].(p2pArrival).v, payloads[1].(p2pArrival).v
				if sv.DT != rv.DT || sv.N != rv.N {
					return nil, fmt.Errorf("%s: the send is %s%v (%d bytes) but the recv wants %s%v (%d bytes)",
						what, sv.DT, sv.Shape, sv.N*sv.ESize(), rv.DT, rv.Shape, rv.N*rv.ESize())
				}
				return &p2pPair{send: sv, recv: rv, done: make(chan struct{})}, nil
			})
		if err != nil {
			return errorf(d.rank, "%w", err)
		}
		pair := res.(*p2pPair)
		if sending {
			compute.Copy(&pair.recv.View, &pair.send.View)
			close(pair.done)
			return nil
		}
		timer := time.NewTimer(d.rt.timeout)
		defer timer.Stop()
		select {
		case <-pair.done:
			return nil
		case <-timer.C:
			return errorf(d.rank, "%w", &runtime.TimeoutError{What: what, After: d.rt.timeout, Missing: []int{src}, Awaited: "the data"})
		case <-d.rt.closed:
			return errorf(d.rank, "%s: %v", what, ErrClosed)
		}
	}})
}

// StreamBarrier meets every rank on the stream, as Barrier does (the CPU
// runtime's barrier already waits on the stream, not the host), and,
// unlike Barrier, may be captured: on GPUs it is a barrier kernel, so a
// replay meets the peers' same replay (the meeting is keyed by it, as a
// collective's is) (runtime.StreamBarrierer).
func (d *Device) StreamBarrier(rs runtime.Stream) error {
	return d.meetOnStream(rs, "stream_barrier", &d.streamBarrierSeq, true)
}

var _ runtime.StreamBarrierer = (*Device)(nil)

// Barrier returns (on the stream) once every rank has reached its k-th
// barrier. On GPUs a barrier waits on the host: it cannot be captured.
func (d *Device) Barrier(rs runtime.Stream) error {
	if err := d.notCapturing("Barrier"); err != nil {
		return err
	}
	return d.meetOnStream(rs, "barrier", &d.barrierSeq, false)
}

// meetOnStream enqueues on rs a meeting of every rank: the k-th of this
// kind (counted in *seq) meets every rank's k-th; byReplay keys it by the
// graph replay (and device-loop trip) running it too.
func (d *Device) meetOnStream(rs runtime.Stream, kind string, seq *int64, byReplay bool) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	d.mu.Lock()
	k := *seq
	*seq++
	d.mu.Unlock()
	what := fmt.Sprintf("%s #%d", strings.ReplaceAll(kind, "_", " "), k)
	return s.enqueue(work{run: func(s *stream) error {
		key := meetKey{kind: kind, seq: k}
		if byReplay {
			key = s.key(key)
		}
		_, err := d.rt.rv.meet(key, d.rt.allRanks(), d.rank, nil, d.rt.timeout, what, s.running,
			func(map[int]any) (any, error) { return nil, nil })
		if err != nil {
			return errorf(d.rank, "%w", err)
		}
		return nil
	}})
}
