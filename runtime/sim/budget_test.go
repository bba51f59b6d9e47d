package sim

import (
	"strings"
	"sync"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func TestTooLargeIsAnErrorNotAPanic(t *testing.T) {
	rt, err := NewWithOptions(runtime.Config{WorldSize: 2}, Options{MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	d0, _ := rt.Device(0)

	// Far past any machine: once it was a makeslice panic.
	if _, err := d0.Alloc(1<<62, ir.Global); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("alloc of 4 EiB: %v", err)
	}
	// Within the limit, then past what is left of it.
	b, err := d0.Alloc(768<<10, ir.Global)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d0.Alloc(512<<10, ir.Host)
	if err == nil || !strings.Contains(err.Error(), "256.00 KiB free of its 1.00 MiB limit") {
		t.Fatalf("second alloc: %v", err)
	}
	if err := d0.Free(b); err != nil {
		t.Fatal(err)
	}
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
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, b := range bufs {
		d, _ := rt.Device(r)
		if err := d.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := d0.Alloc(1<<20, ir.Global); err != nil {
		t.Fatalf("the whole limit after every free: %v", err)
	} else if err := d0.Free(got); err != nil {
		t.Fatal(err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
