package coll

import (
	"context"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/nccl"
	"github.com/hirlab/hir/runtime/store"
)

// algo=nccl: the collective runs through NCCL (runtime/nccl), one
// communicator per job, made at the first nccl collective (which every
// rank reaches at the same point): rank 0 makes the unique id and the
// ranks exchange it through the job's store.

// ncclComm returns the device's communicator, making it on first use.
func (d *Comm) ncclComm() (*nccl.Comm, error) {
	c := &d.State
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.ncclInit {
		return c.ncclComm, c.ncclErr
	}
	c.ncclInit = true
	c.ncclComm, c.ncclErr = d.initNCCL()
	return c.ncclComm, c.ncclErr
}

func (d *Comm) initNCCL() (*nccl.Comm, error) {
	world, rank := d.Opts.WorldSize, d.Opts.Rank
	lib, loadErr := nccl.Load()
	// Every rank says whether it could load NCCL; rank 0 adds the id.
	msg := []byte("ok")
	var id nccl.UniqueID
	if loadErr != nil {
		msg = []byte("error: " + loadErr.Error())
	} else if rank == 0 {
		var err error
		if id, err = lib.GetUniqueID(); err != nil {
			msg = []byte("error: " + err.Error())
		} else {
			msg = append([]byte("id:"), id[:]...)
		}
	}
	if world > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
		defer cancel()
		all, err := store.ExchangeAll(ctx, d.Opts.Store, "cuda/nccl/id", rank, world, msg, d.Opts.Timeout)
		if err != nil {
			return nil, fmt.Errorf("exchanging the NCCL unique id: %w", err)
		}
		var bad []string
		for r, m := range all {
			if s := string(m); strings.HasPrefix(s, "error: ") {
				bad = append(bad, fmt.Sprintf("rank %d: %s", r, strings.TrimPrefix(s, "error: ")))
			}
		}
		if len(bad) > 0 {
			return nil, fmt.Errorf("NCCL is not usable on every rank: %s", strings.Join(bad, "; "))
		}
		if !strings.HasPrefix(string(all[0]), "id:") || len(all[0]) != 3+nccl.UniqueIDBytes {
			return nil, fmt.Errorf("rank 0 published no NCCL unique id")
		}
		copy(id[:], all[0][3:])
	} else if loadErr != nil {
		return nil, loadErr
	}
	var comm *nccl.Comm
	err := d.WithCtx(func() error {
		var err error
		comm, err = lib.InitRank(id, world, rank)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("NCCL communicator (NCCL %s): %w", lib.VersionString(), err)
	}
	return comm, nil
}

// NCCLVersion is the version of the NCCL this process loaded, or an error
// saying why it cannot load it.
func NCCLVersion() (string, error) {
	lib, err := nccl.Load()
	if err != nil {
		return "", err
	}
	return lib.VersionString(), nil
}

// runNCCL runs p through NCCL on stream s. NCCL moves contiguous blocks,
// so blocks along an axis other than the outermost are packed into (or
// unpacked from) a stream-ordered temporary with the strided copy.
func (d *Comm) runNCCL(p *CollPlan, s *gpu.Stream) error {
	comm, err := d.ncclComm()
	if err != nil {
		return err
	}
	dt, err := nccl.DataTypeOf(p.dt)
	if err != nil {
		return err
	}
	op, _ := nccl.RedOpOf(p.reduce)
	D, r := d.Opts.WorldSize, d.Opts.Rank
	es := p.es
	in, out := uintptr(p.inPtr), uintptr(p.outPtr)
	nIn, nOut := p.in.NumElements(), p.out.NumElements()
	call := func(f func() error) error { return d.WithCtx(f) }
	// blocks is a tensor's D blocks along axis: their layout, and whether
	// they already lie one after another.
	packedAlong := func(shape []int64, axis int) bool {
		_, l := BlockLayout(shape, axis, shape[axis]/int64(D))
		return l.Run == 0
	}
	// withPacked runs f on a packed copy of t's blocks along axis (each of
	// shape blockShape), or on t itself when they already are packed;
	// unpack copies the packed blocks back into t after f.
	withPacked := func(t runtime.Tensor, b *gpu.Buffer, axis int, blockShape []int64, pack, unpack bool, f func(ptr uint64) error) error {
		ptr := b.Ptr + uint64(t.Offset)
		if packedAlong(t.Shape, axis) {
			return f(ptr)
		}
		blk := ir.Product(blockShape)
		run, _ := BlockLayout(t.Shape, axis, blockShape[axis])
		strides := runtime.ContiguousStrides(t.Shape)
		return d.Staged(int(blk*int64(D)*es), s, func(tmp uint64) error {
			work := d.tempBuffer(tmp, blk*int64(D)*es)
			view := func(c int) (runtime.Tensor, runtime.Tensor) {
				return runtime.Tensor{Buf: b, Offset: t.Offset + int64(c)*run*es, DType: p.dt, Shape: blockShape, Strides: strides},
					runtime.Tensor{Buf: work, Offset: int64(c) * blk * es, DType: p.dt, Shape: blockShape}
			}
			for c := 0; pack && c < D; c++ {
				src, dst := view(c)
				if err := d.Copy(dst, src, s); err != nil {
					return err
				}
			}
			if err := f(tmp); err != nil {
				return err
			}
			for c := 0; unpack && c < D; c++ {
				dst, src := view(c)
				if err := d.Copy(dst, src, s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	switch p.op {
	case ir.OpAllReduce:
		return call(func() error { return comm.AllReduce(in, out, uint64(nIn), dt, op, s.H) })
	case ir.OpBroadcast:
		return call(func() error { return comm.Broadcast(in, out, uint64(nIn), dt, p.root, s.H) })
	case ir.OpReduce:
		return call(func() error { return comm.Reduce(in, out, uint64(nIn), dt, op, p.root, s.H) })
	case ir.OpAllGather:
		return withPacked(p.out, p.outB, p.axis, p.in.Shape, false, true, func(dst uint64) error {
			return call(func() error { return comm.AllGather(in, uintptr(dst), uint64(nIn), dt, s.H) })
		})
	case ir.OpReduceScatter:
		return withPacked(p.in, p.inB, p.axis, p.out.Shape, true, false, func(src uint64) error {
			return call(func() error { return comm.ReduceScatter(uintptr(src), out, uint64(nOut), dt, op, s.H) })
		})
	case ir.OpAllToAll:
		a, b := p.concat, p.axis
		blk := nIn / int64(D)
		blockShape := append([]int64(nil), p.in.Shape...)
		blockShape[b] = p.out.Shape[b]
		return withPacked(p.in, p.inB, b, blockShape, true, false, func(src uint64) error {
			return withPacked(p.out, p.outB, a, blockShape, false, true, func(dst uint64) error {
				return call(func() error {
					return comm.Group(func() error {
						for q := 0; q < D; q++ {
							if err := comm.Send(uintptr(src+uint64(int64(q)*blk*es)), uint64(blk), dt, q, s.H); err != nil {
								return err
							}
							if err := comm.Recv(uintptr(dst+uint64(int64(q)*blk*es)), uint64(blk), dt, q, s.H); err != nil {
								return err
							}
						}
						return nil
					})
				})
			})
		})
	case ir.OpGather:
		gatherAll := func(dst uint64) error {
			return call(func() error {
				return comm.Group(func() error {
					if err := comm.Send(in, uint64(nIn), dt, p.root, s.H); err != nil {
						return err
					}
					for q := 0; r == p.root && q < D; q++ {
						if err := comm.Recv(uintptr(dst+uint64(int64(q)*nIn*es)), uint64(nIn), dt, q, s.H); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
		if r != p.root {
			return gatherAll(0)
		}
		return withPacked(p.out, p.outB, p.axis, p.in.Shape, false, true, gatherAll)
	case ir.OpScatter:
		scatterAll := func(src uint64) error {
			return call(func() error {
				return comm.Group(func() error {
					for q := 0; r == p.root && q < D; q++ {
						if err := comm.Send(uintptr(src+uint64(int64(q)*nOut*es)), uint64(nOut), dt, q, s.H); err != nil {
							return err
						}
					}
					return comm.Recv(out, uint64(nOut), dt, p.root, s.H)
				})
			})
		}
		if r != p.root {
			return scatterAll(0)
		}
		return withPacked(p.in, p.inB, p.axis, p.out.Shape, true, false, scatterAll)
	}
	return fmt.Errorf("no NCCL path for %s", p.op)
}
