package cuda

import (
	"encoding/binary"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// GPU tests skip, with the probe's reason, where no usable GPU is.

func needGPU(t testing.TB) gpu.ProbeResult {
	t.Helper()
	p := gpu.Probe()
	if !p.Available {
		t.Skip(p.Reason)
	}
	return p
}

// openSingle opens a world of one on device 0 and, at cleanup, checks that
// closing left nothing behind.
func openSingle(t *testing.T) *Device { return openSingleRuntime(t).dev }

// openSingleRuntime is openSingle's runtime (for an evaluator.Job).
func openSingleRuntime(tb testing.TB) *Runtime {
	tb.Helper()
	needGPU(tb)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		assert.NoError(tb, rt.Close(), "close")
	})
	return rt
}

func i32Bytes(vals []int32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

func bytesI32(b []byte) []int32 {
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func seqI32(n int, base int32) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = base + int32(i)
	}
	return v
}

func toHost(t *testing.T, d *Device, src runtime.Tensor) []int32 {
	t.Helper()
	out := make([]byte, src.Bytes())
	require.NoError(t, d.CopyToHost(out, src, nil))
	require.NoError(t, d.DefaultStream().Synchronize())
	return bytesI32(out)
}

func eqI32(t *testing.T, what string, got, want []int32) {
	t.Helper()
	require.Equal(t, want, got, what)
}

func TestNVRTCCompileLoadLaunch(t *testing.T) {
	d := openSingle(t)
	const src = `extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}`
	cubin, err := gpu.CompileCUDA(src, "axpy.cu", d.Info().ComputeCapability)
	require.NoError(t, err)
	mod, err := d.LoadModule(cubin)
	require.NoError(t, err)
	defer mod.Unload()
	fn, err := mod.Function("axpy")
	require.NoError(t, err)
	const n = 1000
	xs, ys := make([]byte, 4*n), make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(xs[4*i:], math.Float32bits(float32(i)))
		binary.LittleEndian.PutUint32(ys[4*i:], math.Float32bits(1))
	}
	x, _ := d.Alloc(4*n, ir.Global)
	y, _ := d.Alloc(4*n, ir.Global)
	xt := runtime.Tensor{Buf: x, DType: ir.F32, Shape: []int64{n}}
	yt := runtime.Tensor{Buf: y, DType: ir.F32, Shape: []int64{n}}
	require.NoError(t, d.CopyFromHost(xt, xs, nil))
	require.NoError(t, d.CopyFromHost(yt, ys, nil))
	require.NoError(t, d.LaunchFunction(fn, gpu.Dim3{X: (n + 127) / 128}, gpu.Dim3{X: 128}, 0, nil, float32(2), x, y, int32(n)))
	out := make([]byte, 4*n)
	require.NoError(t, d.CopyToHost(out, yt, nil))
	require.NoError(t, d.DefaultStream().Synchronize())
	for i := 0; i < n; i++ {
		require.Equal(t, float32(2*i+1), math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])), "y[%d]", i)
	}
	d.Free(x)
	d.Free(y)

	_, err = gpu.CompileCUDA(`extern "C" __global__ void broken() { undefined_thing(); }`, "broken.cu", d.Info().ComputeCapability)
	var ce *gpu.CompileError
	require.ErrorAs(t, err, &ce, "compile error")
	require.Contains(t, ce.Log, "undefined_thing", "compile error: %v", err)
}

func TestSingleRankMemoryCopiesStreams(t *testing.T) {
	d := openSingle(t)
	// The driver opens some device files on first use of a feature: the
	// second round must end with exactly the descriptors the first did.
	singleRankRound(t, d)
	baseFD := openFDCount()
	free0, _, err := d.MemInfo()
	require.NoError(t, err)
	singleRankRound(t, d)
	assert.Equal(t, baseFD, openFDCount(), "descriptors open, vs before")
	free1, _, _ := d.MemInfo()
	assert.GreaterOrEqual(t, free1+(64<<20), free0, "device memory not returned: %d free before, %d after", free0, free1)
}

func singleRankRound(t *testing.T, d *Device) {
	const rows, cols = 64, 32
	data := seqI32(rows*cols, 0)
	g, err := d.Alloc(4*rows*cols, ir.Global)
	require.NoError(t, err)
	gt := runtime.Tensor{Buf: g, DType: ir.I32, Shape: []int64{rows, cols}}
	require.NoError(t, d.CopyFromHost(gt, i32Bytes(data), nil))
	eqI32(t, "round trip", toHost(t, d, gt), data)

	// Transpose through the strided-copy kernel.
	tr, _ := d.Alloc(4*rows*cols, ir.Global)
	require.NoError(t, d.Copy(runtime.Tensor{Buf: tr, DType: ir.I32, Shape: []int64{rows, cols}, Strides: []int64{1, rows}}, gt, nil))
	want := make([]int32, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			want[j*rows+i] = data[i*cols+j]
		}
	}
	eqI32(t, "transpose", toHost(t, d, runtime.Tensor{Buf: tr, DType: ir.I32, Shape: []int64{rows * cols}}), want)

	// A strided column to the host, and from the host into one.
	col := runtime.Tensor{Buf: g, Offset: 4 * 5, DType: ir.I32, Shape: []int64{rows}, Strides: []int64{cols}}
	wantCol := make([]int32, rows)
	for i := range wantCol {
		wantCol[i] = data[i*cols+5]
	}
	eqI32(t, "column", toHost(t, d, col), wantCol)
	newCol := seqI32(rows, -1000)
	require.NoError(t, d.CopyFromHost(col, i32Bytes(newCol), nil))
	eqI32(t, "column written", toHost(t, d, col), newCol)

	// Pinned host memory, copied into on a second stream after an event.
	h, err := d.Alloc(4*rows*cols, ir.Host)
	require.NoError(t, err)
	s2, err := d.NewStream()
	require.NoError(t, err)
	ev, err := d.NewEvent()
	require.NoError(t, err)
	require.NoError(t, d.DefaultStream().Record(ev))
	require.NoError(t, s2.WaitEvent(ev))
	ht := runtime.Tensor{Buf: h, DType: ir.I32, Shape: []int64{rows * cols}}
	require.NoError(t, d.Copy(ht, runtime.Tensor{Buf: tr, DType: ir.I32, Shape: []int64{rows * cols}}, s2))
	require.NoError(t, s2.Synchronize())
	assert.True(t, ev.Query(), "event not passed after the stream that waited on it finished")
	eqI32(t, "pinned host", bytesI32(unsafeHostBytes(h)), want)

	// Symmetric with one rank: the view is the shard.
	sym, err := d.Alloc(1000, ir.Symmetric)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, sym.Size(), int64(1000), "symmetric size %d is not 1000 rounded up to %d", sym.Size(), d.Granularity)
	assert.Zero(t, uint64(sym.Size())%d.Granularity, "symmetric size %d is not 1000 rounded up to %d", sym.Size(), d.Granularity)
	view, err := d.ContiguousView(sym)
	require.NoError(t, err)
	again, _ := d.ContiguousView(sym)
	assert.Same(t, view, again, "second ContiguousView did not come from the cache")
	require.NoError(t, d.CopyFromHost(runtime.Tensor{Buf: view, Offset: 40, DType: ir.I32, Shape: []int64{3}}, i32Bytes([]int32{7, 8, 9}), nil))
	eqI32(t, "through the view", toHost(t, d, runtime.Tensor{Buf: sym, DType: ir.I32, Shape: []int64{13}}), []int32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9})
	assert.Error(t, d.Free(view), "freeing a view worked")
	require.NoError(t, d.Barrier(nil))

	// Out-of-range tensors and unsupported ops are errors, not crashes.
	assert.Error(t, d.CopyToHost(make([]byte, 8), runtime.Tensor{Buf: g, Offset: 4*rows*cols - 4, DType: ir.I32, Shape: []int64{2}}, nil), "copy past the end of a buffer worked")
	_, err = d.Compile(&runtime.KernelSpec{})
	assert.ErrorContains(t, err, "no op", "Compile of an empty spec: want an error saying there is no op")

	for _, b := range []runtime.Buffer{g, tr, h, sym} {
		require.NoError(t, d.Free(b))
	}
	assert.Error(t, d.Free(g), "double free worked")
	s2.Close()
	ev.Close()
	st := d.Stats()
	wantSt := st // what is not checked here, as it is
	wantSt.Allocations, wantSt.Handles, wantSt.Mappings, wantSt.Reservations, wantSt.OpenFDs, wantSt.Streams, wantSt.Events = 0, 0, 0, 0, 0, 1, 0
	assert.Equal(t, wantSt, st, "after freeing everything")
}

func unsafeHostBytes(b runtime.Buffer) []byte {
	hb := b.(*gpu.Buffer)
	return append([]byte(nil), gpu.UnsafeSlice(hb)...)
}

func TestTooLargeIsAClearError(t *testing.T) {
	d := openSingle(t)
	for _, mem := range []ir.MemoryType{ir.Global, ir.Symmetric} {
		_, err := d.Alloc(1<<50, mem)
		assert.ErrorContains(t, err, "does not fit: device 0", "%v alloc of 1 PiB", mem)
		assert.ErrorContains(t, err, "CUDA_ERROR_OUT_OF_MEMORY", "%v alloc of 1 PiB", mem)
	}
	st := d.Stats()
	wantSt := st // what is not checked here, as it is
	wantSt.Allocations, wantSt.Handles, wantSt.Mappings, wantSt.Reservations = 0, 0, 0, 0
	assert.Equal(t, wantSt, st, "after failed allocations")
}
