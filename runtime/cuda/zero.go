package cuda

import (
	"github.com/hirlab/hir/runtime"
)

// Zero sets t's elements to zero bytes, ordered on s: a memset for a
// contiguous tensor (a graph can hold it, as it cannot hold a copy from
// pageable host memory), else a copy from a zeroed staging buffer.
func (d *gpuDevice) Zero(t runtime.Tensor, rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	ptr, err := d.span(t, "zero")
	if err != nil {
		return err
	}
	n := t.Bytes()
	if n == 0 {
		return nil
	}
	if t.IsContiguous() {
		return d.withCtx(func() error {
			return d.drv.MemsetD8Async.Call4(uintptr(ptr), 0, uintptr(n), s.h)
		})
	}
	return d.staged(int(n), s, func(tmp uint64) error {
		if err := d.drv.MemsetD8Async.Call4(uintptr(tmp), 0, uintptr(n), s.h); err != nil {
			return err
		}
		return d.stridedCopy(ptr, t.EffectiveStrides(), tmp, runtime.ContiguousStrides(t.Shape), t, s)
	})
}
