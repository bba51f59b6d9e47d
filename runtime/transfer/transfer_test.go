package transfer_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/runtime/transfer"
)

// openSim opens the CPU runtime with world ranks and checks at cleanup that
// nothing leaked.
func openSim(t *testing.T, world int) *sim.Runtime {
	t.Helper()
	rt, err := sim.New(runtime.Config{WorldSize: world, Timeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Zero(t, rt.LiveBuffers(), "buffers still live at the end")
		rt.Close()
	})
	return rt
}

// onEveryRank runs f for every rank concurrently (ranks meet in collective
// calls) and fails the test with every rank's error.
func onEveryRank(t *testing.T, rt *sim.Runtime, f func(dev runtime.Device) error) {
	t.Helper()
	errs := make([]error, rt.WorldSize())
	var wg sync.WaitGroup
	for r := range rt.WorldSize() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, err := rt.Device(r)
			if err == nil {
				err = f(dev)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
}

// pattern is rank r's data: distinct per rank and element.
func pattern(r int, n int64, gen int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(r*1_000_000 + gen*10_000 + i)
	}
	return v
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func upload(dev runtime.Device, t runtime.Tensor, v []int32) error {
	s := dev.DefaultStream()
	if err := dev.CopyFromHost(t, i32Bytes(v), s); err != nil {
		return err
	}
	return s.Synchronize()
}

func download(dev runtime.Device, t runtime.Tensor) ([]int32, error) {
	b := make([]byte, t.Bytes())
	s := dev.DefaultStream()
	if err := dev.CopyToHost(b, t, s); err != nil {
		return nil, err
	}
	if err := s.Synchronize(); err != nil {
		return nil, err
	}
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

func same(what string, got, want []int32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %d, want %d", what, i, got[i], want[i])
		}
	}
	return nil
}

// alloc makes an i32 tensor of n elements in mem.
func alloc(dev runtime.Device, n int64, mem ir.MemoryType) (runtime.Tensor, error) {
	b, err := dev.Alloc(n*4, mem)
	if err != nil {
		return runtime.Tensor{}, err
	}
	return runtime.Tensor{Buf: b, DType: ir.I32, Shape: []int64{n}}, nil
}

// registerShard opens dev's agent, registers one symmetric i32 shard of n
// elements, holding fill if given (collective: every rank calls it), and
// allocates a global local tensor of n elements. done frees both and
// closes the agent; the caller deregisters before it runs.
func registerShard(dev runtime.Device, n int64, fill []int32) (reg *transfer.Registration, local runtime.Tensor, done func(), err error) {
	a, err := transfer.New(dev)
	if err != nil {
		return nil, local, nil, err
	}
	shard, err := alloc(dev, n, ir.Symmetric)
	if err != nil {
		a.Close()
		return nil, local, nil, err
	}
	local, err = alloc(dev, n, ir.Global)
	if err != nil {
		dev.Free(shard.Buf)
		a.Close()
		return nil, local, nil, err
	}
	done = func() {
		dev.Free(local.Buf)
		dev.Free(shard.Buf)
		a.Close()
	}
	if fill != nil {
		if err = upload(dev, shard, fill); err != nil {
			done()
			return nil, local, nil, err
		}
	}
	if reg, err = a.Register(shard); err != nil {
		done()
		return nil, local, nil, err
	}
	return reg, local, done, nil
}

func TestRingRead(t *testing.T) {
	for _, world := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			rt := openSim(t, world)
			const n = 1000 // not a multiple of the granularity: shards are padded
			onEveryRank(t, rt, func(dev runtime.Device) error {
				r := dev.Rank()
				peer := (r + 1) % world
				a, err := transfer.New(dev)
				if err != nil {
					return err
				}
				defer a.Close()
				shard, err := alloc(dev, n, ir.Symmetric)
				if err != nil {
					return err
				}
				defer dev.Free(shard.Buf)
				local, err := alloc(dev, n, ir.Global)
				if err != nil {
					return err
				}
				defer dev.Free(local.Buf)
				reg, err := a.Register(shard)
				if err != nil {
					return err
				}
				h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, peer, []transfer.Desc{transfer.Whole(0)})
				if err != nil {
					return err
				}
				// The same handle, posted in three rounds over new data.
				for gen := range 3 {
					if err := upload(dev, shard, pattern(r, n, gen)); err != nil {
						return err
					}
					if err := reg.Quiesce(); err != nil { // every rank's data is in place
						return err
					}
					if err := h.Post(nil); err != nil {
						return err
					}
					if err := h.Wait(); err != nil {
						return err
					}
					got, err := download(dev, local)
					if err != nil {
						return err
					}
					if err := same(fmt.Sprintf("round %d: read from rank %d", gen, peer), got, pattern(peer, n, gen)); err != nil {
						return err
					}
					if st, err := h.Status(); st != transfer.Done || err != nil {
						return fmt.Errorf("status after wait: %v, %v", st, err)
					}
					if err := reg.Quiesce(); err != nil { // nobody still reads before the next upload
						return err
					}
				}
				return reg.Deregister()
			})
		})
	}
}

func TestRingWrite(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			rt := openSim(t, world)
			const n = 64
			onEveryRank(t, rt, func(dev runtime.Device) error {
				r := dev.Rank()
				next, prev := (r+1)%world, (r+world-1)%world
				a, err := transfer.New(dev)
				if err != nil {
					return err
				}
				defer a.Close()
				// Register the second half of a symmetric buffer: offsets count.
				shard, err := alloc(dev, 2*n, ir.Symmetric)
				if err != nil {
					return err
				}
				defer dev.Free(shard.Buf)
				half := runtime.Tensor{Buf: shard.Buf, Offset: n * 4, DType: ir.I32, Shape: []int64{n}}
				src, err := alloc(dev, n, ir.Host)
				if err != nil {
					return err
				}
				defer dev.Free(src.Buf)
				if err := upload(dev, src, pattern(r, n, 0)); err != nil {
					return err
				}
				reg, err := a.Register(half)
				if err != nil {
					return err
				}
				h, err := reg.Prepare(transfer.Write, []runtime.Tensor{src}, next, []transfer.Desc{transfer.Whole(0)})
				if err != nil {
					return err
				}
				s, err := dev.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				if err := h.Post(s); err != nil {
					return err
				}
				// Stream-ordered completion: the default stream waits, the host does not.
				if err := h.WaitOn(dev.DefaultStream()); err != nil {
					return err
				}
				if err := reg.Deregister(); err != nil { // completes, then meets: every write has landed
					return err
				}
				got, err := download(dev, half)
				if err != nil {
					return err
				}
				if err := same(fmt.Sprintf("written by rank %d", prev), got, pattern(prev, n, 0)); err != nil {
					return err
				}
				first, err := download(dev, runtime.Tensor{Buf: shard.Buf, DType: ir.I32, Shape: []int64{n}})
				if err != nil {
					return err
				}
				return same("the unregistered first half", first, make([]int32, n))
			})
		})
	}
}

// TestManyInFlight posts 32 transfers at once (reads and writes of disjoint
// windows, over 4 streams) before waiting for any.
func TestManyInFlight(t *testing.T) {
	const world, k, chunk = 3, 32, 100
	rt := openSim(t, world)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		r := dev.Rank()
		peer := (r + 1) % world
		a, err := transfer.New(dev)
		if err != nil {
			return err
		}
		defer a.Close()
		// Tensor 0 is read by the left neighbour, tensor 1 written by it.
		readMe, err := alloc(dev, k*chunk, ir.Symmetric)
		if err != nil {
			return err
		}
		defer dev.Free(readMe.Buf)
		writeMe, err := alloc(dev, k*chunk, ir.Symmetric)
		if err != nil {
			return err
		}
		defer dev.Free(writeMe.Buf)
		if err := upload(dev, readMe, pattern(r, k*chunk, 0)); err != nil {
			return err
		}
		reg, err := a.Register(readMe, writeMe)
		if err != nil {
			return err
		}
		if err := reg.Quiesce(); err != nil {
			return err
		}
		var streams []runtime.Stream
		for range 4 {
			s, err := dev.NewStream()
			if err != nil {
				return err
			}
			defer s.Close()
			streams = append(streams, s)
		}
		locals := make([]runtime.Tensor, k)
		var handles []*transfer.Handle
		out := pattern(r, k*chunk, 1)
		for i := range k {
			if locals[i], err = alloc(dev, chunk, ir.Global); err != nil {
				return err
			}
			defer dev.Free(locals[i].Buf)
			h, err := reg.Prepare(transfer.Read, locals[i:i+1], peer, []transfer.Desc{{Index: 0, Offset: int64(i) * chunk, Count: chunk}})
			if err != nil {
				return err
			}
			handles = append(handles, h)
			src, err := alloc(dev, chunk, ir.Global)
			if err != nil {
				return err
			}
			defer dev.Free(src.Buf)
			if err := upload(dev, src, out[i*chunk:(i+1)*chunk]); err != nil {
				return err
			}
			w, err := reg.Prepare(transfer.Write, []runtime.Tensor{src}, peer, []transfer.Desc{{Index: 1, Offset: int64(i) * chunk, Count: chunk}})
			if err != nil {
				return err
			}
			handles = append(handles, w)
		}
		for i, h := range handles {
			if err := h.Post(streams[i%len(streams)]); err != nil {
				return err
			}
		}
		for _, h := range handles {
			if err := h.Wait(); err != nil {
				return err
			}
		}
		want := pattern(peer, k*chunk, 0)
		for i := range k {
			got, err := download(dev, locals[i])
			if err != nil {
				return err
			}
			if err := same(fmt.Sprintf("window %d", i), got, want[i*chunk:(i+1)*chunk]); err != nil {
				return err
			}
		}
		if err := reg.Deregister(); err != nil {
			return err
		}
		got, err := download(dev, writeMe)
		if err != nil {
			return err
		}
		return same("written by the left neighbour", got, pattern((r+world-1)%world, k*chunk, 1))
	})
}

// gate holds a rank's stream until release: the stream waits on a recv
// from the next rank, which release sends from a stream of that rank's own.
type gate struct {
	bufs  []runtime.Tensor // received into
	srcs  []runtime.Tensor // sent from
	sends []runtime.Stream
	devs  []runtime.Device
}

func newGate(t *testing.T, rt *sim.Runtime) *gate {
	g := &gate{}
	for r := range rt.WorldSize() {
		dev, _ := rt.Device(r)
		b, err := alloc(dev, 1, ir.Global)
		require.NoError(t, err)
		src, err := alloc(dev, 1, ir.Global)
		require.NoError(t, err)
		g.srcs = append(g.srcs, src)
		s, err := dev.NewStream()
		require.NoError(t, err)
		g.bufs, g.sends, g.devs = append(g.bufs, b), append(g.sends, s), append(g.devs, dev)
	}
	t.Cleanup(func() {
		for r, dev := range g.devs {
			g.sends[r].Close()
			dev.Free(g.bufs[r].Buf)
			dev.Free(g.srcs[r].Buf)
		}
	})
	return g
}

// hold makes rank's stream s wait for the gate.
func (g *gate) hold(rank int, s runtime.Stream) error {
	return g.devs[rank].Recv(g.bufs[rank], (rank+1)%len(g.devs), s)
}

// release lets rank's held stream go.
func (g *gate) release(rank int) error {
	w := len(g.devs)
	from := (rank + 1) % w
	return g.devs[from].Send(g.srcs[from], rank, g.sends[from])
}

// TestDeregisterWithTransfersInFlight is the ring read: every rank posts a
// read of its right neighbour's registered shard, held in flight, then
// deregisters and frees its shard at once. Deregister must wait until no
// peer still reads the shard; the CPU runtime fails a transfer whose peer
// freed the memory, so a wrong protocol shows as an error.
func TestDeregisterWithTransfersInFlight(t *testing.T) {
	const world, n, hold = 4, 4096, 100 * time.Millisecond
	rt := openSim(t, world)
	g := newGate(t, rt)
	var release sync.Once
	start := time.Now()
	onEveryRank(t, rt, func(dev runtime.Device) error {
		r := dev.Rank()
		peer := (r + 1) % world
		a, err := transfer.New(dev)
		if err != nil {
			return err
		}
		defer a.Close()
		shard, err := alloc(dev, n, ir.Symmetric)
		if err != nil {
			return err
		}
		if err := upload(dev, shard, pattern(r, n, 0)); err != nil {
			return err
		}
		local, err := alloc(dev, n, ir.Global)
		if err != nil {
			return err
		}
		defer dev.Free(local.Buf)
		reg, err := a.Register(shard)
		if err != nil {
			return err
		}
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, peer, []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		s, err := dev.NewStream()
		if err != nil {
			return err
		}
		defer s.Close()
		if err := g.hold(r, s); err != nil {
			return err
		}
		if err := h.Post(s); err != nil {
			return err
		}
		if st, _ := h.Status(); st != transfer.InFlight {
			return fmt.Errorf("a held transfer's status is %v, want in flight", st)
		}
		release.Do(func() {
			go func() {
				time.Sleep(hold)
				for q := range world {
					g.release(q)
				}
			}()
		})
		if err := reg.Deregister(); err != nil {
			return err
		}
		if d := time.Since(start); d < hold {
			return fmt.Errorf("deregister returned after %v, before the held transfers ran", d)
		}
		if err := dev.Free(shard.Buf); err != nil { // safe now: no peer reads it
			return err
		}
		if st, err := h.Status(); st != transfer.Done || err != nil {
			return fmt.Errorf("status after deregister: %v, %v", st, err)
		}
		if err := h.Wait(); err != nil { // completed by Deregister: returns at once
			return err
		}
		if err := h.Post(s); !errors.Is(err, transfer.ErrDeregistered) {
			return fmt.Errorf("post after deregister: %v, want ErrDeregistered", err)
		}
		got, err := download(dev, local)
		if err != nil {
			return err
		}
		return same(fmt.Sprintf("read from rank %d", peer), got, pattern(peer, n, 0))
	})
}

// TestFreeWithoutDeregisterIsCaught is the control for the test above: a
// rank that frees its registered shard while a peer's read is in flight
// makes that read fail on the CPU runtime (on a GPU it would read freed
// memory).
func TestFreeWithoutDeregisterIsCaught(t *testing.T) {
	const n = 256
	rt := openSim(t, 2)
	g := newGate(t, rt)
	shards := make([]runtime.Tensor, 2)
	handles := make([]*transfer.Handle, 2)
	agents := make([]*transfer.Agent, 2)
	locals := make([]runtime.Tensor, 2)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		r := dev.Rank()
		a, err := transfer.New(dev)
		if err != nil {
			return err
		}
		agents[r] = a
		if shards[r], err = alloc(dev, n, ir.Symmetric); err != nil {
			return err
		}
		if locals[r], err = alloc(dev, n, ir.Global); err != nil {
			return err
		}
		reg, err := a.Register(shards[r])
		if err != nil {
			return err
		}
		handles[r], err = reg.Prepare(transfer.Read, []runtime.Tensor{locals[r]}, 1-r, []transfer.Desc{transfer.Whole(0)})
		return err
	})
	if t.Failed() {
		return
	}
	dev0, _ := rt.Device(0)
	dev1, _ := rt.Device(1)
	s, err := dev0.NewStream()
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, g.hold(0, s))
	require.NoError(t, handles[0].Post(s))
	require.NoError(t, dev1.Free(shards[1].Buf)) // no deregister: wrong
	require.NoError(t, g.release(0))
	err = handles[0].Wait()
	assert.ErrorContains(t, err, "rank 1 freed that memory before the transfer ran", "the read of freed memory")
	st, serr := handles[0].Status()
	assert.Equal(t, transfer.Failed, st, "status %v, want %v", st, transfer.Failed)
	assert.Error(t, serr, "status error")
	if err != nil {
		assert.EqualError(t, handles[0].Wait(), err.Error(), "a second wait should give the first wait's error again")
	}
	s.Synchronize() // clears the stream's copy of the error
	dev0.Free(shards[0].Buf)
	for r := range 2 {
		dev, _ := rt.Device(r)
		dev.Free(locals[r].Buf)
		agents[r].Close()
	}
}

func TestWaitBeforePostAndDoubleWait(t *testing.T) {
	rt := openSim(t, 2)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		reg, local, done, err := registerShard(dev, 16, nil)
		if err != nil {
			return err
		}
		defer done()
		defer reg.Deregister()
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, 1-dev.Rank(), []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		if err := h.Wait(); !errors.Is(err, transfer.ErrNotPosted) {
			return fmt.Errorf("wait before post: %v, want ErrNotPosted", err)
		}
		if err := h.WaitOn(nil); !errors.Is(err, transfer.ErrNotPosted) {
			return fmt.Errorf("stream wait before post: %v, want ErrNotPosted", err)
		}
		if st, err := h.Status(); st != transfer.NotPosted || err != nil {
			return fmt.Errorf("status before post: %v, %v", st, err)
		}
		if err := h.Post(nil); err != nil {
			return err
		}
		if err := h.Wait(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := h.Wait(); err != nil {
			return fmt.Errorf("second wait: %v", err)
		}
		if d := time.Since(t0); d > 50*time.Millisecond {
			return fmt.Errorf("the second wait took %v; it should return at once", d)
		}
		if err := h.WaitOn(nil); err != nil {
			return fmt.Errorf("stream wait after a host wait: %v", err)
		}
		return nil
	})
}

func TestRepostInFlight(t *testing.T) {
	rt := openSim(t, 2)
	g := newGate(t, rt)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		r := dev.Rank()
		reg, local, done, err := registerShard(dev, 16, nil)
		if err != nil {
			return err
		}
		defer done()
		h, err := reg.Prepare(transfer.Write, []runtime.Tensor{local}, 1-r, []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		held, err := dev.NewStream()
		if err != nil {
			return err
		}
		defer held.Close()
		if err := g.hold(r, held); err != nil {
			return err
		}
		if err := h.Post(held); err != nil {
			return err
		}
		// Same stream: ordered after the first post, so allowed.
		if err := h.Post(held); err != nil {
			return fmt.Errorf("repost on the same stream: %v", err)
		}
		if err := h.Post(nil); !errors.Is(err, transfer.ErrInFlight) {
			return fmt.Errorf("repost on another stream while in flight: %v, want ErrInFlight", err)
		}
		if err := g.release(r); err != nil {
			return err
		}
		if err := h.Wait(); err != nil {
			return err
		}
		if err := h.Post(nil); err != nil {
			return fmt.Errorf("repost on another stream once done: %v", err)
		}
		return reg.Deregister()
	})
}

func TestErrors(t *testing.T) {
	rt := openSim(t, 2)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		r := dev.Rank()
		a, err := transfer.New(dev)
		if err != nil {
			return err
		}
		defer a.Close()
		shard, err := alloc(dev, 8, ir.Symmetric)
		if err != nil {
			return err
		}
		defer dev.Free(shard.Buf)
		other, err := alloc(dev, 8, ir.Symmetric)
		if err != nil {
			return err
		}
		defer dev.Free(other.Buf)
		global, err := alloc(dev, 8, ir.Global)
		if err != nil {
			return err
		}
		defer dev.Free(global.Buf)
		expect := func(what string, err error, want string) error {
			if err == nil || !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%s: got %v, want an error containing %q", what, err, want)
			}
			return nil
		}
		// Registering global memory fails on every rank, naming the rank.
		var errs []error
		_, err = a.Register(global)
		errs = append(errs, expect("register global", err, "rank 0: tensor 0: i32[8] is in global memory; peers reach a registered tensor through the symmetric heap, so it must be symmetric"))
		// Rank 1 registers another allocation than rank 0.
		mine := shard
		if r == 1 {
			mine = other
		}
		_, err = a.Register(mine)
		errs = append(errs, expect("mismatched allocations", err, "tensor 0 lies in symmetric allocation #"))
		reg, err := a.Register(shard)
		if err != nil {
			return err
		}
		whole := []transfer.Desc{transfer.Whole(0)}
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{global}, 2, whole)
		errs = append(errs, expect("remote outside the mesh", err, "rank 2 is outside the mesh of 2 ranks (0..1)"))
		small := runtime.Tensor{Buf: global.Buf, DType: ir.I32, Shape: []int64{4}}
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{small}, 1-r, whole)
		errs = append(errs, expect("size mismatch", err, "size mismatch: the local tensor holds 4 elements (16 bytes) but the window of rank "+fmt.Sprint(1-r)+"'s tensor 0 holds 8 (32 bytes)"))
		f32 := runtime.Tensor{Buf: global.Buf, DType: ir.F32, Shape: []int64{8}}
		_, err = reg.Prepare(transfer.Write, []runtime.Tensor{f32}, 1-r, whole)
		errs = append(errs, expect("dtype mismatch", err, "the local tensor is f32 but rank "+fmt.Sprint(1-r)+"'s tensor 0 is i32"))
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{small}, 1-r, []transfer.Desc{{Index: 0, Offset: 6, Count: 4}})
		errs = append(errs, expect("out of bounds", err, "elements [6, 10) are outside rank"))
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{small}, 1-r, []transfer.Desc{{Index: 1, Count: 4}})
		errs = append(errs, expect("unregistered", err, "registered 1 tensors; there is no tensor 1 (not registered)"))
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{small, small}, 1-r, []transfer.Desc{{Count: 4}})
		errs = append(errs, expect("count mismatch", err, "2 local tensors for 1 remote windows"))
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{small}, 1-r, []transfer.Desc{{Offset: 4, Count: 4}})
		if err != nil {
			return err
		}
		if err := reg.Deregister(); err != nil {
			return err
		}
		errs = append(errs, expect("post after deregister", h.Post(nil), "the registration was deregistered"))
		_, err = reg.Prepare(transfer.Read, []runtime.Tensor{small}, 1-r, []transfer.Desc{{Count: 4}})
		errs = append(errs, expect("prepare after deregister", err, "the registration was deregistered"))
		errs = append(errs, expect("deregister twice", reg.Deregister(), "the registration was deregistered"))
		return errors.Join(errs...)
	})
}

// noOneSided is a device without runtime.OneSided.
type noOneSided struct{ runtime.Device }

// brokenCopy is a device whose one-sided copies do nothing.
type brokenCopy struct{ *sim.Device }

func (b brokenCopy) PreparePeerCopy(local, remote runtime.Tensor, peer int, write bool) (runtime.PeerCopy, error) {
	return nopCopy{}, nil
}

type nopCopy struct{}

func (nopCopy) Post(runtime.Stream) error { return nil }
func (nopCopy) Err() error                { return nil }

func TestProbeReportsUnavailable(t *testing.T) {
	rt := openSim(t, 2)
	onEveryRank(t, rt, func(dev runtime.Device) error {
		_, err := transfer.New(noOneSided{dev})
		if !errors.Is(err, transfer.ErrUnavailable) || !strings.Contains(err.Error(), "does not implement runtime.OneSided") {
			return fmt.Errorf("a device without OneSided: %v", err)
		}
		_, err = transfer.New(brokenCopy{dev.(*sim.Device)})
		if !errors.Is(err, transfer.ErrUnavailable) {
			return fmt.Errorf("a broken copy: %v, want ErrUnavailable", err)
		}
		// Both ranks fail, and each names the failing ranks.
		if !strings.Contains(err.Error(), "rank 0: probe: the loopback read returned 0 at element 0, want 1") ||
			!strings.Contains(err.Error(), "rank 1: probe: the loopback read returned 0 at element 0") {
			return fmt.Errorf("a broken copy: %v", err)
		}
		return nil
	})
}

// TestCapturedPostSettles: a post captured into a graph is done once the
// graph's launch is synchronised, but its completion event was recorded
// by the capture, so the host cannot wait on it (the sim models CUDA's
// CUDA_ERROR_INVALID_VALUE): Deregister fails until Settle says the posts
// are complete, and then reads the peer's data right.
func TestCapturedPostSettles(t *testing.T) {
	for _, settle := range []bool{false, true} {
		t.Run(fmt.Sprintf("settle=%v", settle), func(t *testing.T) {
			rt := openSim(t, 2)
			const n = 64
			onEveryRank(t, rt, func(dev runtime.Device) error {
				r := dev.Rank()
				reg, local, done, err := registerShard(dev, n, pattern(r, n, 0))
				if err != nil {
					return err
				}
				defer done()
				h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, 1-r, []transfer.Desc{transfer.Whole(0)})
				if err != nil {
					return err
				}
				c := dev.(runtime.Capturer)
				s := dev.DefaultStream()
				if err := c.BeginCapture(s); err != nil {
					return err
				}
				postErr := h.Post(s)
				g, err := c.EndCapture(s)
				if err = errors.Join(postErr, err); err != nil {
					return err
				}
				defer g.Close()
				if err := g.Launch(s); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				if settle {
					reg.Settle()
				}
				err = reg.Deregister()
				if !settle {
					if err == nil || !strings.Contains(err.Error(), "captured into a graph") {
						return fmt.Errorf("deregister after a captured post without Settle: %v, want the captured-event error", err)
					}
					return nil
				}
				if err != nil {
					return err
				}
				got, err := download(dev, local)
				if err != nil {
					return err
				}
				return same("read in the graph", got, pattern(1-r, n, 0))
			})
		})
	}
}
