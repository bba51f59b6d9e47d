package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
	none := &blasHandle{ws: map[*gpu.Stream]uintptr{}}
	assert.Zero(t, none.workspace(a), "HIR_CUBLAS_WORKSPACE=0: none made")
}
