package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/kernels"
)

func TestCollArgsLayout(t *testing.T) {
	var a coll.CollArgs
	require.Equal(t, uintptr(coll.CollArgsSize), unsafe.Sizeof(a), "collArgs bytes")
	require.Len(t, a.Bytes(), coll.CollArgsSize, "bytes()")
	assert.Equal(t, uintptr(600), unsafe.Offsetof(a.Chunk), "offset of Chunk")
	assert.Equal(t, uintptr(768), unsafe.Offsetof(a.Rank), "offset of Rank")
	assert.LessOrEqual(t, coll.StatusWords*8, 1<<20, "status bytes")
	assert.LessOrEqual(t, coll.MaxChannels*coll.ChannelPad, 2<<20, "pads bytes")
}

// clangShim gives clang (CUDA mode, without a CUDA installation) what NVRTC
// provides implicitly, so the kernels can be type-checked here.
const clangShim = `
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n) __attribute__((launch_bounds(n)))
#define __grid_constant__
#include <__clang_cuda_builtin_vars.h>
`

// TestCollectiveSourcesCompileWithClang type-checks every collective
// module with clang's CUDA front end where clang is installed (the GPU
// machine compiles them with NVRTC; this catches mistakes before that).
func TestCollectiveSourcesCompileWithClang(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang is not installed")
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "shim.h")
	require.NoError(t, os.WriteFile(shim, []byte(clangShim), 0o600))
	srcs := map[string]string{"move": coll.MoveModuleSource()}
	for dt := range kernels.ReduceDTypes {
		s, err := coll.ReduceModuleSource(dt)
		require.NoError(t, err)
		srcs[dt.String()] = s
	}
	for name, src := range srcs {
		src += collArgsOffsetAsserts()
		path := filepath.Join(dir, name+".cu")
		require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
		out, err := exec.Command(clang, "-x", "cuda", "--cuda-gpu-arch=sm_80", "-nocudainc", "-nocudalib",
			"--cuda-device-only", "-std=c++17", "-include", shim, "-S", "-o", filepath.Join(dir, name+".ptx"), path).CombinedOutput()
		if !assert.NoError(t, err, "%s\n%s", name, out) {
			continue
		}
		ptx, _ := os.ReadFile(filepath.Join(dir, name+".ptx"))
		// assert.True, not assert.Contains: a failure would print the whole PTX.
		for _, want := range []string{"ld.relaxed.sys.global.u64", "st.relaxed.sys.global.u64", "fence.acq_rel.sys", "%globaltimer"} {
			assert.True(t, strings.Contains(string(ptx), want), "%s: PTX lacks %s", name, want)
		}
		if name != "move" {
			assert.True(t, strings.Contains(string(ptx), ".entry hir_reduce_"), "%s: PTX has no reduce entry", name)
		}
	}
	_ = ir.F32
}

// collArgsOffsetAsserts checks CollArgs's field offsets in C against the Go
// struct's. Only clang gets them: NVRTC has no offsetof.
func collArgsOffsetAsserts() string {
	var a coll.CollArgs
	var b strings.Builder
	for _, f := range []struct {
		name string
		off  uintptr
	}{
		{"src", unsafe.Offsetof(a.Src)}, {"dst", unsafe.Offsetof(a.Dst)}, {"pad", unsafe.Offsetof(a.Pad)},
		{"stage", unsafe.Offsetof(a.Stage)}, {"status", unsafe.Offsetof(a.Status)}, {"work", unsafe.Offsetof(a.Work)},
		{"base", unsafe.Offsetof(a.Base)}, {"epochs", unsafe.Offsetof(a.Epochs)}, {"nsig", unsafe.Offsetof(a.NSig)},
		{"timeout_ns", unsafe.Offsetof(a.TimeoutNS)}, {"n", unsafe.Offsetof(a.N)},
		{"tail_start", unsafe.Offsetof(a.TailStart)}, {"tail_end", unsafe.Offsetof(a.TailEnd)}, {"seg", unsafe.Offsetof(a.Seg)},
		{"nseg", unsafe.Offsetof(a.NSeg)}, {"chunk", unsafe.Offsetof(a.Chunk)}, {"ls", unsafe.Offsetof(a.Ls)},
		{"ld", unsafe.Offsetof(a.Ld)}, {"rank", unsafe.Offsetof(a.Rank)}, {"world", unsafe.Offsetof(a.World)},
		{"channel", unsafe.Offsetof(a.Channel)}, {"ntask", unsafe.Offsetof(a.NTask)}, {"mode", unsafe.Offsetof(a.Mode)},
		{"nout", unsafe.Offsetof(a.NOut)}, {"peer", unsafe.Offsetof(a.Peer)}, {"xtra", unsafe.Offsetof(a.Xtra)},
	} {
		fmt.Fprintf(&b, "static_assert(__builtin_offsetof(CollArgs, %s) == %d, \"CollArgs.%s\");\n", f.name, f.off, f.name)
	}
	return b.String()
}

// Every kernel the launch sides name is found, by reading the sources,
// in the module that defines it: the data-movement kernels in
// hir_comm_move (though every reducing module carries them too), each
// dtype's reducing kernels in its own module, and nothing else.
func TestCollectiveKernelsFoundInSources(t *testing.T) {
	index, err := coll.CommKernels()
	require.NoError(t, err)
	want := map[string]string{"hir_barrier": "hir_comm_move", "hir_copy_v16": "hir_comm_move", "hir_ag_ring_v16": "hir_comm_move",
		"hir_p2p_send": "hir_comm_move", "hir_p2p_recv": "hir_comm_move", "hir_ll_copy": "hir_comm_move", "hir_ll128_copy": "hir_comm_move", "hir_bulk_copy": "hir_comm_move"}
	for _, es := range []int{1, 2, 4, 8} {
		want[fmt.Sprintf("hir_copy_s%d", es)] = "hir_comm_move"
		want[fmt.Sprintf("hir_ag_ring_s%d", es)] = "hir_comm_move"
	}
	for dt := range kernels.ReduceDTypes {
		for _, op := range ir.ReduceOps() {
			if op == ir.ReduceAvg && !dt.IsFloat() {
				continue
			}
			mod := "hir_comm_reduce_" + dt.String()
			for _, name := range []string{kernels.ReduceKernelName(dt, op, true), kernels.ReduceKernelName(dt, op, false), kernels.RingKernelName(dt, op), kernels.LlKernelName(dt, op), kernels.Ll2KernelName(dt, op), kernels.Ll128KernelName(dt, op), kernels.Ll128x2KernelName(dt, op), kernels.BulkKernelName(dt, op), kernels.Bulk2KernelName(dt, op)} {
				want[name] = mod
			}
		}
	}
	for name, mod := range want {
		got, ok := index[name]
		if assert.True(t, ok, "%s: not found, want it in %s", name, mod) {
			assert.Equal(t, mod, got.Key, "%s: in the wrong module", name)
		}
	}
	if len(index) != len(want) {
		for name, m := range index {
			_, ok := want[name]
			assert.True(t, ok, "unexpected kernel %s in %s", name, m.Key)
		}
	}
	_, ok := index["hir_strided_copy_4"]
	assert.False(t, ok, "the strided copy is not a collective kernel")
	got := kernels.Entries("extern \"C\" __global__ void __launch_bounds__(512) hir_a(const CollArgs a) {}\nextern \"C\" __global__ void hir_b(int x) {}\n__global__ void not_entry() {}")
	assert.Equal(t, "hir_a,hir_b", strings.Join(got, ","), "kernelEntries: %v", got)
}
