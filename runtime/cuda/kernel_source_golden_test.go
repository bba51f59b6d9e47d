package cuda

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/kernels"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/kernel_sources.golden from the current sources")

// generatedSources is every CUDA C source the package hands NVRTC: the
// data-movement module, each dtype's reducing module (and the error for a
// dtype without one), and the strided-copy kernels.
func generatedSources() []struct{ name, src string } {
	out := []struct{ name, src string }{{"move", coll.MoveModuleSource()}}
	for _, dt := range ir.AllDTypes {
		s, err := coll.ReduceModuleSource(dt)
		if err != nil {
			s = "error: " + err.Error()
		}
		out = append(out, struct{ name, src string }{"reduce_" + dt.String(), s})
	}
	out = append(out, struct{ name, src string }{"strided_copy", kernels.StridedCopy})
	return out
}

// TestKernelSourcesGolden pins the exact bytes of every generated kernel
// source (length and SHA-256), so moving the CUDA C between files cannot
// change what NVRTC compiles. go test -run TestKernelSourcesGolden -update
// rewrites the golden after a deliberate change to a kernel.
func TestKernelSourcesGolden(t *testing.T) {
	var b strings.Builder
	for _, s := range generatedSources() {
		fmt.Fprintf(&b, "%s %d %x\n", s.name, len(s.src), sha256.Sum256([]byte(s.src)))
	}
	// From the repository root too: the GPU machine runs the test binary there.
	path := repoFile(filepath.Join("runtime", "cuda", "testdata", "kernel_sources.golden"))
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String(), "generated kernel sources changed (go test -run TestKernelSourcesGolden -update after a deliberate change)")
}
