package sim

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// Collective validates the call, then enqueues it on s. When the stream
// reaches it, the ranks meet (matching the k-th collective of every rank,
// checking they agree on op, algorithm, dtype and shapes) and run the
// algorithm over the shared memory; docs/RUNTIME.md lists what each does.

// collJob is one rank's part of one collective.
type collJob struct {
	d        *Device
	op       ir.Opcode
	algo     ir.Algo // as called
	alg      simAlgo // what runs (algorithms, in algorithms.go)
	reduceOp ir.ReduceOp
	red      compute.Reducer // reduceOp's arithmetic over the input's dtype and the ranks
	root     int
	axis     int
	concat   int
	in, out  *view
	access   ir.RemoteAccess
	seq      int64
	what     string
}

// Collective enqueues c on stream s.
func (d *Device) Collective(c *runtime.CollectiveCall, rs runtime.Stream) error {
	if c == nil {
		return errorf(d.rank, "collective: nil call")
	}
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	j, err := d.prepareCollective(c)
	if err != nil {
		return errorf(d.rank, "%v", err)
	}
	d.mu.Lock()
	j.seq = d.collSeq
	d.collSeq++
	d.mu.Unlock()
	j.what = fmt.Sprintf("%s algo=%s (collective #%d)", j.op, j.algo, j.seq)
	return s.enqueue(work{task: j})
}

func (d *Device) prepareCollective(c *runtime.CollectiveCall) (*collJob, error) {
	algo := c.Algo
	name := fmt.Sprintf("%s algo=%s", c.Op, algo)
	// Where the tensors lie first, then the contract both runtimes share.
	in, err := d.rt.view(c.In)
	if err != nil {
		return nil, fmt.Errorf("%s: input: %v", name, err)
	}
	out, err := d.rt.view(c.Out)
	if err != nil {
		return nil, fmt.Errorf("%s: output: %v", name, err)
	}
	rc, err := c.Resolve(d.rt.size)
	if err != nil {
		return nil, err
	}
	j := &collJob{d: d, op: c.Op, algo: algo, reduceOp: rc.ReduceOp, red: compute.Reducer{Op: rc.ReduceOp, DT: in.DT, Ranks: d.rt.size}, root: rc.Root, axis: rc.Axis, concat: rc.ConcatAxis,
		access: rc.Access, in: in, out: out}
	var ok bool
	if j.alg, ok = algorithms[algoKey{c.Op, algo}]; !ok {
		return nil, fmt.Errorf("%s: the sim has no implementation of it (internal error)", name)
	}
	access := j.access
	if access.ReadsInput && (in.buf.sym == nil || in.buf.view) {
		return nil, fmt.Errorf("%s reads its input from peers, so the input must be this rank's shard of a symmetric buffer; buffer %d is %s", name, in.buf.id, in.buf.kind())
	}
	if access.WritesOutput && (out.buf.sym == nil || out.buf.view) {
		return nil, fmt.Errorf("%s writes its output on peers, so the output must be this rank's shard of a symmetric buffer; buffer %d is %s", name, out.buf.id, out.buf.kind())
	}
	return j, nil
}

// callDesc is what every rank must agree on for a collective.
type callDesc struct {
	op                 string
	algo               ir.Algo
	reduceOp           ir.ReduceOp
	root, axis, concat int
	dtype              ir.DType
	in, out            string // shapes, and for remotely touched tensors offset, strides and allocation
}

func (j *collJob) desc() callDesc {
	describe := func(v *view, remote bool) string {
		s := fmt.Sprint(v.Shape)
		if remote {
			s += fmt.Sprintf(" at offset %d strides %v of symmetric alloc #%d", v.off, v.Strides, v.buf.sym.seq)
		}
		return s
	}
	return callDesc{op: j.op.String(), algo: j.algo, reduceOp: j.reduceOp, root: j.root, axis: j.axis, concat: j.concat,
		dtype: j.in.DT, in: describe(j.in, j.access.ReadsInput), out: describe(j.out, j.access.WritesOutput)}
}

func (c callDesc) String() string {
	s := fmt.Sprintf("%s algo=%s %s in=%s out=%s", c.op, c.algo, c.dtype, c.in, c.out)
	if c.reduceOp != ir.ReduceUnset {
		s += " op=" + c.reduceOp.String()
	}
	return s + fmt.Sprintf(" root=%d axis=%d concat_axis=%d", c.root, c.axis, c.concat)
}

type arrival struct {
	desc    callDesc
	staging *buffer
	oom     error // this rank's staging and scratch did not fit
}

// scratchBytes bounds the private memory an algorithm makes besides its
// staging buffer: values are reduced in float64 or int64 accumulators (two
// live at once: the running total and the peer's chunk being folded in),
// and the ring and staged algorithms pack the input and the output.
func (j *collJob) scratchBytes() int64 {
	n := max(j.in.N, j.out.N)
	return 16*n + j.in.N*j.in.ESize() + j.out.N*j.out.ESize()
}

// stagingSlot is the bytes one sender needs in a receiver's staging buffer
// (0: the algorithm stages nothing). It depends only on what the ranks
// agree on, so every rank computes the same.
func (j *collJob) stagingSlot() int64 {
	if j.alg.slot == nil {
		return 0
	}
	return j.alg.slot(j)
}

func (j *collJob) run(s *stream) error {
	d := j.d
	if j.in.buf.freed.Load() || j.out.buf.freed.Load() {
		return errorf(d.rank, "%s: a buffer was freed before the collective ran", j.what)
	}
	slot := j.stagingSlot()
	// The staging buffer and the algorithm's scratch come out of the
	// memory budget before anything is made. Every rank computes the same
	// sizes, but the budget is shared, so one rank may fail where another
	// did not: the failing rank still joins the meeting (with no staging)
	// and the group fails on every rank alike instead of leaving the
	// others to time out.
	reserve := j.scratchBytes()
	if slot > 0 {
		reserve += slot * int64(d.rt.size)
	}
	oomErr := d.rt.mem.take(reserve, j.what+" staging and scratch")
	if oomErr == nil {
		defer d.rt.mem.give(reserve)
	}
	var staging *buffer
	if slot > 0 && oomErr == nil {
		staging = d.rt.newBuffer(make([]byte, slot*int64(d.rt.size)), ir.Global, d.rank, nil, false)
		defer d.rt.release(staging)
	}
	res, err := d.rt.rv.meet(s.key(meetKey{kind: "coll", seq: j.seq}), d.rt.allRanks(), d.rank, arrival{j.desc(), staging, oomErr}, d.rt.timeout, j.what, s.running,
		func(payloads map[int]any) (any, error) {
			descs := map[int]any{}
			for r, p := range payloads {
				descs[r] = p.(arrival).desc
			}
			if err := agree(j.what, "call", descs, d.rt.size); err != nil {
				return nil, err
			}
			for r := 0; r < d.rt.size; r++ {
				if err := payloads[r].(arrival).oom; err != nil {
					return nil, fmt.Errorf("rank %d: %w", r, err)
				}
			}
			g := newGroup(d.rt.size, d.rt.timeout, j.what, d.rt.closed)
			g.slot = slot
			g.stall = d.rt.rv.stall
			for r := 0; r < d.rt.size; r++ {
				g.staging = append(g.staging, payloads[r].(arrival).staging)
			}
			return g, nil
		})
	if err != nil {
		return errorf(d.rank, "%w", err)
	}
	m := res.(*group).member(d.rank)
	m.label = s.running
	if err := j.alg.run(j, m); err != nil {
		return errorf(d.rank, "%w", err)
	}
	return nil
}
