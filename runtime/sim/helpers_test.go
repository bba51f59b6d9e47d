package sim

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
)

// newRuntime opens a runtime of D ranks that is closed, and checked for
// leaks, when the test ends.
func newRuntime(t testing.TB, D int, timeout time.Duration) *Runtime {
	t.Helper()
	rt, err := New(runtime.Config{WorldSize: D, Timeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Equal(t, 0, rt.LiveBuffers(), "buffers still live at the end of the test")
		rt.Close()
	})
	return rt
}

// recordMeetings counts the meetings rt's ranks open, by key (read after
// the ranks are done).
func recordMeetings(rt *Runtime) map[meetKey]int {
	var mu sync.Mutex
	seen := map[meetKey]int{}
	rt.rv.opened = func(k meetKey) {
		mu.Lock()
		seen[k]++
		mu.Unlock()
	}
	return seen
}

// onAll runs fn for every rank at once, as the evaluator runs ranks, and
// returns each rank's error.
func onAll(rt *Runtime, fn func(d *Device) error) []error {
	errs := make([]error, rt.size)
	var wg sync.WaitGroup
	for r := 0; r < rt.size; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = fn(rt.devices[r])
		}(r)
	}
	wg.Wait()
	return errs
}

func mustAll(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func encode(dt ir.DType, xs []float64) []byte {
	b := make([]byte, len(xs)*dt.Size())
	for i, x := range xs {
		numeric.StoreFloat(dt, b, int64(i), x)
	}
	return b
}

func decode(dt ir.DType, b []byte) []float64 {
	xs := make([]float64, len(b)/dt.Size())
	for i := range xs {
		xs[i] = numeric.LoadFloat(dt, b, int64(i))
	}
	return xs
}

// tensorOf is a contiguous tensor filling the start of b.
func tensorOf(b runtime.Buffer, dt ir.DType, shape ...int64) runtime.Tensor {
	return runtime.Tensor{Buf: b, DType: dt, Shape: shape}
}

// upload allocates a buffer in mem, fills it with xs and waits.
func upload(d *Device, mem ir.MemoryType, dt ir.DType, xs []float64, shape ...int64) (runtime.Tensor, error) {
	b, err := d.Alloc(int64(len(xs)*dt.Size()), mem)
	if err != nil {
		return runtime.Tensor{}, err
	}
	t := tensorOf(b, dt, shape...)
	if err := d.CopyFromHost(t, encode(dt, xs), nil); err != nil {
		return t, err
	}
	return t, d.DefaultStream().Synchronize()
}

// download reads t back to the host.
func download(d *Device, t runtime.Tensor) ([]float64, error) {
	b := make([]byte, t.Bytes())
	if err := d.CopyToHost(b, t, nil); err != nil {
		return nil, err
	}
	if err := d.DefaultStream().Synchronize(); err != nil {
		return nil, err
	}
	return decode(t.DType, b), nil
}

// floatsDiff is cmp.Diff(want, got) (empty when they are the same) with
// NaN equal to NaN, -0 to 0, and nil to empty.
func floatsDiff(want, got []float64) string {
	return cmp.Diff(want, got, cmpopts.EquateNaNs(), cmpopts.EquateEmpty())
}

// nd is a host tensor for references.
type nd struct {
	shape []int64
	data  []float64
}

func (a nd) strides() []int64 { return runtime.ContiguousStrides(a.shape) }

// block returns block p of extent k along axis.
func (a nd) block(axis int, p int, k int64) nd {
	shape := append([]int64(nil), a.shape...)
	shape[axis] = k
	out := nd{shape: shape, data: make([]float64, ir.Product(shape))}
	st, ost := a.strides(), out.strides()
	for i := range out.data {
		rem, src := int64(i), int64(0)
		for ax := range shape {
			idx := rem / ost[ax]
			rem %= ost[ax]
			if ax == axis {
				idx += int64(p) * k
			}
			src += idx * st[ax]
		}
		out.data[i] = a.data[src]
	}
	return out
}

// concat joins parts along axis.
func concat(parts []nd, axis int) nd {
	shape := append([]int64(nil), parts[0].shape...)
	k := shape[axis]
	shape[axis] = k * int64(len(parts))
	out := nd{shape: shape, data: make([]float64, ir.Product(shape))}
	ost := out.strides()
	for i := range out.data {
		rem := int64(i)
		idx := make([]int64, len(shape))
		for ax := range shape {
			idx[ax] = rem / ost[ax]
			rem %= ost[ax]
		}
		p := idx[axis] / k
		idx[axis] %= k
		src, pst := int64(0), parts[p].strides()
		for ax := range idx {
			src += idx[ax] * pst[ax]
		}
		out.data[i] = parts[p].data[src]
	}
	return out
}
