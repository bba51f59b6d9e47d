package coll

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/kernels"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// TestCommModulesCompileTime compiles (NVRTC, never from a cache) each
// collective module a bf16 or f32 program needs on first use and prints
// how long each took: a program's first collective waits for its module,
// so this is what a first run on a fresh machine costs. Needs NVRTC and a
// GPU (for its architecture); skipped elsewhere.
func TestCommModulesCompileTime(t *testing.T) {
	p := gpu.Probe()
	if !p.Available || len(p.Devices) == 0 {
		t.Skip(p.Reason)
	}
	cc := p.Devices[0].ComputeCapability
	mods := []struct {
		name string
		src  func() (string, error)
	}{
		{"hir_comm_move", func() (string, error) { return MoveModuleSource(), nil }},
		{"hir_comm_reduce_bf16", func() (string, error) { return ReduceModuleSource(ir.BF16) }},
		{"hir_comm_reduce_f32", func() (string, error) { return ReduceModuleSource(ir.F32) }},
	}
	for _, m := range mods {
		src, err := m.src()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		key := gpu.ImageKey(src, cc, NVRTCOptions, gpu.NvrtcVersionOnce())
		img, from, err := gpu.CachedImage(key, src, m.name+".cu", cc, NVRTCOptions, true)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		fmt.Printf("module %s: %d kernels, %d bytes of source, %d of image, from %s in %.2f s\n",
			m.name, len(kernels.Entries(src)), len(src), len(img), from, time.Since(start).Seconds())
	}
}
