package evaluator

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/transfer"
)

// One-sided transfers: register, transfer, deregister (wait is the common
// async wait). A rank keeps, across Runs, its transfer agent (made, with
// the backend's availability probe, at the first register), its
// registrations keyed by (register op, tensor) and its prepared handles
// keyed by (transfer op, registration, local tensor, peer): a program run
// again registers and prepares nothing anew.
//
// In a Run, `register` synchronises the current stream and meets every
// rank (a new registration's exchange, or for a cached one a barrier), so
// what each rank stored in its tensor before registering is what peers'
// transfers see; `transfer` posts on the communication stream, ordered
// after the current one, and `wait` orders the current stream after it;
// `deregister` waits on the host for this rank's transfers of the
// registration, then meets every rank, after which no peer touches the
// tensor. The registration itself stays cached for the next Run and is
// released when the job closes.

type transferState struct {
	agent    *transfer.Agent
	agentErr error // the probe's verdict, given to every register
	regs     map[regKey]*transfer.Registration
	handles  map[xferKey]*transfer.Handle
	bound    []*transfer.Registration // by value id: this Run's live handles
}

type regKey struct {
	op     int // op id
	buf    uint64
	offset int64
	layout layout
}

type xferKey struct {
	op     int // op id
	reg    *transfer.Registration
	buf    uint64
	offset int64
	layout layout
	peer   int
}

// maxKeyRank is the most axes a layout holds in its arrays; a tensor of
// more spills into long.
const maxKeyRank = 6

// layout is a tensor's dtype, shape and strides as a comparable key,
// made without formatting.
type layout struct {
	dtype   ir.DType
	rank    int
	strided bool // Strides given (a nil Strides is contiguous)
	shape   [maxKeyRank]int64
	strides [maxKeyRank]int64
	long    string // shape and strides when rank > maxKeyRank
}

func layoutOf(t runtime.Tensor) layout {
	l := layout{dtype: t.DType, rank: len(t.Shape), strided: len(t.Strides) > 0}
	if len(t.Shape) > maxKeyRank || len(t.Strides) > maxKeyRank {
		l.long = fmt.Sprint(t.Shape, t.Strides)
		return l
	}
	copy(l.shape[:], t.Shape)
	copy(l.strides[:], t.Strides)
	return l
}

func (r *rank) transfers() *transferState {
	if r.xfer == nil {
		r.xfer = &transferState{regs: map[regKey]*transfer.Registration{}, handles: map[xferKey]*transfer.Handle{},
			bound: make([]*transfer.Registration, len(r.job.plan.values))}
	}
	return r.xfer
}

// oneSided runs register, transfer and deregister.
func (r *rank) oneSided(f *frame, p *opPlan) error {
	op := p.op
	switch op.Code {
	case ir.OpRegister:
		return r.register(f, p)
	case ir.OpTransfer:
		return r.transfer(f, p)
	case ir.OpDeregister:
		return r.deregister(p)
	}
	return fmt.Errorf("the evaluator cannot run %s here", op.Code)
}

func (r *rank) register(f *frame, p *opPlan) error {
	t, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	st := r.transfers()
	if st.agent == nil && st.agentErr == nil {
		st.agent, st.agentErr = transfer.New(r.dev) // collective: every rank is at its first register
	}
	if st.agentErr != nil {
		return fmt.Errorf("%w (the %s backend)", st.agentErr, r.job.rt.Name())
	}
	// Peers may read the tensor as soon as register returns on every rank:
	// the work that fills it must be done.
	if err := f.current.Synchronize(); err != nil {
		return err
	}
	key := regKey{op: p.id, buf: t.Buf.ID(), offset: t.Offset, layout: layoutOf(t)}
	reg, ok := st.regs[key]
	if ok {
		r.stats.HandleHits++
		// Every rank hits alike (buffers are reused identically on every
		// rank), and meets the others as a fresh registration would.
		if err := reg.Quiesce(); err != nil {
			return err
		}
	} else {
		r.stats.HandleMisses++
		if reg, err = st.agent.Register(t); err != nil {
			return err
		}
		st.regs[key] = reg
	}
	st.bound[p.res[0]] = reg
	f.vals[p.res[0]] = slot{live: true}
	return nil
}

func (r *rank) registration(id int) (*transfer.Registration, error) {
	if r.xfer != nil {
		if reg := r.xfer.bound[id]; reg != nil {
			return reg, nil
		}
	}
	return nil, fmt.Errorf("%s is not a live registration here (deregistered, or never registered)", r.job.plan.values[id])
}

func (r *rank) transfer(f *frame, p *opPlan) error {
	op := p.op
	reg, err := r.registration(p.args[0])
	if err != nil {
		return err
	}
	local, err := r.tensor(f, p.args[1])
	if err != nil {
		return err
	}
	dir := transfer.Read
	if op.WordAttr("dir", "") == "write" {
		dir = transfer.Write
	}
	peer := op.Peer(r.id, r.size)
	st := r.xfer
	key := xferKey{op: p.id, reg: reg, buf: local.Buf.ID(), offset: local.Offset,
		layout: layoutOf(local), peer: peer}
	h, ok := st.handles[key]
	if ok {
		r.stats.HandleHits++
	} else {
		r.stats.HandleMisses++
		if h, err = reg.Prepare(dir, []runtime.Tensor{local}, peer, []transfer.Desc{transfer.Whole(0)}); err != nil {
			return err
		}
		st.handles[key] = h
	}
	stream, err := r.asyncStream(f)
	if err != nil {
		return err
	}
	if err := h.Post(stream); err != nil {
		return err
	}
	// `wait %t` orders the current stream after this event.
	done, err := r.dev.NewEvent()
	if err != nil {
		return err
	}
	if err := stream.Record(done); err != nil {
		done.Close()
		return err
	}
	f.vals[p.res[0]] = slot{live: true, done: done}
	return nil
}

func (r *rank) deregister(p *opPlan) error {
	h := p.args[0]
	reg, err := r.registration(h)
	if err != nil {
		return err
	}
	r.xfer.bound[h] = nil
	return reg.Quiesce()
}

// closeTransfers releases the agent, its registrations and its handles
// (locally: every Run ended with its deregisters, so no transfer is in
// flight).
func (r *rank) closeTransfers() error {
	st := r.xfer
	r.xfer = nil
	if st == nil || st.agent == nil {
		return nil
	}
	if err := st.agent.Close(); err != nil {
		return fmt.Errorf("closing the transfer agent: %w", err)
	}
	return nil
}
