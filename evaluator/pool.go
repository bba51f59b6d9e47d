package evaluator

import (
	"errors"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// pool is a caching allocator: `free` parks a buffer here and the next
// allocation of the same size and memory type takes it back (last in, first
// out). Every rank runs the same program, so every rank reuses the same way
// and collective symmetric allocations stay matched; a program that runs
// again gets the same buffers, so the handle cache hits.
type pool struct {
	dev   runtime.Device
	free  map[poolKey][]pooled
	all   []runtime.Buffer         // every buffer allocated, in order, for close
	asked map[runtime.Buffer]int64 // the size each was allocated for: Size() may be rounded up (symmetric shards)
	zeroB []byte
}

type poolKey struct {
	bytes int64
	mem   ir.MemoryType
}

// pooled is a parked buffer; ev, when set, completes once the stream that
// freed it is done with it, so a reuse on another stream waits for it.
type pooled struct {
	buf runtime.Buffer
	ev  runtime.Event
}

func newPool(dev runtime.Device) *pool {
	return &pool{dev: dev, free: map[poolKey][]pooled{}, asked: map[runtime.Buffer]int64{}}
}

func (p *pool) get(bytes int64, mem ir.MemoryType, s runtime.Stream) (runtime.Buffer, error) {
	k := poolKey{bytes, mem}
	if list := p.free[k]; len(list) > 0 {
		e := list[len(list)-1]
		p.free[k] = list[:len(list)-1]
		if e.ev != nil {
			err := s.WaitEvent(e.ev)
			err = errors.Join(err, e.ev.Close())
			if err != nil {
				return nil, err
			}
		}
		return e.buf, nil
	}
	buf, err := p.dev.Alloc(bytes, mem)
	if err != nil {
		return nil, err
	}
	p.all = append(p.all, buf)
	p.asked[buf] = bytes
	return buf, nil
}

// put parks buf; s is the stream whose work on buf must finish before reuse
// (nil when the caller has synchronised).
func (p *pool) put(buf runtime.Buffer, s runtime.Stream) error {
	e := pooled{buf: buf}
	if s != nil {
		ev, err := p.dev.NewEvent()
		if err != nil {
			return err
		}
		if err := s.Record(ev); err != nil {
			return errors.Join(err, ev.Close())
		}
		e.ev = ev
	}
	// Park it under the size get was asked for, so the same request finds
	// it again.
	bytes, ok := p.asked[buf]
	if !ok {
		bytes = buf.Size()
	}
	k := poolKey{bytes, buf.Mem()}
	p.free[k] = append(p.free[k], e)
	return nil
}

// zeros returns n zero bytes to upload (kept to avoid allocating each time).
func (p *pool) zeros(n int64) []byte {
	if int64(len(p.zeroB)) < n {
		p.zeroB = make([]byte, n)
	}
	return p.zeroB[:n]
}

// close frees every buffer in allocation order (the same on every rank, as
// collective frees of symmetric buffers need).
func (p *pool) close() error {
	var errs []error
	for _, list := range p.free {
		for _, e := range list {
			if e.ev != nil {
				errs = append(errs, e.ev.Synchronize(), e.ev.Close())
			}
		}
	}
	for _, b := range p.all {
		errs = append(errs, p.dev.Free(b))
	}
	p.all = nil
	p.free = map[poolKey][]pooled{}
	p.asked = map[runtime.Buffer]int64{}
	return errors.Join(errs...)
}
