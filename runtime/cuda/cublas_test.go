package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
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
	if len(got) < 5 || got[0] != "libcublas.so.13" || got[1] != "libcublas.so.12" {
		t.Fatalf("candidates %v: the sonames come first", got)
	}
	idx := func(s string) int {
		for i, g := range got {
			if g == s {
				return i
			}
		}
		t.Fatalf("%s is not among %v", s, got)
		return -1
	}
	cu13 := idx(filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13"))
	full := idx(filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13.0.2"))
	cu12 := idx(filepath.Join(site, "nvidia/cublas/lib/libcublas.so.12"))
	if !(cu13 < full && full < cu12) {
		t.Errorf("order: so.13 %d, so.13.0.2 %d, cublas/so.12 %d", cu13, full, cu12)
	}
	for _, g := range got {
		if strings.Contains(g, "libcublasLt") {
			t.Errorf("%s is a candidate", g)
		}
	}

	// HIR_CUDA_LIBCUBLAS alone: a directory, or a file.
	env[envLibCUBLAS] = filepath.Join(site, "nvidia/cu13/lib")
	got = blasCandidates(getenv, filepath.Glob)
	if len(got) != 2 || got[0] != filepath.Join(site, "nvidia/cu13/lib/libcublas.so.13") {
		t.Errorf("with a directory: %v", got)
	}
	env[envLibCUBLAS] = "/opt/x/libcublas.so.13"
	if got = blasCandidates(getenv, filepath.Glob); len(got) != 1 || got[0] != "/opt/x/libcublas.so.13" {
		t.Errorf("with a file: %v", got)
	}
}

// Without a library, CUBLAS says what it tried and how to point at one.
func TestCUBLASReport(t *testing.T) {
	info := CUBLAS()
	t.Logf("%s; tried %d", info, len(info.Tried))
	if info.Err == nil {
		if info.Path == "" || info.Version == "" {
			t.Errorf("loaded without a path or version: %+v", info)
		}
		return
	}
	if !strings.Contains(info.Err.Error(), envLibCUBLAS) || len(info.Tried) == 0 {
		t.Errorf("report %v, tried %v", info.Err, info.Tried)
	}
}

func TestBLASFits(t *testing.T) {
	if !blasFits(4, 1024, 1024, 1024, false) || blasFits(1<<20, 1<<12, 8, 8, false) || !blasFits(1<<20, 1<<12, 8, 8, true) {
		t.Errorf("blasFits")
	}
}
