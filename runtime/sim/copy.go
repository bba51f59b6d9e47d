package sim

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim/internal/compute"
)

// CopyFromHost copies host bytes (the tensor's elements, row-major) into
// dst, ordered on s.
func (d *Device) CopyFromHost(dst runtime.Tensor, src []byte, rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	v, err := d.rt.view(dst)
	if err != nil {
		return errorf(d.rank, "copy from host: %v", err)
	}
	if int64(len(src)) != dst.Bytes() {
		return errorf(d.rank, "copy from host: %d host bytes for a %s%v tensor of %d bytes", len(src), dst.DType, dst.Shape, dst.Bytes())
	}
	return s.enqueue(work{run: func(*stream) error {
		if v.buf.freed.Load() {
			return errorf(d.rank, "copy from host: buffer %d freed before the copy ran", v.buf.id)
		}
		v.Unpack(0, src)
		return nil
	}})
}

// CopyToHost copies src's elements (row-major) into host bytes, ordered on s.
func (d *Device) CopyToHost(dst []byte, src runtime.Tensor, rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	v, err := d.rt.view(src)
	if err != nil {
		return errorf(d.rank, "copy to host: %v", err)
	}
	if int64(len(dst)) != src.Bytes() {
		return errorf(d.rank, "copy to host: %d host bytes for a %s%v tensor of %d bytes", len(dst), src.DType, src.Shape, src.Bytes())
	}
	return s.enqueue(work{run: func(*stream) error {
		if v.buf.freed.Load() {
			return errorf(d.rank, "copy to host: buffer %d freed before the copy ran", v.buf.id)
		}
		if v.Contig { // no packed copy: it would double the memory a readback takes
			copy(dst, v.Data[:v.N*v.ESize()])
			return nil
		}
		copy(dst, v.Packed(0, v.N))
		return nil
	}})
}

// Copy copies src into dst elementwise, ordered on s. Either may be strided
// or a peer's buffer.
func (d *Device) Copy(dst, src runtime.Tensor, rs runtime.Stream) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	dv, err := d.rt.view(dst)
	if err != nil {
		return errorf(d.rank, "copy: destination: %v", err)
	}
	sv, err := d.rt.view(src)
	if err != nil {
		return errorf(d.rank, "copy: source: %v", err)
	}
	if dv.DT != sv.DT || dv.N != sv.N {
		return errorf(d.rank, "copy: %s%v into %s%v: dtype and element count must match", sv.DT, sv.Shape, dv.DT, dv.Shape)
	}
	return s.enqueue(work{run: func(*stream) error {
		if dv.buf.freed.Load() || sv.buf.freed.Load() {
			return errorf(d.rank, "copy: a buffer was freed before the copy ran")
		}
		compute.Copy(&dv.View, &sv.View)
		return nil
	}})
}

// Zero sets t's elements to zero bytes, ordered on s.
func (d *Device) Zero(t runtime.Tensor, rs runtime.Stream) error {
	return d.fill(t, rs, 0, "zero")
}

var _ runtime.Poisoner = (*Device)(nil)

// Poison fills t with all-one bits (bool elements with 1), ordered on s:
// what an `alloc uninit=true` holds here (runtime.Poisoner).
func (d *Device) Poison(t runtime.Tensor, rs runtime.Stream) error {
	if t.DType == ir.Bool {
		return d.fill(t, rs, 1, "poison")
	}
	return d.fill(t, rs, 0xff, "poison")
}

// fill sets every byte of t's elements to b, ordered on s; what names the
// caller in errors.
func (d *Device) fill(t runtime.Tensor, rs runtime.Stream, b byte, what string) error {
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	v, err := d.rt.view(t)
	if err != nil {
		return errorf(d.rank, "%s: %v", what, err)
	}
	return s.enqueue(work{run: func(*stream) error {
		if v.buf.freed.Load() {
			return errorf(d.rank, "%s: buffer %d freed before it ran", what, v.buf.id)
		}
		es := v.ESize()
		v.Each(0, v.N, func(_, off int64) {
			e := v.Data[off*es : (off+1)*es]
			if b == 0 {
				clear(e)
				return
			}
			for i := range e {
				e[i] = b
			}
		})
		return nil
	}})
}

var _ runtime.HostReader = (*Device)(nil)

// ReadToHost copies each srcs[i] into dsts[i] after the work on rs and
// waits for them (runtime.HostReader: the cuda runtime reads through
// pinned memory; here it is CopyToHost and a synchronisation).
func (d *Device) ReadToHost(dsts [][]byte, srcs []runtime.Tensor, rs runtime.Stream) error {
	if len(dsts) != len(srcs) {
		return errorf(d.rank, "read to host: %d destinations for %d tensors", len(dsts), len(srcs))
	}
	s, err := d.stream(rs)
	if err != nil {
		return err
	}
	for i := range srcs {
		if err := d.CopyToHost(dsts[i], srcs[i], s); err != nil {
			return err
		}
	}
	return s.Synchronize()
}
