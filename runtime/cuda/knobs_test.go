package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
)

// TestTuningFromEnv: the defaults are the compiled-in values, and each
// variable parses and clamps as documented (docs/RUNTIME-CUDA.md).
func TestTuningFromEnv(t *testing.T) {
	for _, k := range []string{"HIR_COLL_AUTO_ONESHOT_MAX", "HIR_COLL_LL_MAX", "HIR_COLL_LL_TWO_SHOT_MIN", "HIR_COLL_BLOCKS", "HIR_COLL_CE_PUSH",
		"HIR_COLL_TWO_SHOT_CE_MIN", "HIR_COLL_A2A_CE_MIN", "HIR_COLL_RS_CE_CHUNK", "HIR_COLL_AUTO_CE_MIN", "HIR_COLL_RING_BLOCKS", "HIR_COLL_RING_SEG",
		"HIR_COLL_RING_SLOTS", "HIR_COLL_RING_WAVE", coll.EnvMatmul, "HIR_CUDA_CHECK_LAUNCHES", "HIR_CUBLAS_WORKSPACE", "HIR_XFER_SM_MAX",
		"HIR_COLL_LL_BULK_MIN", "HIR_COLL_LL128_MIN", "HIR_COLL_TWO_SHOT_BULK", "HIR_COLL_BULK_PORTION", "HIR_COLL_AUTO_RING_MIN",
		"HIR_CODEGEN_UNROLL", "HIR_CODEGEN_BLOCKS_PER_SM", "HIR_CODEGEN_SCALAR_COLUMNS", "HIR_CODEGEN_UNCAPPED", "HIR_PDL"} {
		t.Setenv(k, "")
	}
	def := coll.Tuning{AutoOneShotMax: 64 << 20, AutoRingMin: 64 << 20, LLMax: 256 << 10, LLTwoShotMin: 256 << 10, LLBulkMin: 0, LL128Min: 64 << 10, TwoShotBulk: true, BulkPortion: 8 << 10, CEPush: true, TwoShotCEMin: 128 << 20, AllToAllCEMin: 256 << 20, AutoCEMin: 256 << 20,
		RingBlocks: 128, RingSeg: 256 << 10, RingSlots: 4, RingWave: true, BlasWorkspace: 32 << 20, TransferSMMax: 1 << 20,
		CodegenUnroll: codegen.DefaultTuning.Unroll, CodegenBlocksPerSM: codegen.DefaultTuning.BlocksPerSM, PDL: true}
	require.Equal(t, def, coll.TuningFromEnv(), "defaults")
	require.Equal(t, def, coll.DefaultTuning(), "defaults")
	t.Setenv("HIR_COLL_AUTO_ONESHOT_MAX", "0")
	t.Setenv("HIR_COLL_LL_MAX", "999999999")
	t.Setenv("HIR_COLL_LL_TWO_SHOT_MIN", "-1")
	t.Setenv("HIR_COLL_BLOCKS", "7")
	t.Setenv("HIR_COLL_CE_PUSH", "0")
	t.Setenv("HIR_COLL_TWO_SHOT_CE_MIN", "-1")
	t.Setenv("HIR_COLL_A2A_CE_MIN", "0")
	t.Setenv("HIR_COLL_RS_CE_CHUNK", "1000") // below 1 MiB: 1 MiB
	t.Setenv("HIR_COLL_AUTO_CE_MIN", "x")
	t.Setenv("HIR_COLL_RING_BLOCKS", "1000")
	t.Setenv("HIR_COLL_RING_SEG", "4100")
	t.Setenv("HIR_COLL_RING_SLOTS", "1")
	t.Setenv("HIR_COLL_RING_WAVE", "0")
	t.Setenv(coll.EnvMatmul, "tiled")
	t.Setenv("HIR_CUDA_CHECK_LAUNCHES", "1")
	t.Setenv("HIR_CUBLAS_WORKSPACE", "0")
	t.Setenv("HIR_XFER_SM_MAX", "4096")
	t.Setenv("HIR_COLL_LL_BULK_MIN", "-1")
	t.Setenv("HIR_COLL_LL128_MIN", "-1")
	t.Setenv("HIR_COLL_TWO_SHOT_BULK", "0")
	t.Setenv("HIR_COLL_BULK_PORTION", "100")
	t.Setenv("HIR_COLL_AUTO_RING_MIN", "0")
	t.Setenv("HIR_CODEGEN_UNROLL", "4")
	t.Setenv("HIR_CODEGEN_BLOCKS_PER_SM", "33") // out of range: the default
	t.Setenv("HIR_CODEGEN_SCALAR_COLUMNS", "1")
	t.Setenv("HIR_CODEGEN_SCALAR_ROWS", "1")
	t.Setenv("HIR_CODEGEN_CAPPED", "1")
	t.Setenv("HIR_PDL", "0")
	want := def
	want.CodegenScalarColumns, want.CodegenScalarRows, want.CodegenCapped = true, true, true
	want.PDL = false
	want.AllToAllCEMin, want.RSCEChunk = 0, 1<<20
	want.CodegenUnroll = 4
	want.LLBulkMin, want.LL128Min, want.TwoShotBulk, want.AutoRingMin = -1, -1, false, 0
	want.AutoOneShotMax, want.LLMax, want.LLTwoShotMin, want.Blocks, want.CEPush = 0, coll.LlCapBytes, -1, 7, false
	want.RingBlocks, want.RingSeg, want.RingSlots, want.RingWave = coll.MaxBlocks, 4096, 2, false
	want.Matmul, want.CheckLaunches, want.BlasWorkspace, want.TransferSMMax = "tiled", true, 0, 4096
	require.Equal(t, want, coll.TuningFromEnv())
	require.Equal(t, coll.RingGeom{Blocks: coll.MaxBlocks, Seg: 4096, Slots: 2}, want.Ring(), "ring")
}
