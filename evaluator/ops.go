package evaluator

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// op runs one op of the program on this rank.
func (r *rank) op(f *frame, p *opPlan) error {
	op := p.op
	if r.capturing != nil && op.Code.Info().HostWait != "" {
		return r.splitGraph(f, p) // graph mode: run it between two graphs
	}
	switch op.Code.Class() {
	case ir.ClassPointwise, ir.ClassReduction, ir.ClassMatmul:
		return r.compute(f, p)
	case ir.ClassCollective:
		return r.collective(f, p)
	}
	switch op.Code {
	case ir.OpFusion:
		return r.compute(f, p)
	case ir.OpAlloc:
		if len(p.res) != 1 {
			return fmt.Errorf("%s has %d results, want 1", op.Code, len(p.res))
		}
		s, err := r.alloc(f, p.res[0], !p.uninit)
		if err != nil || !p.uninit {
			return err
		}
		if poison, ok := r.dev.(runtime.Poisoner); ok {
			return poison.Poison(s.t, f.current)
		}
		return nil
	case ir.OpFree:
		return r.free(f, p.args[0])
	case ir.OpCopy:
		return r.copy(f, p)
	case ir.OpSymmetricContiguousView:
		return r.contiguousView(f, p)
	case ir.OpSelect:
		return r.selectView(f, p)
	case ir.OpReshape:
		return r.reshape(f, p)
	case ir.OpSend:
		t, err := r.tensor(f, p.args[0])
		if err != nil {
			return err
		}
		return r.dev.Send(t, op.Peer(r.id, r.size), f.current)
	case ir.OpRecv:
		s, err := r.destination(f, p, 0, false)
		if err != nil {
			return err
		}
		return r.dev.Recv(s.t, op.Peer(r.id, r.size), f.current)
	case ir.OpWait:
		return r.wait(f, p.args[0])
	case ir.OpBarrier:
		return r.dev.Barrier(f.current)
	case ir.OpStreamBarrier:
		return r.streamBarrier(f.current)
	case ir.OpStream:
		s := r.streams[p.id]
		if s == nil {
			var err error
			if s, err = r.dev.NewStream(); err != nil {
				return err
			}
			r.streams[p.id] = s
		}
		f.vals[p.res[0]] = slot{live: true, stream: s}
		return nil
	case ir.OpSetStream:
		s := r.dev.DefaultStream()
		if len(op.Operands) == 1 {
			b, err := r.stream(f, p.args[0])
			if err != nil {
				return err
			}
			s = b
		}
		f.use(s)
		return nil
	case ir.OpSyncStream:
		s := f.current
		if len(op.Operands) == 1 {
			b, err := r.stream(f, p.args[0])
			if err != nil {
				return err
			}
			s = b
		}
		return s.Synchronize()
	case ir.OpPickStream, ir.OpWaitStream:
		return r.streamOp(f, p) // streams.go
	case ir.OpFor:
		return r.loop(f, p)
	case ir.OpRegister, ir.OpTransfer, ir.OpDeregister:
		return r.oneSided(f, p)
	}
	return fmt.Errorf("the evaluator cannot run %s here", op.Code)
}

// use makes s the current stream, remembering it for the end-of-run sync.
func (f *frame) use(s runtime.Stream) {
	f.setCurrent(s)
	for _, u := range f.used {
		if u == s {
			return
		}
	}
	f.used = append(f.used, s)
}

// setCurrent makes s the current stream (without remembering it: use).
func (f *frame) setCurrent(s runtime.Stream) {
	f.current = s
	f.labeler, _ = s.(runtime.Labeler)
}

func (r *rank) stream(f *frame, id int) (runtime.Stream, error) {
	s, err := r.ready(f, id)
	if err != nil {
		return nil, err
	}
	if s.stream == nil {
		return nil, fmt.Errorf("%s is not a stream", r.job.plan.values[id])
	}
	return s.stream, nil
}

func (r *rank) free(f *frame, id int) error {
	s := &f.vals[id]
	if !s.live {
		return fmt.Errorf("%s is not live (freed twice?)", r.job.plan.values[id])
	}
	if s.owned == nil {
		return fmt.Errorf("%s does not own its storage (it is an input or a view), so it cannot be freed", r.job.plan.values[id])
	}
	// the producer's stream and the streams that read it, if not this one
	var buf [4]runtime.Stream
	others := buf[:0]
	add := func(u runtime.Stream) {
		if u != nil && u != f.current && !slices.Contains(others, u) {
			others = append(others, u)
		}
	}
	for _, u := range s.users {
		add(u)
	}
	add(s.on)
	if err := r.pool.put(s.owned, f.current, others...); err != nil {
		return err
	}
	*s = slot{}
	return nil
}

// destination binds the result of op: the operand at index i when the op
// has one there (the result aliases it), else a fresh buffer of the
// result's type.
func (r *rank) destination(f *frame, p *opPlan, i int, zero bool) (*slot, error) {
	if len(p.res) != 1 {
		return nil, fmt.Errorf("%s has %d results, want 1", p.op.Code, len(p.res))
	}
	if len(p.args) > i {
		t, err := r.tensor(f, p.args[i])
		if err != nil {
			return nil, err
		}
		s := &f.vals[p.res[0]]
		*s = slot{live: true, t: t}
		return s, nil
	}
	return r.alloc(f, p.res[0], zero)
}

func (r *rank) copy(f *frame, p *opPlan) error {
	src, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	dst, err := r.destination(f, p, 1, false)
	if err != nil {
		return err
	}
	return r.dev.Copy(dst.t, src, f.current)
}

func (r *rank) contiguousView(f *frame, p *opPlan) error {
	op := p.op
	t, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	if t.Offset != 0 || !t.IsContiguous() || t.Bytes() > t.Buf.Size() {
		return fmt.Errorf("%s must be a whole symmetric allocation to be viewed contiguously", op.Operands[0])
	}
	key := handleKey{buf: t.Buf.ID(), op: p.id, peer: -1}
	view, ok := r.handles[key]
	if ok {
		r.stats.HandleHits++
	} else {
		r.stats.HandleMisses++
		if view, err = r.dev.ContiguousView(t.Buf); err != nil {
			return err
		}
		r.handles[key] = view
	}
	f.vals[p.res[0]] = slot{live: true, t: contiguousViewTensor(view, t, op.Result().Tensor().Shape())}
	return nil
}

// contiguousViewTensor types the mapped range of a contiguous view. Rank r's
// shard sits at r × the allocation's size, and the runtime rounds that size
// up to its granularity: when the shard's elements fill it exactly the view
// is dense, otherwise the outermost axis steps over the padding (still no
// copy; the validate pass guarantees that axis has local extent 1).
func contiguousViewTensor(view runtime.Buffer, shard runtime.Tensor, shape []int64) runtime.Tensor {
	vt := runtime.Tensor{Buf: view, DType: shard.DType, Shape: shape}
	if pitch := shard.Buf.Size(); pitch != shard.Bytes() && len(shape) > 0 {
		strides := runtime.ContiguousStrides(shape)
		strides[0] = pitch / int64(shard.DType.Size())
		vt.Strides = strides
	}
	return vt
}

func (r *rank) selectView(f *frame, p *opPlan) error {
	op := p.op
	t, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	index, err := r.indexOf(f, op.Operands[1], p.args[1])
	if err != nil {
		return err
	}
	axis := int(op.IntAttr("axis", 0))
	if axis < 0 || axis >= len(t.Shape) {
		return fmt.Errorf("axis %d is out of range for a tensor of rank %d", axis, len(t.Shape))
	}
	if index < 0 || index >= t.Shape[axis] {
		return fmt.Errorf("index %d is out of range for axis %d of extent %d", index, axis, t.Shape[axis])
	}
	index = op.SelectIndex(index, int64(r.id), t.Shape[axis])
	strides := t.EffectiveStrides()
	view := runtime.Tensor{
		Buf:     t.Buf,
		Offset:  t.Offset + index*strides[axis]*int64(t.DType.Size()),
		DType:   t.DType,
		Shape:   append(append([]int64(nil), t.Shape[:axis]...), t.Shape[axis+1:]...),
		Strides: append(append([]int64(nil), strides[:axis]...), strides[axis+1:]...),
	}
	f.vals[p.res[0]] = slot{live: true, t: view}
	return nil
}

// indexOf is the value of an integer operand x (value id id): a literal,
// or a loop index's current value.
func (r *rank) indexOf(f *frame, x *ir.Value, id int) (int64, error) {
	if x.Lit != nil {
		return x.Lit.Int, nil
	}
	s, err := r.ready(f, id)
	if err != nil {
		return 0, err
	}
	return s.index, nil
}

func (r *rank) reshape(f *frame, p *opPlan) error {
	t, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	shape := r.job.plan.local[p.res[0]].shape // a sharded result's local shape
	if t.IsContiguous() {
		f.vals[p.res[0]] = slot{live: true, t: runtime.Tensor{Buf: t.Buf, Offset: t.Offset, DType: t.DType, Shape: shape}}
		return nil
	}
	// A strided view cannot be reshaped in place: make it contiguous first.
	s, err := r.alloc(f, p.res[0], false)
	if err != nil {
		return err
	}
	return r.dev.Copy(runtime.Tensor{Buf: s.t.Buf, DType: t.DType, Shape: t.Shape}, t, f.current)
}

// compute runs a pointwise op, reduction, matmul or fusion as one kernel.
// Its arguments go in a slice the rank reuses; the kernel spec is built
// only when the kernel is compiled (a cache miss).
func (r *rank) compute(f *frame, p *opPlan) error {
	op := p.op
	args := r.args[:0]
	defer func() { clear(args); r.args = args[:0] }()
	nIn := 0
	dest := op.Code.Info().Destination(len(op.Operands)) // matmul's: the output (an input too when it accumulates)
	for i, v := range op.Operands {
		if v.Lit != nil || !op.InputOperand(i) {
			continue
		}
		t, err := r.tensor(f, p.args[i])
		if err != nil {
			return err
		}
		args = append(args, t)
		nIn++
	}
	if dest >= 0 {
		s, err := r.destination(f, p, dest, false)
		if err != nil {
			return err
		}
		args = append(args, s.t)
	} else {
		for _, res := range p.res {
			s, err := r.alloc(f, res, false)
			if err != nil {
				return err
			}
			args = append(args, s.t)
		}
	}
	k := r.kernels[p.id]
	if k != nil {
		r.stats.KernelHits++
	} else {
		r.stats.KernelMisses++
		spec := &runtime.KernelSpec{Op: op}
		for i, t := range args {
			ts := runtime.TensorShape{DType: t.DType, Shape: t.Shape}
			if i < nIn {
				spec.Inputs = append(spec.Inputs, ts)
			} else {
				spec.Outputs = append(spec.Outputs, ts)
			}
		}
		var err error
		if k, err = r.dev.Compile(spec); err != nil {
			return err
		}
		r.kernels[p.id] = k
	}
	return r.dev.Launch(k, args, f.current)
}

func (r *rank) collective(f *frame, p *opPlan) error {
	op := p.op
	in, err := r.tensor(f, p.args[0])
	if err != nil {
		return err
	}
	// What peers touch must be in this rank's own shard of a symmetric
	// allocation; the symmetric pass saw to the memory types. Collectives
	// move contiguous ranges, so a strided view goes through a contiguous
	// copy, on the symmetric heap when peers touch it (every rank stages
	// alike: the shapes are the same on every rank).
	access := p.collAccess
	var temps []runtime.Buffer
	if !in.IsContiguous() {
		s, err := r.staging(f, in, access.ReadsInput, true)
		if err != nil {
			return err
		}
		in = s.t
		temps = append(temps, s.owned)
	}
	zero := op.Code.Info().RootOnly
	out, err := r.destination(f, p, 1, zero)
	if err != nil {
		return err
	}
	outT := out.t
	if !outT.IsContiguous() {
		// The collective writes a contiguous copy of the strided output
		// buffer (holding its contents, for what the op leaves alone), which
		// is copied back into the buffer after it.
		s, err := r.staging(f, outT, access.WritesOutput, true)
		if err != nil {
			return err
		}
		outT = s.t
		temps = append(temps, s.owned)
	}
	call := p.coll // the attributes, read when the job was planned
	call.In, call.Out = in, outT
	stream := f.current
	if op.Async() {
		if stream, err = r.asyncStream(f); err != nil {
			return err
		}
		if l, ok := stream.(runtime.Labeler); ok {
			l.Label(op)
		}
		if err := r.asyncBefore(stream); err != nil {
			return err
		}
	}
	if err := r.dev.Collective(&call, stream); err != nil {
		return err
	}
	if outT.Buf != out.t.Buf {
		if err := r.dev.Copy(out.t, outT, stream); err != nil {
			return err
		}
	}
	if op.Async() {
		if err := r.asyncAfter(stream); err != nil {
			return err
		}
	}
	for _, temp := range temps {
		if err := r.pool.put(temp, stream); err != nil {
			return err
		}
	}
	if op.Async() {
		done, err := r.pool.takeEvent() // back to the pool at its wait
		if err != nil {
			return err
		}
		if err := stream.Record(done); err != nil {
			return err
		}
		out.done = done
	}
	return nil
}

// staging returns a contiguous buffer shaped like t, in symmetric memory
// when peers touch it, else global; with fill it holds t's contents
// (copied on the current stream).
func (r *rank) staging(f *frame, t runtime.Tensor, peers, fill bool) (*slot, error) {
	mem := ir.Global
	if peers {
		mem = ir.Symmetric
	}
	buf, err := r.pool.get(t.Bytes(), mem, f.current)
	if err != nil {
		return nil, err
	}
	s := &slot{t: runtime.Tensor{Buf: buf, DType: t.DType, Shape: t.Shape}, owned: buf}
	if fill {
		if err := r.dev.Copy(s.t, t, f.current); err != nil {
			return nil, errors.Join(err, r.pool.put(buf, nil))
		}
	}
	return s, nil
}

// asyncStream returns the stream async collectives run on, ordered after
// the work enqueued so far on the current stream.
func (r *rank) asyncStream(f *frame) (runtime.Stream, error) {
	if r.comm == nil {
		s, err := r.dev.NewStream()
		if err != nil {
			return nil, err
		}
		r.comm = s
	}
	// A pooled event: the wait keeps the record it saw, so the event is
	// free for the next record at once (no driver calls to make and
	// destroy one per async op).
	ev, err := r.pool.takeEvent()
	if err != nil {
		return nil, err
	}
	defer r.pool.recycleEvent(ev)
	if err := f.current.Record(ev); err != nil {
		return nil, err
	}
	if err := r.comm.WaitEvent(ev); err != nil {
		return nil, err
	}
	cur := f.current
	f.use(r.comm)   // remembered for the end-of-run sync...
	f.current = cur // ...but later ops stay on the current stream
	return r.comm, nil
}

// wait orders the current stream after an async result, without blocking
// the host.
func (r *rank) wait(f *frame, id int) error {
	s := &f.vals[id]
	if !s.live {
		return fmt.Errorf("%s has no value here", r.job.plan.values[id])
	}
	if s.done == nil {
		return fmt.Errorf("%s is not the result of an async op, or was waited for already", r.job.plan.values[id])
	}
	if s.done != settled { // settled: done before a graph split
		if err := f.current.WaitEvent(s.done); err != nil {
			return err
		}
		r.pool.recycleEvent(s.done)
	}
	s.done = nil
	if r.job.multiStream {
		// From here the value is ready in the order of the current stream.
		return r.markProduced(f, []int{id})
	}
	return nil
}

func (r *rank) loop(f *frame, p *opPlan) error {
	op := p.op
	from, to, step := op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1)
	if step <= 0 {
		return fmt.Errorf("step must be positive, got %d", step)
	}
	if len(p.bodyArgs) == 0 {
		return fmt.Errorf("the loop's body has no index")
	}
	idx := p.bodyArgs[0]
	outer := f.iter
	defer func() { f.iter = outer }()
	// Count the trips instead of testing i < to: i += step past the last
	// trip may overflow int64 and wrap below to (a loop that never ends).
	n := ir.LoopTrips(from, to, step)
	if p.unroll > 0 && r.capturing != nil {
		return r.deviceLoop(f, p, from, n)
	}
	for k, i := uint64(0), from; k < n; k++ {
		if k > 0 {
			i += step // a trip follows, so i+step < to: no overflow
		}
		f.vals[idx] = slot{live: true, index: i}
		f.iter = i
		if err := r.block(f, p.body); err != nil {
			return err
		}
	}
	f.vals[idx] = slot{}
	return nil
}

// streamBarrier meets the peers on stream s (stream_barrier): on the
// device where the runtime can (runtime.StreamBarrierer: both do), else
// through the device's Barrier, which waits on the host.
func (r *rank) streamBarrier(s runtime.Stream) error {
	if sb, ok := r.dev.(runtime.StreamBarrierer); ok {
		return sb.StreamBarrier(s)
	}
	return r.dev.Barrier(s)
}
