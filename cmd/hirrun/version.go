package main

import (
	"flag"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/hirlab/hir/runtime/cuda"
)

type versionOptions struct{ backend string }

var versionCommand = &command{
	name:    "version",
	args:    "[--backend cuda]",
	summary: "print the versions of hir and Go (and of the CUDA libraries)",
	help: `Prints hir's module version with the VCS revision and commit time it was
built from (and "modified" when the tree had uncommitted changes), then the
Go version and GOOS/GOARCH:

  hir v0.0.0-20261123180000-abc123def456+dirty (rev abc123def456..., 2026-11-23T18:00:00Z, modified)
  go go1.26.0 linux/amd64

The revision is what go build and go install stamp into a binary built in
a git checkout; go run, -buildvcs=false and builds outside a checkout carry
none, and the line reads "hir (devel) (rev unknown)".

With --backend cuda, also one line for each library the CUDA runtime
loads, with the version it reports and the file it came from, or why it
did not load ("not loaded: <why>"; the command still succeeds):

  driver: 13.0 (libcuda.so.1)
  NVRTC: 13.0 (libnvrtc.so.13)
  cuBLAS: 13.1.0 (libcublas.so.13)
  NCCL: not loaded: nccl unavailable: cannot load libnccl.so.2 (...)

--backend sim (the CPU runtime, built in) adds nothing.`,
	flags: func(fs *flag.FlagSet) any {
		o := &versionOptions{}
		fs.StringVar(&o.backend, "backend", "", "also print the versions of what this backend loads (cuda; sim has nothing to load)")
		return o
	},
	run: func(c *cli, opts any, args []string) int { return c.version(opts.(*versionOptions), args) },
}

// cudaLibraryVersions is what version --backend cuda prints; tests replace
// it to see the lines of libraries this machine does not have.
var cudaLibraryVersions = cuda.LibraryVersions

func (c *cli) version(o *versionOptions, args []string) int {
	if len(args) != 0 {
		c.errorf("version: takes no arguments, got %q", args)
		return exitUsage
	}
	switch o.backend {
	case "", "sim", "cuda":
	default:
		c.errorf("version: unknown --backend %q (cuda or sim)", o.backend)
		return exitUsage
	}
	bi, ok := debug.ReadBuildInfo()
	writeBuildVersion(c.stdout, bi, ok)
	if o.backend == "cuda" {
		for _, v := range cudaLibraryVersions() {
			// One line each, whatever the library's error says.
			fmt.Fprintln(c.stdout, strings.ReplaceAll(v.String(), "\n", " "))
		}
	}
	return exitOK
}

// writeBuildVersion prints the "hir ..." and "go ..." lines from the build
// information (ok is false where the binary carries none).
func writeBuildVersion(w io.Writer, bi *debug.BuildInfo, ok bool) {
	version, goVersion := "(unknown)", goruntime.Version()
	var details []string
	if ok && bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			details = append(details, "rev "+rev)
		} else {
			details = append(details, "rev unknown")
		}
		if t := settings["vcs.time"]; t != "" {
			details = append(details, t)
		}
		if settings["vcs.modified"] == "true" {
			details = append(details, "modified")
		}
	} else {
		details = append(details, "no build information")
	}
	fmt.Fprintf(w, "hir %s (%s)\n", version, strings.Join(details, ", "))
	fmt.Fprintf(w, "go %s %s/%s\n", goVersion, goruntime.GOOS, goruntime.GOARCH)
}
