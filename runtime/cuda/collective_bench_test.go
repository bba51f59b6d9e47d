package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// BenchmarkCollectives times our kernels and NCCL side by side on 2 GPUs
// (and 4 where there are 4): latency per call from 8 KiB to 1 MiB and bus
// bandwidth from 16 MiB to 1 GiB, bf16, for all_reduce, all_gather,
// reduce_scatter and all_to_all. Sizes follow nccl-tests: the all_reduce
// buffer, all_gather's output, reduce_scatter's input, all_to_all's
// buffer. Bus bandwidth is nccl-tests': size/time × 2(D−1)/D for
// all_reduce, × (D−1)/D for the others. Each figure is the slowest rank's
// mean over back-to-back calls timed with CUDA events after a barrier.
// It prints one table and reports the goal figures as metrics.

func init() { scenarios["coll-bench"] = collBenchScenario }

type benchRow struct {
	op   ir.Opcode
	algo ir.Algo
}

var benchRows = []benchRow{
	{ir.OpAllReduce, ir.AlgoOneShot}, {ir.OpAllReduce, ir.AlgoTwoShot}, {ir.OpAllReduce, ir.AlgoRing}, {ir.OpAllReduce, ir.AlgoNCCL},
	{ir.OpAllGather, ir.AlgoOneShot}, {ir.OpAllGather, ir.AlgoCopyEngine}, {ir.OpAllGather, ir.AlgoRing}, {ir.OpAllGather, ir.AlgoNCCL},
	{ir.OpReduceScatter, ir.AlgoOneShot}, {ir.OpReduceScatter, ir.AlgoRing}, {ir.OpReduceScatter, ir.AlgoNCCL},
	{ir.OpAllToAll, ir.AlgoOneShot}, {ir.OpAllToAll, ir.AlgoNCCL},
}

// ringSweep are ring geometries BenchmarkCollectives also times the ring
// with, in the same processes (HIR_COLL_RING_SWEEP=blocks:seg:slots[:w],...,
// :w for the wave order; each gets fresh comm state, so its own staging),
// as algo ring@<blocks>x<seg>x<slots>[w].
var ringSweep []coll.RingGeom

func init() {
	// HIR_COLL_BENCH_ALGOS=a,b,... keeps only those rows.
	if v := os.Getenv("HIR_COLL_BENCH_ALGOS"); v != "" {
		keep := map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			keep[strings.TrimSpace(f)] = true
		}
		var rows []benchRow
		for _, r := range benchRows {
			if keep[r.algo.String()] {
				rows = append(rows, r)
			}
		}
		benchRows = rows
	}
	for _, f := range strings.Split(os.Getenv("HIR_COLL_RING_SWEEP"), ",") {
		var g coll.RingGeom
		f = strings.TrimSpace(f)
		if w, ok := strings.CutSuffix(f, ":w"); ok {
			f, g.Wave = w, true
		}
		if _, err := fmt.Sscanf(f, "%d:%d:%d", &g.Blocks, &g.Seg, &g.Slots); err == nil && g.Blocks > 0 && g.Seg >= 16 && g.Seg%16 == 0 && g.Slots >= 2 {
			ringSweep = append(ringSweep, g)
		}
	}
}

var benchSizes = []int64{8 << 10, 64 << 10, 256 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30}

func init() {
	// HIR_COLL_BENCH_SIZES=bytes,bytes,... measures only those sizes (sweeps
	// of HIR_COLL_BLOCKS and the like, in little device time).
	if v := os.Getenv("HIR_COLL_BENCH_SIZES"); v != "" {
		var sizes []int64
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil && n > 0 {
				sizes = append(sizes, n)
			}
		}
		if len(sizes) > 0 {
			benchSizes = sizes
		}
	}
}

func benchIters(size int64) int {
	switch {
	case size <= 1<<20:
		return 1000 // small calls are host-bound: average over many
	case size <= 16<<20:
		return 50
	case size <= 256<<20:
		return 20
	}
	return 10
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func collBenchScenario() error {
	rt, d, err := openColl(60 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	D, rank := d.WorldSize(), d.Rank()
	_, ncclErr := coll.NCCLVersion()
	s := d.DefaultStream()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer e0.Close()
	defer e1.Close()
	for _, size := range benchSizes {
		// One pair of buffers per size, reused by every row.
		elems := size / 2
		inB, err := d.Alloc(size, ir.Symmetric)
		if err != nil {
			return err
		}
		outB, err := d.Alloc(size, ir.Symmetric)
		if err != nil {
			return err
		}
		measure := func(row benchRow, label string) error {
			// The shapes hirrun bench gives each collective (ir's
			// Layout.BenchShapes, through BenchCall).
			call, ok := autotable.BenchCall(row.op, ir.BF16, elems, D, inB, outB)
			if !ok {
				return fmt.Errorf("%s: no benchmark call at %s", row.op, sizeName(size))
			}
			call.Algo = row.algo
			iters := benchIters(size)
			for w := 0; w < 20; w++ {
				if err := d.Collective(&call, s); err != nil {
					return fmt.Errorf("%s algo=%s %s: %w", row.op, label, sizeName(size), err)
				}
			}
			if err := d.Barrier(s); err != nil {
				return err
			}
			s.Record(e0)
			t0 := time.Now()
			for i := 0; i < iters; i++ {
				if err := d.Collective(&call, s); err != nil {
					return err
				}
			}
			host := time.Since(t0)
			s.Record(e1)
			if err := e1.Synchronize(); err != nil {
				return err
			}
			ms, err := gpu.ElapsedMillis(e0, e1)
			if err != nil {
				return err
			}
			fmt.Printf("COLLBENCH %s %s %d %d %.3f\n", row.op, label, size, rank, float64(ms)*1e3/float64(iters))
			// Host time to issue one call: when it exceeds the GPU's time
			// per call, the figure above measures the host.
			fmt.Printf("COLLHOST %s %s %d %d %.3f\n", row.op, label, size, rank, float64(host.Microseconds())/float64(iters))
			return nil
		}
		for _, row := range benchRows {
			if row.algo == ir.AlgoNCCL && ncclErr != nil {
				continue
			}
			if err := measure(row, row.algo.String()); err != nil {
				return err
			}
		}
		for _, g := range ringSweep {
			// Fresh comm state: the ring staging is made for g.
			if err := d.ReleaseComm(); err != nil {
				return err
			}
			saved := d.Tune.Ring()
			d.Tune.SetRing(g)
			for _, op := range []ir.Opcode{ir.OpAllReduce, ir.OpReduceScatter} {
				if err := measure(benchRow{op, ir.AlgoRing}, "ring@"+g.String()); err != nil {
					d.Tune.SetRing(saved)
					return err
				}
			}
			d.Tune.SetRing(saved)
			if err := d.ReleaseComm(); err != nil {
				return err
			}
		}
		if err := d.Free(outB); err != nil {
			return err
		}
		if err := d.Free(inB); err != nil {
			return err
		}
	}
	return d.ReleaseComm()
}

type benchKey struct {
	op, algo string
	size     int64
}

// collBenchTable turns the ranks' COLLBENCH lines into the table (slowest
// rank per figure) and the goal metrics.
func collBenchTable(runs []rankRun, D int) (string, map[string]float64) {
	us := map[benchKey]float64{}
	hostUS := map[benchKey]float64{}
	for _, r := range runs {
		for _, line := range strings.Split(r.output, "\n") {
			f := strings.Fields(line)
			if len(f) != 6 || f[0] != "COLLBENCH" && f[0] != "COLLHOST" {
				continue
			}
			size, _ := strconv.ParseInt(f[3], 10, 64)
			v, _ := strconv.ParseFloat(f[5], 64)
			k := benchKey{f[1], f[2], size}
			if f[0] == "COLLHOST" {
				hostUS[k] = max(hostUS[k], v)
				continue
			}
			us[k] = max(us[k], v)
		}
	}
	busbw := func(k benchKey, t float64) float64 {
		factor := float64(D-1) / float64(D)
		if k.op == "all_reduce" {
			factor *= 2
		}
		return float64(k.size) / (t * 1e-6) * factor / 1e9
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\ncollectives on %d GPUs, bf16 (sizes as nccl-tests: µs per call up to 1 MiB, bus bandwidth in GB/s from 16 MiB)\n", D)
	fmt.Fprintf(&b, "| collective | size |")
	algos := benchRows
	for _, op := range []string{"all_reduce", "all_gather", "reduce_scatter", "all_to_all"} {
		var cols []string
		have := map[string]bool{}
		for _, row := range algos {
			if row.op.String() == op {
				cols = append(cols, row.algo.String())
				have[row.algo.String()] = true
			}
		}
		// Columns measured but not in benchRows (the ring sweep), in order.
		var extra []string
		for k := range us {
			if k.op == op && !have[k.algo] {
				have[k.algo] = true
				extra = append(extra, k.algo)
			}
		}
		sort.Strings(extra)
		cols = append(cols, extra...)
		if len(cols) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n| %s | size | %s |\n|---|---|%s\n", op, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, size := range benchSizes {
			fmt.Fprintf(&b, "| %s | %s |", op, sizeName(size))
			for _, a := range cols {
				k := benchKey{op, a, size}
				t, ok := us[k]
				switch {
				case !ok:
					fmt.Fprintf(&b, " - |")
				case size <= 1<<20:
					host := ""
					if h, ok := hostUS[k]; ok {
						host = fmt.Sprintf(" (host %.1f)", h) // host time to issue a call
					}
					fmt.Fprintf(&b, " %.1f µs%s |", t, host)
				default:
					fmt.Fprintf(&b, " %.0f GB/s (%.0f µs) |", busbw(k, t), t)
				}
			}
			b.WriteString("\n")
		}
	}
	m := map[string]float64{}
	best := func(op string, size int64, algos ...string) (float64, string) {
		bt, ba := 0.0, ""
		for _, a := range algos {
			if t, ok := us[benchKey{op, a, size}]; ok && (ba == "" || t < bt) {
				bt, ba = t, a
			}
		}
		return bt, ba
	}
	if t, a := best("all_reduce", 8<<10, "one_shot", "two_shot"); a != "" {
		m[fmt.Sprintf("us_x%d_allreduce_8KiB_ours_%s", D, a)] = t
	}
	if t, ok := us[benchKey{"all_reduce", "nccl", 8 << 10}]; ok {
		m[fmt.Sprintf("us_x%d_allreduce_8KiB_nccl", D)] = t
	}
	for _, g := range []struct {
		op    string
		ours  []string
		short string
	}{
		{"all_reduce", []string{"one_shot", "two_shot"}, "allreduce"},
		{"all_gather", []string{"one_shot", "copy_engine"}, "allgather"},
		{"reduce_scatter", []string{"one_shot"}, "reducescatter"},
		{"all_to_all", []string{"one_shot"}, "alltoall"},
	} {
		if t, a := best(g.op, 1<<30, g.ours...); a != "" {
			m[fmt.Sprintf("GB/s_x%d_%s_1GiB_ours_%s", D, g.short, a)] = busbw(benchKey{g.op, a, 1 << 30}, t)
		}
		if t, ok := us[benchKey{g.op, "nccl", 1 << 30}]; ok {
			m[fmt.Sprintf("GB/s_x%d_%s_1GiB_nccl", D, g.short)] = busbw(benchKey{g.op, "nccl", 1 << 30}, t)
		}
		if t, ok := us[benchKey{g.op, "ring", 1 << 30}]; ok {
			m[fmt.Sprintf("GB/s_x%d_%s_1GiB_ring", D, g.short)] = busbw(benchKey{g.op, "ring", 1 << 30}, t)
		}
	}
	return b.String(), m
}

func BenchmarkCollectives(b *testing.B) {
	needCollGPUs(b, 2)
	worlds := []int{2}
	if len(gpu.Probe().Devices) >= 4 {
		worlds = append(worlds, 4)
	}
	for _, D := range worlds {
		runs := runRanks(b, D, "coll-bench")
		for _, r := range runs {
			if r.code != 0 {
				b.Fatalf("rank %d exited with %d:\n%s", r.rank, r.code, r.output)
			}
		}
		table, m := collBenchTable(runs, D)
		fmt.Fprint(os.Stdout, table)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.ReportMetric(m[k], k)
		}
	}
}

func TestCollBenchTableFormat(t *testing.T) {
	runs := []rankRun{{rank: 0, output: "COLLBENCH all_reduce two_shot 8192 0 9.5\nCOLLBENCH all_reduce two_shot 1073741824 0 6000\n"},
		{rank: 1, output: "COLLBENCH all_reduce two_shot 8192 1 10.5\nCOLLBENCH all_reduce nccl 1073741824 1 7000\n"}}
	table, m := collBenchTable(runs, 2)
	assert.Contains(t, table, "| all_reduce | 8KiB | - | 10.5 µs | - | - |", "table")
	assert.Equal(t, 10.5, m["us_x2_allreduce_8KiB_ours_two_shot"], "metrics %v", m)
	// 1 GiB in 6000 µs: 178.96 GB/s algorithm bandwidth, ×2×1/2 for D=2.
	v := m["GB/s_x2_allreduce_1GiB_ours_two_shot"]
	assert.GreaterOrEqual(t, v, 178.0, "busbw")
	assert.LessOrEqual(t, v, 180.0, "busbw")
}

// TestCollectiveLatency (HIR_COLL_LATENCY=1, on the GPU machine) separates
// the host's share of a small collective from the GPU's: for each call it
// times the host issuing 1000 calls back to back, and the GPU running
// 1000 calls queued behind a 20 ms spin kernel (so the host cannot starve
// it). With HIR_COLL_PPROF=dir, rank 0 also writes a CPU profile of the
// host issuing 20000 8 KiB all_reduce one_shot calls to dir/host.pprof.
func TestCollectiveLatency(t *testing.T) {
	if os.Getenv("HIR_COLL_LATENCY") != "1" {
		t.Skip("HIR_COLL_LATENCY=1 runs it")
	}
	needCollGPUs(t, 2)
	runs := runRanks(t, 2, "coll-latency")
	for _, r := range runs {
		t.Logf("rank %d (exit %d):\n%s", r.rank, r.code, r.output)
		assert.Zero(t, r.code, "rank %d exited with %d", r.rank, r.code)
	}
}

func init() { scenarios["coll-latency"] = collLatencyScenario }

const spinSource = `
extern "C" __global__ void hir_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
`

// spinKernel is hir_spin, which spins on the GPU for its argument's
// nanoseconds: work queued behind it waits until the host has made it all.
func spinKernel(d *Device) (*gpu.Function, error) {
	sm, err := d.LoadCached(spinSource, "hir_spin.cu", coll.NVRTCOptions)
	if err != nil {
		return nil, err
	}
	return sm.Function("hir_spin")
}

func collLatencyScenario() error {
	rt, d, err := openColl(60 * time.Second)
	if err != nil {
		return err
	}
	defer rt.Close()
	rank := d.Rank()
	s := d.DefaultStream()
	spin, err := spinKernel(d)
	if err != nil {
		return err
	}
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer e0.Close()
	defer e1.Close()
	const maxBytes = 1 << 20
	inB, err := d.Alloc(maxBytes, ir.Symmetric)
	if err != nil {
		return err
	}
	outB, err := d.Alloc(maxBytes, ir.Symmetric)
	if err != nil {
		return err
	}
	const n = 1000
	for _, c := range []struct {
		op    ir.Opcode
		algo  ir.Algo
		bytes int64
	}{
		{ir.OpAllReduce, ir.AlgoOneShot, 8 << 10}, {ir.OpAllReduce, ir.AlgoTwoShot, 8 << 10}, {ir.OpAllReduce, ir.AlgoNCCL, 8 << 10},
		{ir.OpAllReduce, ir.AlgoOneShot, 64 << 10}, {ir.OpAllReduce, ir.AlgoTwoShot, 64 << 10},
		{ir.OpAllReduce, ir.AlgoOneShot, 256 << 10}, {ir.OpAllReduce, ir.AlgoTwoShot, 256 << 10}, {ir.OpAllReduce, ir.AlgoNCCL, 256 << 10},
		{ir.OpAllReduce, ir.AlgoOneShot, 1 << 20}, {ir.OpAllReduce, ir.AlgoTwoShot, 1 << 20},
		{ir.OpAllGather, ir.AlgoOneShot, 8 << 10}, {ir.OpReduceScatter, ir.AlgoOneShot, 8 << 10}, {ir.OpAllToAll, ir.AlgoOneShot, 8 << 10},
	} {
		call, _ := autotable.BenchCall(c.op, ir.BF16, c.bytes/2, 2, inB, outB)
		call.Algo = c.algo
		for i := 0; i < 200; i++ {
			if err := d.Collective(&call, s); err != nil {
				return err
			}
		}
		if err := d.Barrier(s); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := d.Collective(&call, s); err != nil {
				return err
			}
		}
		host := time.Since(t0)
		if err := d.Barrier(s); err != nil {
			return err
		}
		// GPU time: the calls queued behind a spin, after a device barrier.
		if err := d.StreamBarrier(s); err != nil {
			return err
		}
		if err := d.LaunchFunction(spin, gpu.Dim3{X: 1}, gpu.Dim3{X: 1}, 0, s, uint64(20e6)); err != nil {
			return err
		}
		s.Record(e0)
		for i := 0; i < n; i++ {
			if err := d.Collective(&call, s); err != nil {
				return err
			}
		}
		s.Record(e1)
		if err := e1.Synchronize(); err != nil {
			return err
		}
		ms, _ := gpu.ElapsedMillis(e0, e1)
		fmt.Printf("LATENCY %s %s %d host %.2f gpu %.2f µs/call\n", c.op, c.algo, c.bytes, float64(host.Nanoseconds())/1e3/n, float64(ms)*1e3/n)
	}
	if dir := os.Getenv("HIR_COLL_PPROF"); dir != "" {
		call, _ := autotable.BenchCall(ir.OpAllReduce, ir.BF16, 4096, 2, inB, outB)
		call.Algo = ir.AlgoOneShot
		var f *os.File
		if rank == 0 {
			if f, err = os.Create(filepath.Join(dir, "host.pprof")); err != nil {
				return err
			}
			defer f.Close()
			pprof.StartCPUProfile(f)
		}
		t0 := time.Now()
		for i := 0; i < 20000; i++ {
			if err := d.Collective(&call, s); err != nil {
				return err
			}
		}
		host := time.Since(t0)
		if rank == 0 {
			pprof.StopCPUProfile()
		}
		fmt.Printf("PPROF rank %d: 20000 calls, host %.2f µs/call\n", rank, float64(host.Nanoseconds())/1e3/20000)
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	d.Free(inB)
	d.Free(outB)
	return d.ReleaseComm()
}
