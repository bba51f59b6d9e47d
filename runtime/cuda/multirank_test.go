package cuda

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func init() {
	scenarios["symmetric"] = symmetricScenario
	scenarios["peer-dies"] = peerDiesScenario
	scenarios["bench"] = benchScenario
}

func needGPUs(t testing.TB, n int) {
	t.Helper()
	p := needGPU(t)
	if len(p.Devices) < n && !SharingGPUs() {
		t.Skipf("needs %d GPUs, this machine has %d (%s=1 runs it with ranks sharing GPUs)", n, len(p.Devices), ShareGPUsEnv)
	}
}

func checkRanks(t testing.TB, runs []rankRun) {
	t.Helper()
	for _, r := range runs {
		t.Logf("rank %d (exit %d):\n%s", r.rank, r.code, strings.TrimSpace(r.output))
		assert.Zero(t, r.code, "rank %d exited with %d", r.rank, r.code)
	}
}

func TestSymmetricAcrossProcesses2(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "symmetric"))
}

func TestSymmetricAcrossProcesses2PosixFDs(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "symmetric", "HIR_CUDA_FABRIC=0"))
}

func TestSymmetricAcrossProcesses4(t *testing.T) {
	needGPUs(t, 4)
	checkRanks(t, runRanks(t, 4, "symmetric"))
}

func TestPeerDiesDuringHandleExchange(t *testing.T) {
	needGPUs(t, 2)
	runs := runRanks(t, 2, "peer-dies", "HIR_CUDA_FABRIC=0")
	t.Logf("rank 0:\n%s\nrank 1:\n%s", runs[0].output, runs[1].output)
	assert.Equal(t, 3, runs[1].code, "rank 1's exit code: want the 3 it died with")
	assert.Zero(t, runs[0].code, "rank 0 exited with %d", runs[0].code)
}

// openFromEnv opens the backend the way hirrun does in each rank.
func openFromEnv() (*Runtime, *Device, error) {
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: 60 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	crt := rt.(*Runtime)
	return crt, crt.dev, nil
}

func leakCheck(d *Device, baseFD int) error {
	st := d.Stats()
	if st.Allocations != 0 || st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 || st.OpenFDs != 0 {
		return fmt.Errorf("leaked: %+v", st)
	}
	// More descriptors than before is a leak; fewer is not: a peer that
	// finished first closes its connection to this rank's socket.
	if n := openFDCount(); n > baseFD {
		return fmt.Errorf("%d descriptors open, %d before", n, baseFD)
	}
	return nil
}

func readI32(d *Device, t runtime.Tensor) ([]int32, error) {
	out := make([]byte, t.Bytes())
	if err := d.CopyToHost(out, t, nil); err != nil {
		return nil, err
	}
	if err := d.DefaultStream().Synchronize(); err != nil {
		return nil, err
	}
	return bytesI32(out), nil
}

func pattern(rank int, n int64) []int32 { return seqI32(int(n), int32(rank)*10_000_000) }

func compare(what string, got, want []int32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d = %d, want %d", what, i, got[i], want[i])
		}
	}
	return nil
}

// symmetricScenario: each rank fills its shard with its own pattern; every
// rank reads all shards through the contiguous view and through the peer
// buffers; each rank writes into the next rank's shard through the view
// and by a device copy through the peer mapping; each owner checks what
// landed in its shard. Twice (the second allocation must not mix with the
// first), then a too-large allocation fails on every rank, and nothing is
// left behind.
func symmetricScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	rank, world := d.Rank(), d.WorldSize()
	// The driver opens some device files on first use of a feature, so
	// the descriptor baseline is taken after the first round.
	var baseFD int
	var free0 uint64
	for round := 0; round < 2; round++ {
		if round == 1 {
			baseFD = openFDCount()
			free0, _, _ = d.MemInfo()
		}
		b, err := d.Alloc(3<<20+100, ir.Symmetric)
		if err != nil {
			return err
		}
		n := b.Size() / 4
		own := runtime.Tensor{Buf: b, DType: ir.I32, Shape: []int64{n}}
		if err := d.CopyFromHost(own, i32Bytes(pattern(rank, n)), nil); err != nil {
			return err
		}
		if err := d.Barrier(nil); err != nil {
			return err
		}
		view, err := d.ContiguousView(b)
		if err != nil {
			return err
		}
		if view.Size() != int64(world)*b.Size() {
			return fmt.Errorf("view of %d bytes for %d shards of %d", view.Size(), world, b.Size())
		}
		all, err := readI32(d, runtime.Tensor{Buf: view, DType: ir.I32, Shape: []int64{int64(world) * n}})
		if err != nil {
			return err
		}
		for r := 0; r < world; r++ {
			if err := compare(fmt.Sprintf("round %d: shard %d through the view", round, r), all[int64(r)*n:int64(r+1)*n], pattern(r, n)); err != nil {
				return err
			}
			pb, err := d.PeerBuffer(b, r)
			if err != nil {
				return err
			}
			// A strided read of the peer's memory (the copy kernel loads remotely).
			got, err := stridedRead(d, pb, 1024, 2)
			if err != nil {
				return err
			}
			want := make([]int32, 1024)
			for i := range want {
				want[i] = pattern(r, 2048)[2*i]
			}
			if err := compare(fmt.Sprintf("round %d: strided read of rank %d", round, r), got, want); err != nil {
				return err
			}
		}
		ptrs, err := d.PeerPointers(b)
		if err != nil || len(ptrs) != world || ptrs[rank] != b.(*gpu.Buffer).Ptr {
			return fmt.Errorf("peer-pointer table %x: %v", ptrs, err)
		}
		if err := d.Barrier(nil); err != nil {
			return err
		}
		// Write into the next rank's shard: a marker through the view,
		// and 1024 elements of our shard through the peer mapping.
		next := (rank + 1) % world
		marker := runtime.Tensor{Buf: view, Offset: (int64(next)*n + 16 + int64(rank)) * 4, DType: ir.I32, Shape: []int64{1}}
		if err := d.CopyFromHost(marker, i32Bytes([]int32{-int32(rank) - 1}), nil); err != nil {
			return err
		}
		pb, _ := d.PeerBuffer(b, next)
		slot := runtime.Tensor{Buf: pb, Offset: (n/2 + int64(rank)*1024) * 4, DType: ir.I32, Shape: []int64{1024}}
		// The source lies past the markers peers write at 16+rank.
		if err := d.Copy(slot, runtime.Tensor{Buf: b, Offset: 2048 * 4, DType: ir.I32, Shape: []int64{1024}}, nil); err != nil {
			return err
		}
		if err := d.Barrier(nil); err != nil {
			return err
		}
		prev := (rank + world - 1) % world
		want := pattern(rank, n)
		want[16+prev] = -int32(prev) - 1
		copy(want[n/2+int64(prev)*1024:], pattern(prev, 3072)[2048:])
		got, err := readI32(d, own)
		if err != nil {
			return err
		}
		if err := compare(fmt.Sprintf("round %d: own shard after rank %d's writes", round, prev), got, want); err != nil {
			return err
		}
		if err := d.Free(b); err != nil {
			return err
		}
	}
	fab, fds := d.ImportCounts()
	fmt.Printf("rank %d: peer shards imported: %d by fabric handle, %d by POSIX fd; granularity %d\n", rank, fab, fds, d.Granularity)
	if _, err := d.Alloc(1<<50, ir.Symmetric); err == nil || !strings.Contains(err.Error(), "does not fit") {
		return fmt.Errorf("too-large symmetric alloc: %v", err)
	} else {
		fmt.Printf("rank %d: too large: %v\n", rank, err)
	}
	if err := leakCheck(d, baseFD); err != nil {
		return err
	}
	free1, _, _ := d.MemInfo()
	if free1+(64<<20) < free0 {
		return fmt.Errorf("device memory not returned: %d free before, %d after", free0, free1)
	}
	fmt.Printf("rank %d: OK, nothing leaked (%+v)\n", rank, d.Stats())
	return nil
}

func stridedRead(d *Device, src runtime.Buffer, n, stride int64) ([]int32, error) {
	dst, err := d.Alloc(4*n, ir.Global)
	if err != nil {
		return nil, err
	}
	defer d.Free(dst)
	if err := d.Copy(runtime.Tensor{Buf: dst, DType: ir.I32, Shape: []int64{n}},
		runtime.Tensor{Buf: src, DType: ir.I32, Shape: []int64{n}, Strides: []int64{stride}}, nil); err != nil {
		return nil, err
	}
	return readI32(d, runtime.Tensor{Buf: dst, DType: ir.I32, Shape: []int64{n}})
}

func peerDiesScenario() error {
	_, d, err := openFromEnv()
	if err != nil {
		return err
	}
	if d.Rank() == 1 {
		gpu.TestHookAfterHandleExchange = func(uint64) { os.Exit(3) }
	}
	start := time.Now()
	_, err = d.Alloc(4<<20, ir.Symmetric)
	if err == nil {
		return fmt.Errorf("alloc succeeded with a dead peer")
	}
	if !strings.Contains(err.Error(), "did its process die") {
		return fmt.Errorf("unexpected error: %v", err)
	}
	st := d.Stats()
	if st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 || st.OpenFDs != 0 || st.Allocations != 0 {
		return fmt.Errorf("leaked after the failed exchange: %+v", st)
	}
	fmt.Printf("rank 0: failed after %v as it should: %v\n", time.Since(start).Round(time.Millisecond), err)
	return nil
}

func benchScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	rank, world := d.Rank(), d.WorldSize()
	report := func(name string, v float64, unit string) {
		if rank == 0 || strings.Contains(name, fmt.Sprintf("rank%d", rank)) {
			fmt.Printf("METRIC %s %.3f %s\n", name, v, unit)
		}
	}
	// Contiguous view: first creation, and the cached lookup.
	var firsts []time.Duration
	var cached time.Duration
	const lookups = 100000
	for i := 0; i < 20; i++ {
		b, err := d.Alloc(64<<20, ir.Symmetric)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := d.ContiguousView(b); err != nil {
			return err
		}
		firsts = append(firsts, time.Since(t0))
		t1 := time.Now()
		for j := 0; j < lookups; j++ {
			d.ContiguousView(b)
		}
		cached += time.Since(t1)
		if err := d.Free(b); err != nil {
			return err
		}
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	report(fmt.Sprintf("view_first_create_64MiBx%d_median", world), float64(firsts[len(firsts)/2].Microseconds()), "us")
	report("view_cached_lookup", float64(cached.Nanoseconds())/(20*lookups), "ns")

	// Copy bandwidth through the symmetric mapping, 1 GiB.
	const size = 1 << 30
	b, err := d.Alloc(size, ir.Symmetric)
	if err != nil {
		return err
	}
	defer d.Free(b)
	n := b.Size() / 4
	whole := func(buf runtime.Buffer) runtime.Tensor {
		return runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{n}}
	}
	timeCopies := func(dst, src runtime.Tensor) (float64, error) {
		s := d.DefaultStream()
		for i := 0; i < 2; i++ {
			if err := d.Copy(dst, src, s); err != nil {
				return 0, err
			}
		}
		e0, _ := d.NewEvent()
		e1, _ := d.NewEvent()
		defer e0.Close()
		defer e1.Close()
		const iters = 10
		s.Record(e0)
		for i := 0; i < iters; i++ {
			if err := d.Copy(dst, src, s); err != nil {
				return 0, err
			}
		}
		s.Record(e1)
		if err := e1.Synchronize(); err != nil {
			return 0, err
		}
		ms, err := gpu.ElapsedMillis(e0, e1)
		return float64(iters) * float64(dst.Bytes()) / (float64(ms) / 1e3) / 1e9, err
	}
	scratch, err := d.Alloc(b.Size(), ir.Global)
	if err != nil {
		return err
	}
	defer d.Free(scratch)
	local, err := timeCopies(whole(scratch), whole(b))
	if err != nil {
		return err
	}
	report(fmt.Sprintf("copy_local_d2d_1GiB_rank%d", rank), local, "GB/s")
	for turn := 0; turn < world; turn++ {
		if err := d.Barrier(nil); err != nil {
			return err
		}
		if turn != rank {
			continue
		}
		peer := (rank + 1) % world
		pb, _ := d.PeerBuffer(b, peer)
		push, err := timeCopies(whole(pb), whole(b))
		if err != nil {
			return err
		}
		pull, err := timeCopies(whole(b), whole(pb))
		if err != nil {
			return err
		}
		report(fmt.Sprintf("copy_push_%dto%d_1GiB_rank%d", rank, peer, rank), push, "GB/s")
		report(fmt.Sprintf("copy_pull_%dto%d_1GiB_rank%d", peer, rank, rank), pull, "GB/s")
	}
	if err := d.Barrier(nil); err != nil {
		return err
	}
	// Both directions at once: every rank pushes to the next.
	pb, _ := d.PeerBuffer(b, (rank+1)%world)
	both, err := timeCopies(whole(pb), whole(b))
	if err != nil {
		return err
	}
	report(fmt.Sprintf("copy_push_concurrent_1GiB_rank%d", rank), both, "GB/s")
	return d.Barrier(nil)
}

func BenchmarkSymmetricAcrossProcesses(b *testing.B) {
	needGPUs(b, 2)
	runs := runRanks(b, 2, "bench")
	for _, r := range runs {
		if r.code != 0 {
			b.Fatalf("rank %d exited with %d:\n%s", r.rank, r.code, r.output)
		}
	}
	m := metrics(runs)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, unit, _ := strings.Cut(k, " (")
		b.ReportMetric(m[k], strings.TrimSuffix(unit, ")")+"_"+name)
	}
}
