package gpu

import (
	"github.com/hirlab/hir/runtime"
)

// Zero sets t's elements to zero bytes, ordered on s: a memset for a
// contiguous tensor (a graph can hold it, as it cannot hold a copy from
// pageable host memory), else a copy from a zeroed staging buffer.
func (d *Device) Zero(t runtime.Tensor, rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	ptr, err := d.Span(t, "zero")
	if err != nil {
		return err
	}
	n := t.Bytes()
	if n == 0 {
		return nil
	}
	if t.IsContiguous() {
		return d.WithCtx(func() error {
			return d.Drv.MemsetD8Async.Call4(uintptr(ptr), 0, uintptr(n), s.H)
		})
	}
	return d.Staged(int(n), s, func(tmp uint64) error {
		if err := d.Drv.MemsetD8Async.Call4(uintptr(tmp), 0, uintptr(n), s.H); err != nil {
			return err
		}
		return d.StridedCopy(ptr, t.EffectiveStrides(), tmp, runtime.ContiguousStrides(t.Shape), t, s)
	})
}
