package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/kernels"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
	_ "github.com/hirlab/hir/runtime/sim"
)

// The collective scenarios beyond the case table (collScenario): tensors
// over 1 GiB, a rank that never joins, mismatched calls, send/recv; and
// the modules compiling.

// collBigScenario: tensors over 1 GiB (two_shot and in-place ring
// all_reduce, one_shot all_gather), with inputs whose sums are exact so the reference is
// computed directly.
func collBigScenario() error {
	rt, d, err := openColl(60 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	D, rank := d.WorldSize(), d.Rank()
	val := func(i int64, p int) float32 { return float32((i*7+int64(p)*13)%17 - 8) }
	s := d.DefaultStream()
	check := func(name string, got []byte, want func(i int64) float32, es int) error {
		n := int64(len(got) / es)
		for i := int64(0); i < n; i++ {
			var g float32
			if es == 2 {
				g = numeric.BF16ToF32(binary.LittleEndian.Uint16(got[2*i:]))
			} else {
				g = math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
			}
			if w := want(i); g != w {
				return fmt.Errorf("%s: element %d of %d: got %v want %v", name, i, n, g, w)
			}
		}
		fmt.Printf("rank %d: %s: %d elements correct\n", rank, name, n)
		return nil
	}
	// all_reduce two_shot, bf16, 1.2 GB.
	{
		n := int64(600_000_003)
		b, err := d.Alloc(2*n, ir.Symmetric)
		if err != nil {
			return err
		}
		o, err := d.Alloc(2*n, ir.Symmetric)
		if err != nil {
			return err
		}
		data := make([]byte, 2*n)
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint16(data[2*i:], numeric.F32ToBF16(val(i, rank)))
		}
		in := runtime.Tensor{Buf: b, DType: ir.BF16, Shape: []int64{n}}
		out := runtime.Tensor{Buf: o, DType: ir.BF16, Shape: []int64{n}}
		if err := d.CopyFromHost(in, data, s); err != nil {
			return err
		}
		for it := 0; it < 2; it++ {
			if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoTwoShot, ReduceOp: ir.ReduceSum, In: in, Out: out}, s); err != nil {
				return err
			}
		}
		if err := d.CopyToHost(data, out, s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		sum := func(i int64) float32 {
			var t float32
			for p := 0; p < D; p++ {
				t += val(i, p)
			}
			return t
		}
		if err := check("all_reduce two_shot bf16[600000003]", data, sum, 2); err != nil {
			return err
		}
		// ring, in place on the input: many segments per block.
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint16(data[2*i:], numeric.F32ToBF16(val(i, rank)))
		}
		if err := d.CopyFromHost(in, data, s); err != nil {
			return err
		}
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoRing, ReduceOp: ir.ReduceSum, In: in, Out: in}, s); err != nil {
			return err
		}
		if err := d.CopyToHost(data, in, s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := check("all_reduce ring bf16[600000003] in place", data, sum, 2); err != nil {
			return err
		}
		d.Free(b)
		d.Free(o)
	}
	// all_gather one_shot, f32, output over 1 GiB.
	{
		n := int64(1<<30)/4/int64(D) + 5
		b, err := d.Alloc(4*n, ir.Global)
		if err != nil {
			return err
		}
		o, err := d.Alloc(4*n*int64(D), ir.Symmetric)
		if err != nil {
			return err
		}
		data := make([]byte, 4*n)
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(val(i, rank)))
		}
		in := runtime.Tensor{Buf: b, DType: ir.F32, Shape: []int64{n}}
		out := runtime.Tensor{Buf: o, DType: ir.F32, Shape: []int64{n * int64(D)}}
		if err := d.CopyFromHost(in, data, s); err != nil {
			return err
		}
		if err := d.Collective(&runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoOneShot, In: in, Out: out}, s); err != nil {
			return err
		}
		all := make([]byte, out.Bytes())
		if err := d.CopyToHost(all, out, s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("all_gather one_shot f32[%d]", n*int64(D)), all, func(i int64) float32 { return val(i%n, int(i/n)) }, 4); err != nil {
			return err
		}
		d.Free(b)
		d.Free(o)
	}
	return d.ReleaseComm()
}

// collMissingScenario: both ranks run an all_reduce; then rank 1 skips the
// second one. Rank 0's kernel must give up after the timeout and its
// stream synchronisation must name rank 1.
func collMissingScenario() error {
	rt, d, err := openColl(3 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	rank := d.Rank()
	b, err := d.Alloc(4096, ir.Symmetric)
	if err != nil {
		return err
	}
	o, err := d.Alloc(4096, ir.Global)
	if err != nil {
		return err
	}
	call := runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceSum,
		In: runtime.Tensor{Buf: b, DType: ir.F32, Shape: []int64{1024}}, Out: runtime.Tensor{Buf: o, DType: ir.F32, Shape: []int64{1024}}}
	s := d.DefaultStream()
	if err := d.Collective(&call, s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	ctx := context.Background()
	if rank == 1 {
		// Skip the collective; wait until rank 0 has seen its error.
		return d.Opts.Store.Wait(ctx, []string{"test/missing/done"}, time.Minute)
	}
	start := time.Now()
	if err := d.Collective(&call, s); err != nil {
		return fmt.Errorf("the call itself failed: %v", err)
	}
	err = s.Synchronize()
	d.Opts.Store.Set(ctx, "test/missing/done", []byte("1"))
	if err == nil {
		return fmt.Errorf("a collective rank 1 never joined succeeded")
	}
	fmt.Printf("rank 0: failed after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, coll.ErrCollectiveTimeout) || !strings.Contains(err.Error(), "rank 1") {
		return fmt.Errorf("the error does not name the missing rank: %v", err)
	}
	if err := d.Collective(&call, s); err == nil || !errors.Is(err, coll.ErrCollectiveTimeout) {
		return fmt.Errorf("a collective after the fault: %v, want the sticky timeout", err)
	}
	return nil
}

// collMismatchScenario: the ranks call all_reduce with different shapes,
// then with different dtypes, and get an error naming both calls; an
// unsupported reduce op is refused before anything runs.
func collMismatchScenario() error {
	rt, d, err := openColl(10 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	rank := d.Rank()
	b, err := d.Alloc(8192, ir.Symmetric)
	if err != nil {
		return err
	}
	n := int64(1000 + rank)
	call := runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoOneShot, ReduceOp: ir.ReduceSum,
		In: runtime.Tensor{Buf: b, DType: ir.F32, Shape: []int64{n}}, Out: runtime.Tensor{Buf: b, DType: ir.F32, Shape: []int64{n}}}
	err = d.Collective(&call, nil)
	fmt.Printf("rank %d: mismatched shapes: %v\n", rank, err)
	if err == nil || !strings.Contains(err.Error(), "different collectives") || !strings.Contains(err.Error(), "f32[1000]") && !strings.Contains(err.Error(), "[1000]") {
		return fmt.Errorf("mismatched shapes: got %v", err)
	}
	bad := call
	bad.In.DType, bad.Out.DType, bad.ReduceOp = ir.I32, ir.I32, ir.ReduceAvg
	bad.In.Shape, bad.Out.Shape = []int64{1000}, []int64{1000}
	err = d.Collective(&bad, nil)
	fmt.Printf("rank %d: avg of i32: %v\n", rank, err)
	if err == nil || !strings.Contains(err.Error(), "avg needs a float dtype") {
		return fmt.Errorf("avg of i32: got %v", err)
	}
	return nil
}

// collP2PScenario: a ring shift (small, on one stream; large, with sends
// and receives on two streams), then a size mismatch.
func collP2PScenario() error {
	rt, d, err := openColl(10 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	D, rank := d.WorldSize(), d.Rank()
	right, left := (rank+1)%D, (rank+D-1)%D
	s := d.DefaultStream()
	s2, err := d.NewStream()
	if err != nil {
		return err
	}
	for _, n := range []int64{1, 1003, 5_000_001} {
		src, _ := d.Alloc(4*n, ir.Global)
		dst, _ := d.Alloc(4*n, ir.Global)
		mine := host.Random(ir.F32, []int64{n}, uint64(rank)+1)
		theirs := host.Random(ir.F32, []int64{n}, uint64(left)+1)
		st := runtime.Tensor{Buf: src, DType: ir.F32, Shape: []int64{n}}
		dt := runtime.Tensor{Buf: dst, DType: ir.F32, Shape: []int64{n}}
		if err := d.CopyFromHost(st, mine.Data, s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		for it := 0; it < 3; it++ {
			if err := d.Send(st, right, s); err != nil {
				return err
			}
			if err := d.Recv(dt, left, s2); err != nil {
				return err
			}
		}
		got := make([]byte, dt.Bytes())
		if err := d.CopyToHost(got, dt, s2); err != nil {
			return err
		}
		if err := errors.Join(s.Synchronize(), s2.Synchronize()); err != nil {
			return err
		}
		if !bytes.Equal(got, theirs.Data) {
			return fmt.Errorf("recv of f32[%d] from rank %d: wrong data", n, left)
		}
		fmt.Printf("rank %d: send/recv f32[%d] ring shift OK\n", rank, n)
		d.Free(src)
		d.Free(dst)
	}
	return d.ReleaseComm()
}

// TestCollectiveModulesCompile compiles (NVRTC) and loads every
// collective module at once, one goroutine each, and logs how long each
// took. Run first, it fills the kernel cache the multi-process tests then
// load from, so they do not compile the modules one after another.
func TestCollectiveModulesCompile(t *testing.T) {
	d := openSingle(t)
	srcs := map[string]string{"hir_comm_move": coll.MoveModuleSource()}
	for dt := range kernels.ReduceDTypes {
		s, err := coll.ReduceModuleSource(dt)
		require.NoError(t, err)
		srcs["hir_comm_reduce_"+dt.String()] = s
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for key, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			m, err := d.LoadCached(src, key+".cu", coll.NVRTCOptions)
			mu.Lock()
			defer mu.Unlock()
			if !assert.NoError(t, err, key) { // assert, not require: off the test's goroutine
				return
			}
			t.Logf("%s: %v", key, time.Since(t0).Round(time.Millisecond))
			assert.NoError(t, m.Unload(), "%s: unload", key)
		}()
	}
	wg.Wait()
	t.Logf("all %d modules in %v", len(srcs), time.Since(start).Round(time.Millisecond))
}
