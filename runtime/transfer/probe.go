package transfer

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// probeElems is the size of the probe's buffer, in i32 elements.
const probeElems = 64

// probe checks, at New, that transfers work here: it registers a small
// symmetric buffer, reads it back through a loopback transfer (this rank's
// own window, through the same path a peer's takes) and compares. Every
// step that involves the peers is reached by every rank even after a local
// failure, and the ranks agree at the end, so all report the same outcome.
func (a *Agent) probe() error {
	buf, err := a.dev.Alloc(probeElems*4, ir.Symmetric) // collective, all or nothing
	if err != nil {
		return fmt.Errorf("probe: allocating a symmetric buffer: %w", err)
	}
	local, err := a.dev.Alloc(probeElems*4, ir.Global)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("probe: allocating the local buffer: %w", err))
	}
	shard := runtime.Tensor{Buf: buf, DType: ir.I32, Shape: []int64{probeElems}}
	want := make([]byte, probeElems*4)
	for i := range probeElems {
		binary.LittleEndian.PutUint32(want[4*i:], uint32(a.rank*1_000_003+i*7+1))
	}
	s := a.dev.DefaultStream()
	if err := a.dev.CopyFromHost(shard, want, s); err != nil {
		errs = append(errs, err)
	} else if err := s.Synchronize(); err != nil {
		errs = append(errs, err)
	}
	reg, err := a.Register(shard) // collective; fails on every rank or none
	if err != nil {
		errs = append(errs, err)
	} else {
		if len(errs) == 0 {
			errs = append(errs, a.loopback(reg, runtime.Tensor{Buf: local, DType: ir.I32, Shape: []int64{probeElems}}, want))
		}
		errs = append(errs, reg.Deregister())
	}
	if local != nil {
		errs = append(errs, a.dev.Free(local))
	}
	errs = append(errs, a.dev.Free(buf)) // collective
	rec := record{}
	if err := errors.Join(errs...); err != nil {
		rec.Err = err.Error()
	}
	recs, err := a.gather(rec)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := failures(recs); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// loopback reads this rank's own registered window into local and checks
// the bytes.
func (a *Agent) loopback(reg *Registration, local runtime.Tensor, want []byte) error {
	h, err := reg.Prepare(Read, []runtime.Tensor{local}, a.rank, []Desc{Whole(0)})
	if err != nil {
		return err
	}
	if err := h.Post(nil); err != nil {
		return err
	}
	if err := h.Wait(); err != nil {
		return err
	}
	got := make([]byte, len(want))
	s := a.dev.DefaultStream()
	if err := a.dev.CopyToHost(got, local, s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for i := 0; i < len(want); i += 4 {
		if g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:]); g != w {
			return fmt.Errorf("probe: the loopback read returned %d at element %d, want %d", int32(g), i/4, int32(w))
		}
	}
	return nil
}
