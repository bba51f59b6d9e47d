package sim

import (
	"fmt"

	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

func errorf(rank int, format string, args ...any) error {
	return fmt.Errorf("rank %d: "+format, append([]any{rank}, args...)...)
}

// view is a checked, typed window into a buffer: the runtime's form of a
// runtime.Tensor, the bytes' window (compute.View, Data from the tensor's
// offset to the buffer's end) with the buffer it lies in.
type view struct {
	compute.View
	buf *buffer
	off int64 // the tensor's byte offset in buf
}

// view checks t against its buffer's bounds and returns its view.
func (rt *Runtime) view(t runtime.Tensor) (*view, error) {
	v := &view{}
	if err := rt.fillView(v, t); err != nil {
		return nil, err
	}
	return v, nil
}

// fillView is view into v, reusing the capacity of v's shape and strides
// (a launch record's views: no allocation once warm).
func (rt *Runtime) fillView(v *view, t runtime.Tensor) error {
	b, err := rt.own(t.Buf)
	if err != nil {
		return err
	}
	if !t.DType.Valid() {
		return fmt.Errorf("tensor has invalid dtype %v", t.DType)
	}
	for _, e := range t.Shape {
		if e < 0 {
			return fmt.Errorf("tensor has negative extent in shape %v", t.Shape)
		}
	}
	var strides []int64
	if t.Strides != nil {
		strides = append(v.Strides[:0], t.Strides...)
	} else {
		// the contiguous strides (runtime.ContiguousStrides), in place
		strides = append(v.Strides[:0], t.Shape...)
		acc := int64(1)
		for i := len(strides) - 1; i >= 0; i-- {
			strides[i], acc = acc, acc*t.Shape[i]
		}
	}
	if len(strides) != len(t.Shape) {
		return fmt.Errorf("tensor has %d strides for %d axes", len(strides), len(t.Shape))
	}
	for _, s := range strides {
		if s < 0 {
			return fmt.Errorf("tensor has a negative stride in %v (not supported)", strides)
		}
	}
	if t.Offset < 0 || t.Offset > b.Size() {
		return fmt.Errorf("tensor offset %d outside buffer %d of %d bytes", t.Offset, b.id, b.Size())
	}
	*v = view{buf: b, off: t.Offset, View: compute.View{Data: b.data[t.Offset:], DT: t.DType, Shape: append(v.Shape[:0], t.Shape...),
		Strides: strides, N: t.NumElements(), Contig: t.IsContiguous()}}
	if v.N > 0 {
		last := int64(0)
		for i, e := range v.Shape {
			last += (e - 1) * v.Strides[i]
		}
		if end := t.Offset + (last+1)*int64(t.DType.Size()); end > b.Size() {
			return fmt.Errorf("tensor %s%v (offset %d, strides %v) reaches byte %d of buffer %d, which has %d",
				t.DType, t.Shape, t.Offset, strides, end, b.id, b.Size())
		}
	}
	return nil
}

// on returns the same tensor placed at byte offset base+v.off of other
// bytes: a peer's shard, or a rank's place in a contiguous view.
func (v *view) on(b *buffer, base int64) *view {
	c := *v
	c.buf = b
	c.Data = b.data[base+v.off:]
	return &c
}
