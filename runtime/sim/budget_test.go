package sim

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func TestTooLargeIsAnErrorNotAPanic(t *testing.T) {
	rt, err := NewWithOptions(runtime.Config{WorldSize: 2}, Options{MemoryLimit: 1 << 20})
	require.NoError(t, err)
	defer rt.Close()
	d0, _ := rt.Device(0)

	// Far past any machine: once it was a makeslice panic.
	_, err = d0.Alloc(1<<62, ir.Global)
	require.ErrorContains(t, err, "does not fit", "alloc of 4 EiB")
	// Within the limit, then past what is left of it.
	b, err := d0.Alloc(768<<10, ir.Global)
	require.NoError(t, err)
	_, err = d0.Alloc(512<<10, ir.Host)
	require.ErrorContains(t, err, "256.00 KiB free of its 1.00 MiB limit", "second alloc")
	require.NoError(t, d0.Free(b))
	// A symmetric allocation fails on every rank alike (no rank is left
	// waiting for a peer), and its memory comes back once every rank freed.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	bufs := make([]runtime.Buffer, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := rt.Device(r)
			if _, err := d.Alloc(1<<20, ir.Symmetric); err == nil {
				errs[r] = errString("2 × 1 MiB symmetric fit in 1 MiB")
				return
			}
			bufs[r], errs[r] = d.Alloc(256<<10, ir.Symmetric)
		}()
	}
	wg.Wait()
	mustAll(t, errs)
	for r, b := range bufs {
		d, _ := rt.Device(r)
		require.NoError(t, d.Free(b))
	}
	got, err := d0.Alloc(1<<20, ir.Global)
	require.NoError(t, err, "the whole limit after every free")
	require.NoError(t, d0.Free(got))
}

type errString string

func (e errString) Error() string { return string(e) }
