package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func touch(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, nil, 0o644))
}

func TestBLASCandidates(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "venv/lib/python3.12/site-packages")
	touch(t, filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13.0.2"))
	touch(t, filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13"))
	touch(t, filepath.Join(site, "nvidia/cu13/lib/libcublasLt.so.13"))
	touch(t, filepath.Join(site, "nvidia/cublas/lib/libcublas.so.12"))
	env := map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv"), "HOME": filepath.Join(root, "home")}
	getenv := func(k string) string { return env[k] }

	got := blasCandidates(getenv, filepath.Glob)
	require.GreaterOrEqual(t, len(got), 5, "candidates %v: the sonames come first", got)
	require.Equal(t, "libcublas.so.13", got[0], "candidates %v: the sonames come first", got)
	require.Equal(t, "libcublas.so.12", got[1], "candidates %v: the sonames come first", got)
	idx := func(s string) int {
		i := slices.Index(got, s)
		require.NotEqual(t, -1, i, "%s is not among %v", s, got)
		return i
	}
	cu13 := idx(filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13"))
	full := idx(filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13.0.2"))
	cu12 := idx(filepath.Join(site, "nvidia/cublas/lib/libcublas.so.12"))
	assert.Less(t, cu13, full, "order: so.13 %d, so.13.0.2 %d, cublas/so.12 %d", cu13, full, cu12)
	assert.Less(t, full, cu12, "order: so.13 %d, so.13.0.2 %d, cublas/so.12 %d", cu13, full, cu12)
	for _, g := range got {
		assert.NotContains(t, g, "libcublasLt", "%s is a candidate", g)
	}

	// HIR_CUDA_LIBCUBLAS alone: a directory, or a file.
	env[envLibCUBLAS] = filepath.Join(site, "nvidia/cu13/lib")
	got = blasCandidates(getenv, filepath.Glob)
	if assert.Len(t, got, 2, "with a directory: %v", got) {
		assert.Equal(t, filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13"), got[0], "with a directory: %v", got)
	}
	env[envLibCUBLAS] = "/opt/x/libcublas.so.13"
	got = blasCandidates(getenv, filepath.Glob)
	assert.Equal(t, []string{"/opt/x/libcublas.so.13"}, got, "with a file")
}

// Without a library, CUBLAS says what it tried and how to point at one.
func TestCUBLASReport(t *testing.T) {
	info := CUBLAS()
	t.Logf("%s; tried %d", info, len(info.Tried))
	if info.Err == nil {
		assert.NotEmpty(t, info.Path, "loaded without a path: %+v", info)
		assert.NotEmpty(t, info.Version, "loaded without a version: %+v", info)
		return
	}
	assert.ErrorContains(t, info.Err, envLibCUBLAS, "report, tried %v", info.Tried)
	assert.NotEmpty(t, info.Tried, "report %v, tried %v", info.Err, info.Tried)
}

func TestBLASFits(t *testing.T) {
	assert.True(t, blasFits(4, 1024, 1024, 1024, false), "blasFits")
	assert.False(t, blasFits(1<<20, 1<<12, 8, 8, false), "blasFits")
	assert.True(t, blasFits(1<<20, 1<<12, 8, 8, true), "blasFits")
}

// TestBLASWorkspacePerStream: each stream gets a workspace of its own (a
// shared one let two streams' gemms overwrite each other's state on the
// GPU), made once, freed when the stream closes; without memory a stream
// falls back to cuBLAS's pool (0) instead of failing the matmul.
func TestBLASWorkspacePerStream(t *testing.T) {
	next, live := uintptr(0x1000), map[uintptr]bool{}
	bh := &blasHandle{ws: map[*gpu.Stream]uintptr{}, wsSize: 32 << 20,
		alloc: func(p *uintptr, n uintptr) error {
			if next >= 0x4000 {
				return errors.New("out of memory")
			}
			*p, next = next, next+0x1000
			live[*p] = true
			return nil
		},
		free: func(p uintptr) error {
			if !live[p] {
				return errors.New("freed twice or never made")
			}
			delete(live, p)
			return nil
		}}
	a, b := &gpu.Stream{}, &gpu.Stream{}
	wa, wb := bh.workspace(a), bh.workspace(b)
	assert.NotZero(t, wa)
	assert.NotZero(t, wb)
	assert.NotEqual(t, wa, wb, "two streams share a workspace")
	assert.Equal(t, wa, bh.workspace(a), "a stream's workspace is made once")
	require.NoError(t, bh.releaseWorkspace(a))
	assert.False(t, live[wa], "a closed stream's workspace is freed")
	require.NoError(t, bh.releaseWorkspace(a), "releasing twice is harmless")
	c, d := &gpu.Stream{}, &gpu.Stream{}
	assert.NotZero(t, bh.workspace(c))
	assert.Zero(t, bh.workspace(d), "no memory: cuBLAS's own pool")
	require.NoError(t, bh.releaseWorkspace(d))
	bh.cur = b // b's gemm set the handle last
	require.NoError(t, bh.releaseWorkspace(b))
	assert.Nil(t, bh.cur, "a closed stream is not the handle's: a new stream may get its handle value")
	none := &blasHandle{ws: map[*gpu.Stream]uintptr{}}
	assert.Zero(t, none.workspace(a), "HIR_CUBLAS_WORKSPACE=0: none made")
}

// blasLayout: which views cuBLAS takes as they lie (row and matrix
// strides) and which must be staged.
func TestBLASLayout(t *testing.T) {
	view := func(shape, strides []int64) runtime.Tensor {
		return runtime.Tensor{DType: ir.F32, Shape: shape, Strides: strides}
	}
	for _, c := range []struct {
		name      string
		t         runtime.Tensor
		ld, batch int64
		ok        bool
	}{
		{"contiguous", view([]int64{3, 4}, nil), 4, 12, true},
		{"contiguous batch", view([]int64{2, 3, 4}, nil), 4, 12, true},
		{"a chunk of every rank's block", view([]int64{2, 3, 5}, []int64{60, 5, 1}), 5, 60, true},
		{"a kept axis of 1", view([]int64{2, 1, 3, 5}, []int64{60, 15, 5, 1}), 5, 60, true},
		{"batch dims stepping as one", view([]int64{2, 2, 3, 5}, []int64{60, 30, 5, 1}), 5, 30, true},
		{"padded rows", view([]int64{3, 4}, []int64{8, 1}), 8, 24, true},
		{"one row", view([]int64{2, 1, 4}, []int64{40, 7, 1}), 4, 40, true},
		{"batch dims apart", view([]int64{2, 2, 3, 5}, []int64{120, 30, 5, 1}), 0, 0, false},
		{"transposed", view([]int64{4, 3}, []int64{1, 4}), 0, 0, false},
		{"overlapping rows", view([]int64{3, 4}, []int64{2, 1}), 0, 0, false},
		{"rank 1", view([]int64{4}, nil), 0, 0, false},
	} {
		ld, batch, ok := blasLayout(c.t)
		assert.Equal(t, c.ok, ok, "%s: ok", c.name)
		if c.ok {
			assert.Equal(t, []int64{c.ld, c.batch}, []int64{ld, batch}, "%s: ld, batch", c.name)
		}
	}
}
