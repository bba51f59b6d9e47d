package sim

import (
	"slices"
	"sync"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// kernel is a compiled compute op (compute.Kernel, the interpreter's plan)
// as this runtime launches it: with the working memory a run holds against
// the budget, and the records of finished launches.
type kernel struct {
	*compute.Kernel

	scratch     int64  // ScratchBytes, worked out once
	scratchWhat string // how the budget names it

	mu   sync.Mutex
	idle []*launch // records of finished launches, for the next (Launch)
}

var _ runtime.Kernel = (*kernel)(nil)

// Compile prepares a kernel for a pointwise op, a reduction, matmul or a
// whole fusion over the spec's local shapes.
func (d *Device) Compile(spec *runtime.KernelSpec) (runtime.Kernel, error) {
	if spec == nil || spec.Op == nil {
		return nil, errorf(d.rank, "compile: no op")
	}
	ck, err := compute.Compile(spec, d.rt.mem.check)
	if err != nil {
		return nil, errorf(d.rank, "compile %s at %s: %v", spec.Op.Code, spec.Op.Pos, err)
	}
	return &kernel{Kernel: ck, scratch: ck.ScratchBytes(), scratchWhat: ck.Name() + "'s working memory"}, nil
}

// Launch runs k on stream s: args are the kernel's tensor inputs, then its
// outputs. Inputs are read whole before any output is written, so outputs
// may alias inputs.
func (d *Device) Launch(rk runtime.Kernel, args []runtime.Tensor, rs runtime.Stream) error {
	k, ok := rk.(*kernel)
	if !ok || k == nil {
		return errorf(d.rank, "launch: %T is not a sim kernel", rk)
	}
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	if len(args) != len(k.Inputs)+len(k.Outputs) {
		return errorf(d.rank, "launch %s: %d arguments, want %d inputs and %d outputs", k.Name(), len(args), len(k.Inputs), len(k.Outputs))
	}
	l := k.takeLaunch(d, len(args))
	for i, t := range args {
		want := k.Inputs
		j := i
		if i >= len(k.Inputs) {
			want, j = k.Outputs, i-len(k.Inputs)
		}
		if t.DType != want[j].DType || !slices.Equal(t.Shape, want[j].Shape) {
			k.putLaunch(l)
			return errorf(d.rank, "launch %s: argument %d is %s%v, the kernel was compiled for %s%v", k.Name(), i, t.DType, t.Shape, want[j].DType, want[j].Shape)
		}
		if err := d.rt.fillView(&l.views[i], t); err != nil {
			k.putLaunch(l)
			return errorf(d.rank, "launch %s: argument %d: %v", k.Name(), i, err)
		}
	}
	if err := s.enqueue(work{task: l}); err != nil {
		k.putLaunch(l)
		return err
	}
	return nil
}

// launch is one launch of a kernel: its argument views. The kernel keeps
// the records of finished launches and hands them to later ones, and the
// stream lends the run its working arrays, so a launch allocates nothing
// once warm.
type launch struct {
	d     *Device
	k     *kernel
	views []view
	ptrs  []*compute.View // into views
	// kept: a captured launch belongs to its graph, which runs it at
	// every replay, so it is never handed to another launch.
	kept bool
}

// keep marks l as a graph's (capture.record).
func (l *launch) keep() { l.kept = true }

func (k *kernel) takeLaunch(d *Device, n int) *launch {
	k.mu.Lock()
	var l *launch
	if m := len(k.idle); m > 0 {
		l = k.idle[m-1]
		k.idle[m-1] = nil
		k.idle = k.idle[:m-1]
	}
	k.mu.Unlock()
	if l == nil {
		l = &launch{k: k}
	}
	l.d = d
	if cap(l.views) < n {
		l.views = make([]view, n)
		l.ptrs = make([]*compute.View, n)
	}
	l.views, l.ptrs = l.views[:n], l.ptrs[:n]
	for i := range l.views {
		l.ptrs[i] = &l.views[i].View
	}
	return l
}

// putLaunch keeps l for a later launch, dropping what it points to.
func (k *kernel) putLaunch(l *launch) {
	for i := range l.views {
		l.views[i] = view{View: compute.View{Shape: l.views[i].Shape[:0], Strides: l.views[i].Strides[:0]}}
	}
	l.d = nil
	k.mu.Lock()
	k.idle = append(k.idle, l)
	k.mu.Unlock()
}

func (l *launch) run(s *stream) error {
	if !l.kept {
		defer l.k.putLaunch(l)
	}
	d, k, views := l.d, l.k, l.ptrs
	for i := range l.views {
		if l.views[i].buf.freed.Load() {
			return errorf(d.rank, "launch %s: argument %d's buffer was freed before the kernel ran", k.Name(), i)
		}
	}
	if err := d.rt.mem.take(k.scratch, k.scratchWhat); err != nil {
		return errorf(d.rank, "%w", err)
	}
	defer d.rt.mem.give(k.scratch)
	if err := k.Run(views[:len(k.Inputs)], views[len(k.Inputs):], &s.arena); err != nil {
		return errorf(d.rank, "%s: %v", k.Name(), err)
	}
	return nil
}
