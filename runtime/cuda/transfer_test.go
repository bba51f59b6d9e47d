package cuda

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/transfer"
)

// One-sided transfers on GPUs: a single-GPU loopback test, the ring READ
// and WRITE across 2 (and 4) processes with the data checked, and the
// bandwidth/latency benchmark next to a plain cuMemcpyAsync through the
// same peer mapping.

func init() {
	scenarios["transfer"] = transferScenario
	scenarios["transfer-bench"] = transferBenchScenario
}

func TestTransferLoopback(t *testing.T) {
	d := openSingle(t)
	a, err := transfer.New(d) // the probe itself is a loopback read
	require.NoError(t, err)
	defer a.Close()
	const n = 4099
	buf, err := d.Alloc(n*4, ir.Symmetric)
	require.NoError(t, err)
	defer d.Free(buf)
	lbuf, err := d.Alloc(n*4, ir.Global)
	require.NoError(t, err)
	defer d.Free(lbuf)
	shard := runtime.Tensor{Buf: buf, DType: ir.I32, Shape: []int64{n}}
	local := runtime.Tensor{Buf: lbuf, DType: ir.I32, Shape: []int64{n}}
	require.NoError(t, d.CopyFromHost(local, i32Bytes(pattern(7, n)), nil))
	reg, err := a.Register(shard)
	require.NoError(t, err)
	w, err := reg.Prepare(transfer.Write, []runtime.Tensor{local}, 0, []transfer.Desc{transfer.Whole(0)})
	require.NoError(t, err)
	assert.ErrorIs(t, w.Wait(), transfer.ErrNotPosted, "wait before post")
	require.NoError(t, w.Post(nil))
	require.NoError(t, w.Wait())
	assert.NoError(t, w.Wait(), "second wait")
	eqI32(t, "the registered shard after a loopback write", toHost(t, d, shard), pattern(7, n))
	require.NoError(t, reg.Deregister())
	assert.ErrorIs(t, w.Post(nil), transfer.ErrDeregistered, "post after deregister")
	// A registration must be symmetric.
	_, err = a.Register(local)
	assert.ErrorContains(t, err, "must be symmetric", "registering global memory")
}

func TestTransferRing2(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "transfer"))
}

func TestTransferRing4(t *testing.T) {
	needGPUs(t, 4)
	checkRanks(t, runRanks(t, 4, "transfer"))
}

func xferUpload(d *Device, t runtime.Tensor, v []int32) error {
	if err := d.CopyFromHost(t, i32Bytes(v), nil); err != nil {
		return err
	}
	return d.DefaultStream().Synchronize()
}

func xferI32s(b runtime.Buffer, off, n int64) runtime.Tensor {
	return runtime.Tensor{Buf: b, Offset: off * 4, DType: ir.I32, Shape: []int64{n}}
}

// transferScenario: ring READ (with handle reuse over new data), ring WRITE
// into an offset window, 64 transfers in flight over 4 streams, a strided
// local tensor, wait before post and double wait, and deregistration with
// reads in flight while the owners overwrite their shards.
func transferScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	baseFD := openFDCount()
	rank, world := d.Rank(), d.WorldSize()
	next, prev := (rank+1)%world, (rank+world-1)%world
	a, err := transfer.New(d)
	if err != nil {
		return err
	}
	step := func(what string, f func() error) error {
		t0 := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fmt.Printf("rank %d: %s ok (%v)\n", rank, what, time.Since(t0).Round(time.Microsecond))
		return nil
	}

	// 1. Ring READ of 1 MiB + 3 elements, the handle reused over new data.
	const n = 1<<18 + 3
	buf, err := d.Alloc(2*n*4, ir.Symmetric)
	if err != nil {
		return err
	}
	lbuf, err := d.Alloc(n*4, ir.Global)
	if err != nil {
		return err
	}
	readMe, writeMe := xferI32s(buf, 0, n), xferI32s(buf, n, n)
	local := xferI32s(lbuf, 0, n)
	reg, err := a.Register(readMe, writeMe)
	if err != nil {
		return err
	}
	err = step("ring READ, 3 rounds on one handle", func() error {
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, next, []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		for round := int32(0); round < 3; round++ {
			if err := xferUpload(d, readMe, seqI32(n, int32(rank)*10_000_000+round*1000)); err != nil {
				return err
			}
			if err := reg.Quiesce(); err != nil {
				return err
			}
			if err := h.Post(nil); err != nil {
				return err
			}
			if err := h.Wait(); err != nil {
				return err
			}
			got, err := readI32(d, local)
			if err != nil {
				return err
			}
			if err := compare(fmt.Sprintf("round %d, read from rank %d", round, next), got, seqI32(n, int32(next)*10_000_000+round*1000)); err != nil {
				return err
			}
			if err := reg.Quiesce(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	// 2. Ring WRITE into the peer's second registered tensor, completed on
	// the stream (WaitOn), then Quiesce: every write has landed.
	err = step("ring WRITE", func() error {
		if err := xferUpload(d, local, pattern(rank, n)); err != nil {
			return err
		}
		h, err := reg.Prepare(transfer.Write, []runtime.Tensor{local}, next, []transfer.Desc{transfer.Whole(1)})
		if err != nil {
			return err
		}
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		defer s.Close()
		if err := h.Post(s); err != nil {
			return err
		}
		if err := h.WaitOn(d.DefaultStream()); err != nil {
			return err
		}
		if err := reg.Quiesce(); err != nil {
			return err
		}
		got, err := readI32(d, writeMe)
		if err != nil {
			return err
		}
		return compare(fmt.Sprintf("written by rank %d", prev), got, pattern(prev, n))
	})
	if err != nil {
		return err
	}

	// 3. 64 transfers in flight: 32 window reads and 32 window writes over
	// 4 streams, posted before any wait.
	err = step("64 transfers in flight", func() error {
		const k, chunk = 32, n / 32
		if err := xferUpload(d, readMe, pattern(rank, n)); err != nil {
			return err
		}
		if err := reg.Quiesce(); err != nil {
			return err
		}
		var streams []runtime.Stream
		for range 4 {
			s, err := d.NewStream()
			if err != nil {
				return err
			}
			defer s.Close()
			streams = append(streams, s)
		}
		src, err := d.Alloc(n*4, ir.Global)
		if err != nil {
			return err
		}
		defer d.Free(src)
		if err := xferUpload(d, xferI32s(src, 0, n), pattern(rank+100, n)); err != nil {
			return err
		}
		var hs []*transfer.Handle
		for i := int64(0); i < k; i++ {
			r, err := reg.Prepare(transfer.Read, []runtime.Tensor{xferI32s(lbuf, i*chunk, chunk)}, next, []transfer.Desc{{Index: 0, Offset: i * chunk, Count: chunk}})
			if err != nil {
				return err
			}
			w, err := reg.Prepare(transfer.Write, []runtime.Tensor{xferI32s(src, i*chunk, chunk)}, next, []transfer.Desc{{Index: 1, Offset: i * chunk, Count: chunk}})
			if err != nil {
				return err
			}
			hs = append(hs, r, w)
		}
		for i, h := range hs {
			if err := h.Post(streams[i%4]); err != nil {
				return err
			}
		}
		for _, h := range hs {
			if err := h.Wait(); err != nil {
				return err
			}
		}
		got, err := readI32(d, xferI32s(lbuf, 0, k*chunk))
		if err != nil {
			return err
		}
		if err := compare("windows read", got, pattern(next, n)[:k*chunk]); err != nil {
			return err
		}
		if err := reg.Quiesce(); err != nil {
			return err
		}
		got, err = readI32(d, xferI32s(buf, n, k*chunk))
		if err != nil {
			return err
		}
		return compare(fmt.Sprintf("windows written by rank %d", prev), got, pattern(prev+100, n)[:k*chunk])
	})
	if err != nil {
		return err
	}

	// 4. A strided local tensor (every other element): the copy kernel path.
	err = step("READ into a strided local tensor", func() error {
		const m = 1000
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{{Buf: lbuf, DType: ir.I32, Shape: []int64{m}, Strides: []int64{2}}}, next, []transfer.Desc{{Index: 0, Count: m}})
		if err != nil {
			return err
		}
		if err := xferUpload(d, xferI32s(lbuf, 0, 2*m), make([]int32, 2*m)); err != nil {
			return err
		}
		if err := h.Post(nil); err != nil {
			return err
		}
		if err := h.Wait(); err != nil {
			return err
		}
		got, err := readI32(d, xferI32s(lbuf, 0, 2*m))
		if err != nil {
			return err
		}
		want := make([]int32, 2*m)
		for i, v := range pattern(next, m) {
			want[2*i] = v
		}
		return compare("strided read", got, want)
	})
	if err != nil {
		return err
	}

	// 5. Wait before post, double wait, status.
	err = step("wait before post, double wait", func() error {
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, next, []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		if err := h.Wait(); !errors.Is(err, transfer.ErrNotPosted) {
			return fmt.Errorf("wait before post: %v, want ErrNotPosted", err)
		}
		if err := h.WaitOn(nil); !errors.Is(err, transfer.ErrNotPosted) {
			return fmt.Errorf("stream wait before post: %v, want ErrNotPosted", err)
		}
		if st, _ := h.Status(); st != transfer.NotPosted {
			return fmt.Errorf("status before post: %v", st)
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
		if dt := time.Since(t0); dt > time.Millisecond {
			return fmt.Errorf("the second wait took %v", dt)
		}
		if st, err := h.Status(); st != transfer.Done || err != nil {
			return fmt.Errorf("status after wait: %v, %v", st, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := reg.Deregister(); err != nil {
		return err
	}
	d.Free(lbuf)
	d.Free(buf)

	// 6. Deregister with reads in flight: each rank reads its neighbour's
	// 256 MiB shard 8 times over, deregisters at once, then overwrites its
	// own shard. Deregister must hold every rank until no peer still
	// reads, so every read sees the old data whole.
	err = step("deregister with 8 x 256 MiB reads in flight, then overwrite", func() error {
		const big = 64 << 20 // i32 elements: 256 MiB
		sb, err := d.Alloc(big*4, ir.Symmetric)
		if err != nil {
			return err
		}
		defer d.Free(sb)
		lb, err := d.Alloc(big*4, ir.Global)
		if err != nil {
			return err
		}
		defer d.Free(lb)
		old, fresh := pattern(rank, big), pattern(rank+50, big)
		if err := xferUpload(d, xferI32s(sb, 0, big), old); err != nil {
			return err
		}
		reg, err := a.Register(xferI32s(sb, 0, big))
		if err != nil {
			return err
		}
		if err := reg.Quiesce(); err != nil {
			return err
		}
		h, err := reg.Prepare(transfer.Read, []runtime.Tensor{xferI32s(lb, 0, big)}, next, []transfer.Desc{transfer.Whole(0)})
		if err != nil {
			return err
		}
		for range 8 {
			if err := h.Post(nil); err != nil {
				return err
			}
		}
		if st, _ := h.Status(); st != transfer.InFlight {
			return fmt.Errorf("status right after posting 2 GiB of reads: %v, want in flight", st)
		}
		if err := reg.Deregister(); err != nil {
			return err
		}
		if st, err := h.Status(); st != transfer.Done || err != nil {
			return fmt.Errorf("status after deregister: %v, %v", st, err)
		}
		if err := xferUpload(d, xferI32s(sb, 0, big), fresh); err != nil {
			return err
		}
		got, err := readI32(d, xferI32s(lb, 0, big))
		if err != nil {
			return err
		}
		return compare(fmt.Sprintf("read from rank %d", next), got, pattern(next, big))
	})
	if err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return err
	}
	if st := d.Stats(); st.Events != 0 {
		return fmt.Errorf("%d events left after the agent closed", st.Events)
	}
	return leakCheck(d, baseFD)
}

// smCopyUnit takes the widest element both addresses and the length allow.
func TestSMCopyUnit(t *testing.T) {
	for _, c := range []struct {
		dst, src, n uint64
		want        int
	}{
		{0x1000, 0x2000, 64, 8},
		{0x1000, 0x2004, 64, 4},
		{0x1000, 0x2000, 6, 2},
		{0x1001, 0x2000, 64, 1},
		{0x1000, 0x2000, 8, 8},
	} {
		es := smCopyUnit(c.dst, c.src, c.n)
		if es != c.want {
			t.Errorf("smCopyUnit(%#x, %#x, %d) = %d, want %d", c.dst, c.src, c.n, es, c.want)
		}
		if unitDType[es].Size() != es {
			t.Errorf("unitDType[%d] is %v", es, unitDType[es])
		}
	}
}
