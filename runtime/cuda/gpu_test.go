package cuda

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// GPU tests skip, with the probe's reason, where no usable GPU is.

func needGPU(t testing.TB) ProbeResult {
	t.Helper()
	p := Probe()
	if !p.Available {
		t.Skip(p.Reason)
	}
	return p
}

// openSingle opens a world of one on device 0 and, at cleanup, checks that
// closing left nothing behind.
func openSingle(t *testing.T) *Device {
	t.Helper()
	needGPU(t)
	rt, err := New(Options{Rank: 0, WorldSize: 1, Device: 0, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt.dev
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
	if err := d.CopyToHost(out, src, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.DefaultStream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	return bytesI32(out)
}

func eqI32(t *testing.T, what string, got, want []int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d = %d, want %d", what, i, got[i], want[i])
		}
	}
}

func TestNVRTCCompileLoadLaunch(t *testing.T) {
	d := openSingle(t)
	const src = `extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}`
	cubin, err := CompileCUDA(src, "axpy.cu", d.Info().ComputeCapability)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.LoadModule(cubin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	fn, err := mod.Function("axpy")
	if err != nil {
		t.Fatal(err)
	}
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
	if err := d.CopyFromHost(xt, xs, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyFromHost(yt, ys, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.LaunchFunction(fn, Dim3{X: (n + 127) / 128}, Dim3{X: 128}, 0, nil, float32(2), x, y, int32(n)); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := d.CopyToHost(out, yt, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.DefaultStream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got, want := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])), float32(2*i+1); got != want {
			t.Fatalf("y[%d] = %v, want %v", i, got, want)
		}
	}
	d.Free(x)
	d.Free(y)

	_, err = CompileCUDA(`extern "C" __global__ void broken() { undefined_thing(); }`, "broken.cu", d.Info().ComputeCapability)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undefined_thing") {
		t.Fatalf("compile error: %v", err)
	}
}

func TestSingleRankMemoryCopiesStreams(t *testing.T) {
	d := openSingle(t)
	// The driver opens some device files on first use of a feature: the
	// second round must end with exactly the descriptors the first did.
	singleRankRound(t, d)
	baseFD := openFDCount()
	free0, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	singleRankRound(t, d)
	if got := openFDCount(); got != baseFD {
		t.Errorf("%d descriptors open, %d before", got, baseFD)
	}
	free1, _, _ := d.MemInfo()
	if free1+(64<<20) < free0 {
		t.Errorf("device memory not returned: %d free before, %d after", free0, free1)
	}
}

func singleRankRound(t *testing.T, d *Device) {
	const rows, cols = 64, 32
	data := seqI32(rows*cols, 0)
	g, err := d.Alloc(4*rows*cols, ir.Global)
	if err != nil {
		t.Fatal(err)
	}
	gt := runtime.Tensor{Buf: g, DType: ir.I32, Shape: []int64{rows, cols}}
	if err := d.CopyFromHost(gt, i32Bytes(data), nil); err != nil {
		t.Fatal(err)
	}
	eqI32(t, "round trip", toHost(t, d, gt), data)

	// Transpose through the strided-copy kernel.
	tr, _ := d.Alloc(4*rows*cols, ir.Global)
	if err := d.Copy(runtime.Tensor{Buf: tr, DType: ir.I32, Shape: []int64{rows, cols}, Strides: []int64{1, rows}}, gt, nil); err != nil {
		t.Fatal(err)
	}
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
	if err := d.CopyFromHost(col, i32Bytes(newCol), nil); err != nil {
		t.Fatal(err)
	}
	eqI32(t, "column written", toHost(t, d, col), newCol)

	// Pinned host memory, copied into on a second stream after an event.
	h, err := d.Alloc(4*rows*cols, ir.Host)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DefaultStream().Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := s2.WaitEvent(ev); err != nil {
		t.Fatal(err)
	}
	ht := runtime.Tensor{Buf: h, DType: ir.I32, Shape: []int64{rows * cols}}
	if err := d.Copy(ht, runtime.Tensor{Buf: tr, DType: ir.I32, Shape: []int64{rows * cols}}, s2); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !ev.Query() {
		t.Error("event not passed after the stream that waited on it finished")
	}
	eqI32(t, "pinned host", bytesI32(unsafeHostBytes(h)), want)

	// Symmetric with one rank: the view is the shard.
	sym, err := d.Alloc(1000, ir.Symmetric)
	if err != nil {
		t.Fatal(err)
	}
	if sym.Size() < 1000 || uint64(sym.Size())%d.granularity != 0 {
		t.Errorf("symmetric size %d is not 1000 rounded up to %d", sym.Size(), d.granularity)
	}
	view, err := d.ContiguousView(sym)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := d.ContiguousView(sym); again != view {
		t.Error("second ContiguousView did not come from the cache")
	}
	if err := d.CopyFromHost(runtime.Tensor{Buf: view, Offset: 40, DType: ir.I32, Shape: []int64{3}}, i32Bytes([]int32{7, 8, 9}), nil); err != nil {
		t.Fatal(err)
	}
	eqI32(t, "through the view", toHost(t, d, runtime.Tensor{Buf: sym, DType: ir.I32, Shape: []int64{13}}), []int32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9})
	if err := d.Free(view); err == nil {
		t.Error("freeing a view worked")
	}
	if err := d.Barrier(nil); err != nil {
		t.Fatal(err)
	}

	// Out-of-range tensors and unsupported ops are errors, not crashes.
	if err := d.CopyToHost(make([]byte, 8), runtime.Tensor{Buf: g, Offset: 4*rows*cols - 4, DType: ir.I32, Shape: []int64{2}}, nil); err == nil {
		t.Error("copy past the end of a buffer worked")
	}
	if _, err := d.Compile(&runtime.KernelSpec{}); err == nil || !strings.Contains(err.Error(), "no op") {
		t.Errorf("Compile of an empty spec: %v, want an error saying there is no op", err)
	}

	for _, b := range []runtime.Buffer{g, tr, h, sym} {
		if err := d.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Free(g); err == nil {
		t.Error("double free worked")
	}
	s2.Close()
	ev.Close()
	if st := d.Stats(); st.Allocations != 0 || st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 || st.OpenFDs != 0 || st.Streams != 1 || st.Events != 0 {
		t.Errorf("after freeing everything: %+v", st)
	}
}

func unsafeHostBytes(b runtime.Buffer) []byte {
	hb := b.(*buffer)
	return append([]byte(nil), unsafeSlice(hb)...)
}

func TestTooLargeIsAClearError(t *testing.T) {
	d := openSingle(t)
	for _, mem := range []ir.MemoryType{ir.Global, ir.Symmetric} {
		_, err := d.Alloc(1<<50, mem)
		if err == nil || !strings.Contains(err.Error(), "does not fit: device 0") || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
			t.Errorf("%v alloc of 1 PiB: %v", mem, err)
		}
	}
	if st := d.Stats(); st.Allocations != 0 || st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 {
		t.Errorf("after failed allocations: %+v", st)
	}
}
