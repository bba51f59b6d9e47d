package main

import (
	"bytes"
	"errors"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/cuda"
)

func TestVersionBuildInfoLines(t *testing.T) {
	platform := goruntime.GOOS + "/" + goruntime.GOARCH
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/hirlab/hir", Version: "v0.0.0-20261123180000-abc123def456+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "abc123def4567890abc123def4567890abc123de"},
			{Key: "vcs.time", Value: "2026-11-23T18:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	clean := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/hirlab/hir", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-11-23T18:00:00Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	unstamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/hirlab/hir", Version: "(devel)"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped and modified", stamped, true, "hir v0.0.0-20261123180000-abc123def456+dirty (rev abc123def4567890abc123def4567890abc123de, 2026-11-23T18:00:00Z, modified)\ngo go1.26.0 " + platform + "\n"},
		{"clean", clean, true, "hir v1.2.3 (rev abc123, 2026-11-23T18:00:00Z)\ngo go1.26.0 " + platform + "\n"},
		{"go run", unstamped, true, "hir (devel) (rev unknown)\ngo go1.26.0 " + platform + "\n"},
		{"no build info", nil, false, "hir (unknown) (no build information)\ngo " + goruntime.Version() + " " + platform + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeBuildVersion(&b, tc.bi, tc.ok)
			assert.Equal(t, tc.want, b.String())
		})
	}
}

// versionLine is the first line of `hirrun version`, whatever the build.
var versionLine = regexp.MustCompile(`^hir \S+ \((rev [0-9a-f]+(, \S+)?(, modified)?|rev unknown|no build information)\)$`)

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"version", "--backend", "sim"}} {
		r := hirrun(args...)
		expectCode(t, r, exitOK)
		assert.Empty(t, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 2, "stdout:\n%s", r.stdout)
		assert.Regexp(t, versionLine, lines[0])
		assert.Equal(t, "go "+goruntime.Version()+" "+goruntime.GOOS+"/"+goruntime.GOARCH, lines[1])
	}

	r := hirrun("version", "--backend", "tpu")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, `unknown --backend "tpu"`)
	r = hirrun("version", "extra")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "takes no arguments")

	r = hirrun("help")
	expectContains(t, "help", r.stdout, "hirrun version [--backend cuda]")
}

// TestVersionCUDALibraries runs the real loaders: on a machine without a
// GPU (or without one of the libraries) each missing library's line says
// "not loaded" and names the file it tried; the command still succeeds.
func TestVersionCUDALibraries(t *testing.T) {
	r := hirrun("version", "--backend", "cuda")
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 6, "stdout:\n%s", r.stdout)
	assert.Regexp(t, versionLine, lines[0])
	for i, lib := range []struct{ name, file string }{
		{"driver", "libcuda"}, {"NVRTC", "libnvrtc"}, {"cuBLAS", "libcublas"}, {"NCCL", "libnccl"},
	} {
		line := lines[2+i]
		require.True(t, strings.HasPrefix(line, lib.name+": "), "line %q should start with %q", line, lib.name+": ")
		if reason, missing := strings.CutPrefix(line, lib.name+": not loaded: "); missing {
			assert.Contains(t, reason, lib.file, "the reason should name the library")
			t.Logf("%s", line)
			continue
		}
		assert.Regexp(t, `^`+lib.name+`: (\d+\.\d+(\.\d+)? \(.+\)|version unknown \(.+\): .+)$`, line)
	}
	if p := cuda.Probe(); !p.Available && strings.Contains(p.Reason, "did not load") {
		assert.True(t, strings.HasPrefix(lines[2], "driver: not loaded: "), "no driver here, yet: %q", lines[2])
	}
}

// TestVersionCUDALines shows the lines for libraries this machine may not
// have: loaded ones, and a reason spread over lines kept on one.
func TestVersionCUDALines(t *testing.T) {
	saved := cudaLibraryVersions
	t.Cleanup(func() { cudaLibraryVersions = saved })
	cudaLibraryVersions = func() []cuda.LibraryVersion {
		return []cuda.LibraryVersion{
			{Name: "driver", Version: "13.0", Path: "libcuda.so.1"},
			{Name: "NVRTC", Version: "13.0", Path: "libnvrtc.so.13"},
			{Name: "cuBLAS", Version: "13.1.0", Path: "/usr/local/cuda/lib64/libcublas.so.13"},
			{Name: "NCCL", Err: errors.New("nccl unavailable: cannot load libnccl.so.2\n(no such file)")},
		}
	}
	r := hirrun("version", "--backend", "cuda")
	expectCode(t, r, exitOK)
	_, libs, _ := strings.Cut(r.stdout, "\n")
	_, libs, _ = strings.Cut(libs, "\n")
	assert.Equal(t, `driver: 13.0 (libcuda.so.1)
NVRTC: 13.0 (libnvrtc.so.13)
cuBLAS: 13.1.0 (/usr/local/cuda/lib64/libcublas.so.13)
NCCL: not loaded: nccl unavailable: cannot load libnccl.so.2 (no such file)
`, libs)
}
