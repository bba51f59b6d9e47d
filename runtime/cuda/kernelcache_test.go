package cuda

import (
	"bytes"
	"errors"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKernelCacheDir(t *testing.T) {
	for _, off := range []string{"off", "0", "none", "FALSE"} {
		t.Setenv(gpu.EnvKernelCache, off)
		dir, ok := gpu.KernelCacheDir()
		assert.False(t, ok, "%s=%s: on", gpu.EnvKernelCache, off)
		assert.Equal(t, "", dir, "%s=%s: dir", gpu.EnvKernelCache, off)
	}
	t.Setenv(gpu.EnvKernelCache, "/some/where")
	dir, ok := gpu.KernelCacheDir()
	assert.True(t, ok, "explicit dir: on")
	assert.Equal(t, "/some/where", dir, "explicit dir")
	t.Setenv(gpu.EnvKernelCache, "")
	t.Setenv("XDG_CACHE_HOME", "/cache/home")
	dir, ok = gpu.KernelCacheDir()
	assert.True(t, ok, "default dir: on")
	assert.Equal(t, "/cache/home/hir/kernels", dir, "default dir")
}

func TestImageKey(t *testing.T) {
	base := gpu.ImageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0")
	for name, k := range map[string]string{
		"source":  gpu.ImageKey("src2", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0"),
		"arch":    gpu.ImageKey("src", [2]int{8, 0}, []string{"--fmad=false"}, "nvrtc-13.0"),
		"options": gpu.ImageKey("src", [2]int{9, 0}, nil, "nvrtc-13.0"),
		"nvrtc":   gpu.ImageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.1"),
	} {
		assert.NotEqual(t, base, k, "changing the %s leaves the key as it was", name)
	}
	assert.Len(t, base, 64, "key %q is not a stable SHA-256", base)
	assert.Equal(t, base, gpu.ImageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0"), "key %q is not a stable SHA-256", base)
}

func TestNVRTCOptions(t *testing.T) {
	got := gpu.NvrtcOptions([]string{"--std=c++17", "--fmad=false", "--gpu-architecture=sm_80", "-lineinfo"})
	assert.Equal(t, "--fmad=false -lineinfo", strings.Join(got, " "), "options %v", got)
}

// A second process finds the image on disk: here, one put there by hand.
func TestCachedImageFromDisk(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(gpu.EnvKernelCache, dir)
	const src = "extern \"C\" __global__ void hir_disk_test(float* p) { p[0] = 1.0f; }\n"
	key := gpu.ImageKey(src, [2]int{9, 0}, nil, "test")
	img := append(append([]byte{}, gpu.ElfMagic...), "a cubin"...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, key+".cubin"), img, 0o600))
	before := gpu.KernelCache()
	got, from, err := gpu.CachedImage(key, src, "hir_disk_test.cu", [2]int{9, 0}, nil, false)
	require.NoError(t, err, "first lookup")
	require.Equal(t, "disk", from, "first lookup")
	require.Equal(t, img, got, "first lookup")
	_, from, _ = gpu.CachedImage(key, src, "hir_disk_test.cu", [2]int{9, 0}, nil, false)
	assert.Equal(t, "memory", from, "second lookup")
	after := gpu.KernelCache()
	assert.Equal(t, before.DiskHits+1, after.DiskHits, "counters %+v after %+v", after, before)
	assert.Equal(t, before.MemoryHits+1, after.MemoryHits, "counters %+v after %+v", after, before)
	assert.Equal(t, before.Compiles, after.Compiles, "counters %+v after %+v", after, before)
	assert.Equal(t, dir, after.Dir)
	gpu.ForgetImage(key)
	_, err = os.Stat(filepath.Join(dir, key+".cubin"))
	assert.ErrorIs(t, err, os.ErrNotExist, "forgetImage left the file")
}

// A damaged file is not used: the image is compiled again (where NVRTC
// loads) and rewritten, or the compile error is returned.
func TestCachedImageDamagedFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(gpu.EnvKernelCache, dir)
	const src = "extern \"C\" __global__ void hir_damaged(float* p) { p[0] = 2.0f; }\n"
	key := gpu.ImageKey(src, [2]int{9, 0}, nil, "test-damaged")
	path := filepath.Join(dir, key+".cubin")
	require.NoError(t, os.WriteFile(path, []byte("not an image"), 0o600))
	before := gpu.KernelCache()
	img, from, err := gpu.CachedImage(key, src, "hir_damaged.cu", [2]int{9, 0}, nil, false)
	assert.Equal(t, before.DiskErrors+1, gpu.KernelCache().DiskErrors, "the damaged file was not counted")
	var ce *gpu.CompileError
	switch {
	case err != nil:
		if assert.ErrorAs(t, err, &ce, "error %v is not a *CompileError", err) {
			t.Logf("no NVRTC here: %v", err)
		}
	default:
		b, _ := os.ReadFile(path)
		assert.Equal(t, "nvrtc", from, "recompiled from")
		// assert.True, not assert.Equal: a failure would print the images.
		assert.True(t, bytes.HasPrefix(img, gpu.ElfMagic), "recompiled from %q; the new image is not an ELF image", from)
		assert.True(t, bytes.Equal(b, img), "recompiled from %q; the file was not rewritten with the new image", from)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "k.cubin")
	require.NoError(t, gpu.WriteAtomic(dir, path, []byte("one")))
	require.NoError(t, gpu.WriteAtomic(dir, path, []byte("two")))
	b, _ := os.ReadFile(path)
	ents, _ := os.ReadDir(dir)
	assert.Equal(t, "two", string(b), "file")
	assert.Len(t, ents, 1, "entries")
	st, err := os.Stat(dir)
	if assert.NoError(t, err, "cache directory") {
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "cache directory mode")
	}
}

func TestSourceError(t *testing.T) {
	path := gpu.SaveSource("hir_x", "the source")
	defer os.Remove(path)
	b, err := os.ReadFile(path)
	require.NoError(t, err, "saved %q", path)
	require.Equal(t, "the source", string(b), "saved %q", path)
	require.True(t, strings.HasSuffix(path, ".cu"), "saved %q", path)
	inner := &gpu.CompileError{Name: "hir_x.cu", Err: errors.New("NVRTC_ERROR_COMPILATION"), Log: "hir_x.cu(3): error: expected a \";\""}
	e := &gpu.SourceError{Kernel: "hir_x", SourcePath: path, Err: inner}
	msg := e.Error()
	for _, want := range []string{"NVRTC_ERROR_COMPILATION", "expected a", "the generated source is in " + path} {
		assert.Contains(t, msg, want)
	}
	var ce *gpu.CompileError
	assert.ErrorAs(t, e, &ce, "the compile error does not unwrap")
}
