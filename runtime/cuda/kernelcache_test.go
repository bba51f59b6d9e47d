package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKernelCacheDir(t *testing.T) {
	for _, off := range []string{"off", "0", "none", "FALSE"} {
		t.Setenv(EnvKernelCache, off)
		if dir, ok := kernelCacheDir(); ok || dir != "" {
			t.Errorf("%s=%s: dir %q, on %v", EnvKernelCache, off, dir, ok)
		}
	}
	t.Setenv(EnvKernelCache, "/some/where")
	if dir, ok := kernelCacheDir(); !ok || dir != "/some/where" {
		t.Errorf("explicit dir: %q %v", dir, ok)
	}
	t.Setenv(EnvKernelCache, "")
	t.Setenv("XDG_CACHE_HOME", "/cache/home")
	if dir, ok := kernelCacheDir(); !ok || dir != "/cache/home/hir/kernels" {
		t.Errorf("default dir: %q %v", dir, ok)
	}
}

func TestImageKey(t *testing.T) {
	base := imageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0")
	for name, k := range map[string]string{
		"source":  imageKey("src2", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0"),
		"arch":    imageKey("src", [2]int{8, 0}, []string{"--fmad=false"}, "nvrtc-13.0"),
		"options": imageKey("src", [2]int{9, 0}, nil, "nvrtc-13.0"),
		"nvrtc":   imageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.1"),
	} {
		if k == base {
			t.Errorf("changing the %s leaves the key as it was", name)
		}
	}
	if len(base) != 64 || base != imageKey("src", [2]int{9, 0}, []string{"--fmad=false"}, "nvrtc-13.0") {
		t.Errorf("key %q is not a stable SHA-256", base)
	}
}

func TestNVRTCOptions(t *testing.T) {
	got := nvrtcOptions([]string{"--std=c++17", "--fmad=false", "--gpu-architecture=sm_80", "-lineinfo"})
	if strings.Join(got, " ") != "--fmad=false -lineinfo" {
		t.Errorf("options %v", got)
	}
}

// A second process finds the image on disk: here, one put there by hand.
func TestCachedImageFromDisk(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvKernelCache, dir)
	const src = "extern \"C\" __global__ void hir_disk_test(float* p) { p[0] = 1.0f; }\n"
	key := imageKey(src, [2]int{9, 0}, nil, "test")
	img := append(append([]byte{}, elfMagic...), "a cubin"...)
	if err := os.WriteFile(filepath.Join(dir, key+".cubin"), img, 0o600); err != nil {
		t.Fatal(err)
	}
	before := KernelCache()
	got, from, err := cachedImage(key, src, "hir_disk_test.cu", [2]int{9, 0}, nil, false)
	if err != nil || from != "disk" || !bytes.Equal(got, img) {
		t.Fatalf("first lookup: from %q, err %v", from, err)
	}
	if _, from, _ := cachedImage(key, src, "hir_disk_test.cu", [2]int{9, 0}, nil, false); from != "memory" {
		t.Errorf("second lookup came from %q, want memory", from)
	}
	after := KernelCache()
	if after.DiskHits != before.DiskHits+1 || after.MemoryHits != before.MemoryHits+1 || after.Compiles != before.Compiles {
		t.Errorf("counters %+v after %+v", after, before)
	}
	if after.Dir != dir {
		t.Errorf("dir %q, want %q", after.Dir, dir)
	}
	forgetImage(key)
	if _, err := os.Stat(filepath.Join(dir, key+".cubin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("forgetImage left the file: %v", err)
	}
}

// A damaged file is not used: the image is compiled again (where NVRTC
// loads) and rewritten, or the compile error is returned.
func TestCachedImageDamagedFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvKernelCache, dir)
	const src = "extern \"C\" __global__ void hir_damaged(float* p) { p[0] = 2.0f; }\n"
	key := imageKey(src, [2]int{9, 0}, nil, "test-damaged")
	path := filepath.Join(dir, key+".cubin")
	if err := os.WriteFile(path, []byte("not an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := KernelCache()
	img, from, err := cachedImage(key, src, "hir_damaged.cu", [2]int{9, 0}, nil, false)
	if KernelCache().DiskErrors != before.DiskErrors+1 {
		t.Errorf("the damaged file was not counted")
	}
	var ce *CompileError
	switch {
	case err != nil && errors.As(err, &ce):
		t.Logf("no NVRTC here: %v", err)
	case err != nil:
		t.Errorf("error %v is not a *CompileError", err)
	default:
		b, _ := os.ReadFile(path)
		if from != "nvrtc" || !bytes.HasPrefix(img, elfMagic) || !bytes.Equal(b, img) {
			t.Errorf("recompiled from %q; the file was not rewritten with the new image", from)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "k.cubin")
	if err := writeAtomic(dir, path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	ents, _ := os.ReadDir(dir)
	if string(b) != "two" || len(ents) != 1 {
		t.Errorf("file %q, %d entries", b, len(ents))
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode %v, %v", st.Mode().Perm(), err)
	}
}

func TestSourceError(t *testing.T) {
	path := saveSource("hir_x", "the source")
	defer os.Remove(path)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "the source" || !strings.HasSuffix(path, ".cu") {
		t.Fatalf("saved %q: %q %v", path, b, err)
	}
	inner := &CompileError{Name: "hir_x.cu", Err: errors.New("NVRTC_ERROR_COMPILATION"), Log: "hir_x.cu(3): error: expected a \";\""}
	e := &SourceError{Kernel: "hir_x", SourcePath: path, Err: inner}
	msg := e.Error()
	for _, want := range []string{"NVRTC_ERROR_COMPILATION", "expected a", "the generated source is in " + path} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	var ce *CompileError
	if !errors.As(e, &ce) {
		t.Errorf("the compile error does not unwrap")
	}
}
