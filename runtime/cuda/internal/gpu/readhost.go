package gpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime"
)

// Reading outputs back (runtime.HostReader): a copy from the device into
// pageable memory goes through the driver's own staging and ran at about
// 3 GB/s for a 128 KiB output on an H100 (the TP block's Run: ~45 µs of
// fixed cost against a bare graph replay's ~10). ReadToHost copies every
// contiguous tensor into one pinned buffer of the device's (DMA at full
// speed), synchronises once, then copies into the callers' slices.

var _ runtime.HostReader = (*Device)(nil)

// maxReadBounce bounds the pinned buffer: larger reads go the pageable
// way, where the copy, not its setup, is the cost.
const maxReadBounce = 256 << 20

// MaxDirectRead: a strided tensor (a view: select, slice) of up to this
// many bytes is packed by the copy kernel straight into the (device-
// mapped) pinned buffer: one launch, no staging buffer, no copy-engine
// start. On an H200 (BenchmarkRunCost, docs/bench/h200-run-cost.txt) a
// 4096-element bf16 column took 12.1 µs so (median of 50), 19.1 staged
// and copied by cuMemcpyDtoHAsync. A contiguous tensor keeps the copy
// engine at every size: 8 KiB 9.6 µs against the kernel's 12.3, 64 KiB
// 14.8 against 17.3. A variable for BenchmarkRunCost's comparison.
var MaxDirectRead = 64 << 10

// readBounce is the device's pinned buffer for ReadToHost, mapped into
// the device's address space at dev.
type readBounce struct {
	mu   sync.Mutex
	host unsafe.Pointer
	dev  uint64
	size int
}

// ReadToHost copies each srcs[i] into dsts[i] after the work enqueued on
// rs, and returns once all are there (rs synchronised). A strided tensor
// (a view: select, slice) is packed on the device first and read through
// the pinned buffer too: read the pageable way, a strided 8 KiB output
// cost a Run 235 µs on an H200.
func (d *Device) ReadToHost(dsts [][]byte, srcs []runtime.Tensor, rs runtime.Stream) error {
	s, err := d.Stream(rs)
	if err != nil {
		return err
	}
	if len(dsts) != len(srcs) {
		return fmt.Errorf("cuda: rank %d: read to host: %d destinations for %d tensors", d.Opts.Rank, len(dsts), len(srcs))
	}
	// Each contiguous tensor gets a 256-byte aligned slot of the pinned
	// buffer while the slots fit under maxReadBounce; -1: the pageable way.
	slots := make([]int, len(srcs))
	total := 0
	for i, t := range srcs {
		if int64(len(dsts[i])) != t.Bytes() {
			return fmt.Errorf("cuda: rank %d: read to host: %d bytes for a tensor of %d", d.Opts.Rank, len(dsts[i]), t.Bytes())
		}
		slots[i] = -1
		if n := align256(len(dsts[i])); n > 0 && total+n <= maxReadBounce {
			slots[i], total = total, total+n
		}
	}
	b := &d.bounce
	b.mu.Lock()
	defer b.mu.Unlock()
	if total > b.size && d.growBounce(total) != nil {
		// No pinned memory to be had: the pageable way, slower but sure
		// (a Run must not fail for want of a faster path).
		for i := range slots {
			slots[i] = -1
		}
	}
	for i, t := range srcs {
		n, at := len(dsts[i]), slots[i]
		switch {
		case n == 0:
		case at < 0:
			if err := d.CopyToHost(dsts[i], t, s); err != nil {
				return err
			}
		default:
			ptr, err := d.Span(t, "read to host")
			if err != nil {
				return err
			}
			to := uintptr(unsafe.Add(b.host, at))
			switch {
			case t.IsContiguous():
				err = d.WithCtx(func() error { return d.Drv.MemcpyDtoHAsync.Call4(to, uintptr(ptr), uintptr(n), s.H) })
			case n <= MaxDirectRead && b.dev != 0:
				err = d.WithCtx(func() error {
					return d.StridedCopy(b.dev+uint64(at), runtime.ContiguousStrides(t.Shape), ptr, t.EffectiveStrides(), t, s)
				})
			default:
				err = d.Staged(n, s, func(tmp uint64) error {
					if err := d.StridedCopy(tmp, runtime.ContiguousStrides(t.Shape), ptr, t.EffectiveStrides(), t, s); err != nil {
						return err
					}
					return d.Drv.MemcpyDtoHAsync.Call4(to, uintptr(tmp), uintptr(n), s.H)
				})
			}
			if err != nil {
				return fmt.Errorf("cuda: rank %d: read to host: %w", d.Opts.Rank, err)
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for i, at := range slots {
		if at >= 0 {
			copy(dsts[i], unsafe.Slice((*byte)(unsafe.Add(b.host, at)), len(dsts[i])))
		}
	}
	return nil
}

func align256(n int) int { return (n + 255) &^ 255 }

// growBounce replaces the pinned buffer by one of at least n bytes.
func (d *Device) growBounce(n int) error {
	b := &d.bounce
	size := max(n, 2*b.size, 1<<20)
	size = min(size, maxReadBounce)
	return d.WithCtx(func() error {
		if b.host != nil {
			if err := d.Drv.MemFreeHost.Call1(uintptr(b.host)); err != nil {
				return err
			}
			b.host, b.dev, b.size = nil, 0, 0
		}
		var host unsafe.Pointer
		if err := d.Drv.MemHostAlloc.Call3(uintptr(unsafe.Pointer(&host)), uintptr(size), memHostAllocPortable|memHostAllocDeviceMap); err != nil {
			return fmt.Errorf("cuda: rank %d: pinned memory for reading outputs (%d bytes): %w", d.Opts.Rank, size, err)
		}
		// Where the mapping is refused, reads take the copy engines.
		var dev uint64
		if d.Drv.MemHostGetDevicePointer.Call3(uintptr(unsafe.Pointer(&dev)), uintptr(host), 0) != nil {
			dev = 0
		}
		b.host, b.dev, b.size = host, dev, size
		return nil
	})
}

// closeBounce frees the pinned buffer.
func (d *Device) closeBounce() error {
	b := &d.bounce
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.host == nil {
		return nil
	}
	err := d.WithCtx(func() error { return d.Drv.MemFreeHost.Call1(uintptr(b.host)) })
	b.host, b.dev, b.size = nil, 0, 0
	return err
}
