package cuda

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/transfer"
)

// The transfer benchmark across processes (transferBenchScenario).

// transferBenchScenario: rank 0 times READ and WRITE transfers from/to rank
// 1 (4 KiB .. 1 GiB) next to a plain cuMemcpyAsync through the same peer
// mapping, on one stream with CUDA events; then the latency of a small
// transfer, post to completion, measured on the host.
func transferBenchScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	rank, world := d.Rank(), d.WorldSize()
	peer := (rank + 1) % world
	a, err := transfer.New(d)
	if err != nil {
		return err
	}
	defer a.Close()
	const maxBytes = 1 << 30
	buf, err := d.Alloc(maxBytes, ir.Symmetric)
	if err != nil {
		return err
	}
	defer d.Free(buf)
	lbuf, err := d.Alloc(maxBytes, ir.Global)
	if err != nil {
		return err
	}
	defer d.Free(lbuf)
	reg, err := a.Register(xferI32s(buf, 0, maxBytes/4))
	if err != nil {
		return err
	}
	defer reg.Deregister()
	if rank != 0 {
		return reg.Quiesce() // rank 0 measures alone, then meets us here
	}
	defer reg.Quiesce()
	pb, err := d.PeerBuffer(buf, peer)
	if err != nil {
		return err
	}
	s := d.DefaultStream()
	timer, err := newPostTimer(d, s)
	if err != nil {
		return err
	}
	defer timer.close()
	// gbps times iters back-to-back calls of post on s.
	gbps := func(bytes int64, iters int, post func() error) (float64, error) {
		us, err := timer.perPost(3, iters, false, post)
		return float64(bytes) / us / 1e3, err
	}
	metric := func(name string, v float64, unit string) { fmt.Printf("METRIC %s %.3f %s\n", name, v, unit) }
	var table strings.Builder
	if os.Getenv("HIR_XFER_GPU_ONLY") == "1" { // the GPU times alone (seconds, not minutes)
		if err := xferGPUTimes(d, timer, lbuf, buf, reg, peer, &table, metric); err != nil {
			return err
		}
		fmt.Print(table.String())
		return nil
	}
	fmt.Fprintf(&table, "\none-sided transfers, rank %d <-> rank %d, GB/s (one stream, CUDA events)\n\n", rank, peer)
	fmt.Fprintf(&table, "| size | plain pull | READ | READ/plain | plain push | WRITE | WRITE/plain |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for size := int64(4 << 10); size <= maxBytes; size *= 4 {
		n := size / 4
		iters := int(max(10, min(2000, (8<<30)/size)))
		local, far := xferI32s(lbuf, 0, n), runtime.Tensor{Buf: pb, DType: ir.I32, Shape: []int64{n}}
		rd, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, peer, []transfer.Desc{{Count: n}})
		if err != nil {
			return err
		}
		wr, err := reg.Prepare(transfer.Write, []runtime.Tensor{local}, peer, []transfer.Desc{{Count: n}})
		if err != nil {
			return err
		}
		pull, err := gbps(size, iters, func() error { return d.Copy(local, far, s) })
		if err != nil {
			return err
		}
		read, err := gbps(size, iters, func() error { return rd.Post(s) })
		if err != nil {
			return err
		}
		push, err := gbps(size, iters, func() error { return d.Copy(far, local, s) })
		if err != nil {
			return err
		}
		write, err := gbps(size, iters, func() error { return wr.Post(s) })
		if err != nil {
			return err
		}
		label := xferSizeLabel(size)
		metric("plain_pull_"+label, pull, "GB/s")
		metric("xfer_read_"+label, read, "GB/s")
		metric("plain_push_"+label, push, "GB/s")
		metric("xfer_write_"+label, write, "GB/s")
		fmt.Fprintf(&table, "| %s | %.1f | %.1f | %.1f%% | %.1f | %.1f | %.1f%% |\n", label, pull, read, 100*read/pull, push, write, 100*write/push)
		if size >= 256<<20 {
			metric("xfer_read_vs_plain_"+label, 100*read/pull, "pct")
			metric("xfer_write_vs_plain_"+label, 100*write/push, "pct")
		}
	}

	// Latency of a small transfer, post to completion, on the host.
	fmt.Fprintf(&table, "\nsmall-transfer latency, post to completion, median of 2000 (host clock)\n\n| size | READ, Wait (sleeps) | READ, poll Status | WRITE, Wait | WRITE, poll Status | plain copy + stream sync |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, size := range []int64{8, 4 << 10} {
		n := size / 4
		local, far := xferI32s(lbuf, 0, n), runtime.Tensor{Buf: pb, DType: ir.I32, Shape: []int64{n}}
		rd, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, peer, []transfer.Desc{{Count: n}})
		if err != nil {
			return err
		}
		wr, err := reg.Prepare(transfer.Write, []runtime.Tensor{local}, peer, []transfer.Desc{{Count: n}})
		if err != nil {
			return err
		}
		waitLat := func(h *transfer.Handle) (time.Duration, error) {
			return xferMedian(2000, func() error {
				if err := h.Post(s); err != nil {
					return err
				}
				return h.Wait()
			})
		}
		pollLat := func(h *transfer.Handle) (time.Duration, error) {
			return xferMedian(2000, func() error {
				if err := h.Post(s); err != nil {
					return err
				}
				for {
					st, err := h.Status()
					if err != nil {
						return err
					}
					if st == transfer.Done {
						return nil
					}
				}
			})
		}
		rw, err := waitLat(rd)
		if err != nil {
			return err
		}
		rp, err := pollLat(rd)
		if err != nil {
			return err
		}
		ww, err := waitLat(wr)
		if err != nil {
			return err
		}
		wp, err := pollLat(wr)
		if err != nil {
			return err
		}
		plain, err := xferMedian(2000, func() error {
			if err := d.Copy(local, far, s); err != nil {
				return err
			}
			return s.Synchronize()
		})
		if err != nil {
			return err
		}
		label := xferSizeLabel(size)
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		metric("xfer_read_latency_wait_"+label, us(rw), "us")
		metric("xfer_read_latency_poll_"+label, us(rp), "us")
		metric("xfer_write_latency_wait_"+label, us(ww), "us")
		metric("xfer_write_latency_poll_"+label, us(wp), "us")
		metric("plain_copy_sync_latency_"+label, us(plain), "us")
		fmt.Fprintf(&table, "| %s | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %.1f µs |\n", label, us(rw), us(rp), us(ww), us(wp), us(plain))
	}
	if err := xferGPUTimes(d, timer, lbuf, buf, reg, peer, &table, metric); err != nil {
		return err
	}
	fmt.Print(table.String())
	if out := os.Getenv("OUT"); out != "" {
		os.WriteFile(filepath.Join(out, "transfer-bench.md"), []byte(table.String()), 0o644)
	}
	return nil
}

// xferGPUTimes is the GPU time of one transfer, without the host's: 200
// posts queued behind a spin kernel (so the host cannot starve the GPU),
// timed with events, per post; through the copy engines and as a copy
// kernel (Tuning.TransferSMMax), READ and WRITE, 8 B .. 16 MiB: where the
// copy kernel stops paying is the crossover. Beside each, the bare copy
// (runtime.PeerCopy, without the handle's completion event), and the
// floors: an empty kernel, and the record of a host-wait event alone.
func xferGPUTimes(d *Device, timer *postTimer, lbuf, buf runtime.Buffer, reg *transfer.Registration, peer int, table *strings.Builder, metric func(string, float64, string)) error {
	s := timer.s
	saved := d.Tune.TransferSMMax
	defer func() { d.Tune.TransferSMMax = saved }()
	const posts = 200
	// warm: the copy kernel loads on first use
	queued := func(post func() error) (float64, error) { return timer.perPost(10, posts, true, post) }
	empty, err := queued(func() error { return timer.spinFor(0) })
	if err != nil {
		return err
	}
	hostEv, err := d.NewHostWaitEvent()
	if err != nil {
		return err
	}
	defer hostEv.Close()
	record, err := queued(func() error { return s.Record(hostEv) })
	if err != nil {
		return err
	}
	metric("gpu_time_empty_kernel", empty, "us")
	metric("gpu_time_host_wait_event_record", record, "us")
	fmt.Fprintf(table, "\nGPU time of one transfer: %d posts queued behind a spin kernel, per post (CUDA events); an empty kernel takes %.2f µs so, recording a host-wait event %.2f µs\n\n| size | op | handle, copy engine | handle, copy kernel | bare copy, copy engine | bare copy, copy kernel |\n| --- | --- | --- | --- | --- | --- |\n", posts, empty, record)
	// up to 16 MiB: the copy kernel won at every size to 1 MiB with
	// programmatic dependent launch, so the crossover lies above it
	for _, size := range []int64{8, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20} {
		n := size / 4
		local := xferI32s(lbuf, 0, n)
		for _, kind := range []transfer.Op{transfer.Read, transfer.Write} {
			fmt.Fprintf(table, "| %s | %s |", xferSizeLabel(size), kind)
			h, err := reg.Prepare(kind, []runtime.Tensor{local}, peer, []transfer.Desc{{Count: n}})
			if err != nil {
				return err
			}
			bare, err := d.PreparePeerCopy(local, xferI32s(buf, 0, n), peer, kind == transfer.Write)
			if err != nil {
				return err
			}
			for _, post := range []struct {
				what string
				f    func(runtime.Stream) error
			}{{"handle", h.Post}, {"bare", bare.Post}} {
				for _, smMax := range []int64{0, 1 << 30} {
					d.Tune.TransferSMMax = smMax
					per, err := queued(func() error { return post.f(s) })
					if err != nil {
						return err
					}
					how := "ce"
					if smMax > 0 {
						how = "sm"
					}
					metric(fmt.Sprintf("xfer_%s_gpu_time_%s_%s_%s", strings.ToLower(kind.String()), post.what, how, xferSizeLabel(size)), per, "us")
					fmt.Fprintf(table, " %.2f µs |", per)
				}
			}
			fmt.Fprintln(table)
		}
	}
	return nil
}

// postTimer times back-to-back posts on one stream between two events;
// queued behind a spin kernel, the posts wait until the host has made them
// all, so the figure is the GPU's time per post, not the host's rate.
type postTimer struct {
	d      *Device
	s      runtime.Stream
	e0, e1 runtime.Event
	spin   *gpu.Function
}

func newPostTimer(d *Device, s runtime.Stream) (*postTimer, error) {
	spin, err := spinKernel(d)
	if err != nil {
		return nil, err
	}
	t := &postTimer{d: d, s: s, spin: spin}
	if t.e0, err = d.NewEvent(); err != nil {
		return nil, err
	}
	if t.e1, err = d.NewEvent(); err != nil {
		t.e0.Close()
		return nil, err
	}
	return t, nil
}

func (t *postTimer) close() { t.e0.Close(); t.e1.Close() }

// spinFor launches the spin kernel for ns nanoseconds on the stream.
func (t *postTimer) spinFor(ns uint64) error {
	return t.d.LaunchFunction(t.spin, gpu.Dim3{X: 1}, gpu.Dim3{X: 1}, 0, t.s, ns)
}

// perPost is µs per post over n posts after warm ones, behind a 20 ms
// spin where queued.
func (t *postTimer) perPost(warm, n int, queued bool, post func() error) (float64, error) {
	for range warm {
		if err := post(); err != nil {
			return 0, err
		}
	}
	if queued {
		if err := t.spinFor(20e6); err != nil {
			return 0, err
		}
	}
	if err := t.s.Record(t.e0); err != nil {
		return 0, err
	}
	for range n {
		if err := post(); err != nil {
			return 0, err
		}
	}
	if err := t.s.Record(t.e1); err != nil {
		return 0, err
	}
	if err := t.e1.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := gpu.ElapsedMillis(t.e0, t.e1)
	return float64(ms) * 1e3 / float64(n), err
}

func xferSizeLabel(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// medianOf runs f n times after 100 warm-ups and returns the median time.
func xferMedian(n int, f func() error) (time.Duration, error) {
	for range 100 {
		if err := f(); err != nil {
			return 0, err
		}
	}
	ts := make([]time.Duration, n)
	for i := range ts {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ts[i] = time.Since(t0)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[n/2], nil
}

func BenchmarkTransferAcrossProcesses(b *testing.B) {
	needGPUs(b, 2)
	runs := runRanks(b, 2, "transfer-bench")
	for _, r := range runs {
		if r.code != 0 {
			b.Fatalf("rank %d exited with %d:\n%s", r.rank, r.code, r.output)
		}
	}
	// The table rank 0 printed, on stdout: a benchmark's b.Log keeps only
	// its first 10 lines (the seventh session's GPU-time table stopped
	// after the 64 KiB READ row so).
	var table []string
	for _, line := range strings.Split(runs[0].output, "\n") {
		if !strings.HasPrefix(line, "METRIC ") {
			table = append(table, line)
		}
	}
	fmt.Println(strings.Join(table, "\n"))
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
