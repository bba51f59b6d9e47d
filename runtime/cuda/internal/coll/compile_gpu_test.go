package coll

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

// TestCommModulesCompileTime compiles (NVRTC, never from a cache) every
// collective module at once, one goroutine each, and prints how long each
// took and the whole: a program's first collective of a dtype waits for
// its module, so this is what a first run on a fresh machine costs (one
// compile took 7-40 s in such a machine's first minutes, RUNTIME-CUDA.md).
// runtime/cuda's TestCollectiveModulesCompile compiles and loads them
// through the cache instead, to fill it. Needs NVRTC and a GPU (for its
// architecture); skipped elsewhere.
func TestCommModulesCompileTime(t *testing.T) {
	p := gpu.Probe()
	if !p.Available || len(p.Devices) == 0 {
		t.Skip(p.Reason)
	}
	cc := p.Devices[0].ComputeCapability
	mods := commModuleList()
	lines := make([]string, len(mods))
	errs := make([]error, len(mods))
	start := time.Now()
	var wg sync.WaitGroup
	for i, m := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, err := m.src()
			if err != nil {
				errs[i] = err
				return
			}
			t0 := time.Now()
			key := gpu.ImageKey(src, cc, NVRTCOptions, gpu.NvrtcVersionOnce())
			img, from, err := gpu.CachedImage(key, src, m.Key+".cu", cc, NVRTCOptions, true)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", m.Key, err)
				return
			}
			lines[i] = fmt.Sprintf("module %s: %d kernels, %d bytes of source, %d of image, from %s in %.2f s",
				m.Key, len(kernels.Entries(src)), len(src), len(img), from, time.Since(t0).Seconds())
		}()
	}
	wg.Wait()
	for i := range mods {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		fmt.Println(lines[i])
	}
	fmt.Printf("%d modules compiled at once in %.2f s\n", len(mods), time.Since(start).Seconds())
}
