package coll

import (
	"os"
	"strconv"

	"github.com/hirlab/hir/codegen"
)

// envMatmul picks compute's matmul: "tiled": never cuBLAS; "cublas": fail
// rather than fall back (Tuning.Matmul).
const EnvMatmul = "HIR_CUDA_MATMUL"

// Tuning is the CUDA runtime's tuning knobs: the collectives' thresholds
// and ring geometry, the copy-engine switches, the matmul path and launch
// checking. A Device reads its Tuning from Options.Tuning, or, where that
// is nil, from the environment when it opens (TuningFromEnv); nothing
// reads these variables anywhere else. docs/RUNTIME-CUDA.md ("Tuning
// knobs") has the table of variables, defaults and meanings.
type Tuning struct {
	// AutoOneShotMax is the largest all_reduce (bytes) auto runs one_shot
	// for on two ranks without a measured table, past what ll takes
	// (HIR_COLL_AUTO_ONESHOT_MAX).
	AutoOneShotMax int64
	// AutoRingMin is the smallest all_reduce (bytes) auto runs as the ring
	// on more than two ranks without a measured table; 0: never
	// (HIR_COLL_AUTO_RING_MIN).
	AutoRingMin int64
	// LLMax is the largest all_reduce (bytes) one_shot runs through the LL
	// kernel, at most llCapBytes; 0 turns it off (HIR_COLL_LL_MAX).
	LLMax int64
	// LLTwoShotMin is the smallest all_reduce (bytes) the LL protocol
	// runs in two hops (hir_ll2: reduce-scatter, then all-gather) on
	// more than two ranks; 0: always on more than two, negative: never
	// (HIR_COLL_LL_TWO_SHOT_MIN).
	LLTwoShotMin int64
	// LLBulkMin is the largest piece (bytes one rank sends one peer; a
	// chunk for the two-hop all_reduce) algo=ll sends as LL or LL128
	// lines; larger pieces go in bulk: plain data, a flag per block and
	// peer (HIR_COLL_LL_BULK_MIN; negative: always bulk; 0: by the world,
	// llBulkMinByWorld).
	LLBulkMin int64
	// LL128Min is the largest piece algo=ll sends as LL lines (16 bytes
	// carry 8); larger pieces, up to LLBulkMin, go as LL128 lines (128
	// bytes carry 120; kernels/collective.cu, "LL128")
	// (HIR_COLL_LL128_MIN; negative: never LL128).
	LL128Min int64
	// TwoShotBulk: two_shot all_reduce runs its first hop in bulk through
	// the LL bulk staging (pushes, no barrier) where a chunk fits it,
	// rather than reading the peers' inputs between barriers
	// (HIR_COLL_TWO_SHOT_BULK=0: never).
	TwoShotBulk bool
	// BulkPortion is the bytes of a piece each block of a bulk launch
	// moves (the grid: one block per portion, at most the agreed block
	// count) (HIR_COLL_BULK_PORTION, at least 1 KiB).
	BulkPortion int64
	// Blocks caps a collective kernel's grid; 0: one block per
	// multiprocessor (HIR_COLL_BLOCKS). At most maxBlocks either way.
	Blocks int
	// CEPush: copy_engine pushes each rank's shard into the peers'
	// symmetric outputs rather than pulling (HIR_COLL_CE_PUSH=0: pull).
	CEPush bool
	// TwoShotCEMin is the smallest all_reduce (bytes) two_shot runs with
	// its all-gather half on the copy engines; 0: never
	// (HIR_COLL_TWO_SHOT_CE_MIN).
	TwoShotCEMin int64
	// AllToAllCEMin is the smallest all_to_all (bytes) one_shot pushes
	// through the copy engines; 0: never (HIR_COLL_A2A_CE_MIN).
	AllToAllCEMin int64
	// RSCEChunk: reduce_scatter copy_engine pulls and reduces its block in
	// chunks of this many bytes, a chunk's reduce overlapping the next
	// chunk's pulls (double-buffered); 0: the whole block at once
	// (HIR_COLL_RS_CE_CHUNK; rounded down to 16 bytes, at least 1 MiB).
	// Off by default: not yet timed on a GPU.
	RSCEChunk int64
	// AutoCEMin is the smallest all_gather output (bytes) auto sends
	// through the copy engines; 0: never (HIR_COLL_AUTO_CE_MIN).
	AutoCEMin int64
	// Ring is the ring algorithm's geometry: blocks, segment bytes,
	// staging slots and waves (HIR_COLL_RING_BLOCKS, _SEG, _SLOTS, _WAVE).
	RingBlocks, RingSeg, RingSlots int64
	RingWave                       bool
	// Matmul is "" (cuBLAS where it can, else the tiled kernel), "tiled"
	// (never cuBLAS) or "cublas" (fail rather than fall back)
	// (HIR_CUDA_MATMUL).
	Matmul string
	// BlasWorkspace is the bytes of device memory cuBLAS gets as its
	// workspace, allocated with the handle, as PyTorch gives it on Hopper
	// (32 MiB): a captured matmul then picks its algorithm as an eager one
	// does. 0: cuBLAS's own pool (HIR_CUBLAS_WORKSPACE).
	BlasWorkspace int64
	// TransferSMMax is the largest contiguous one-sided transfer (bytes)
	// posted as a copy kernel through the peer mapping (SM loads and
	// stores) rather than a cuMemcpyAsync on the copy engines, whose
	// start-up dominates small copies; 0: always the copy engines
	// (HIR_XFER_SM_MAX). Default 1 MiB: with programmatic dependent
	// launch the kernel took less GPU time than the copy engines at every
	// size measured on 2 H200s, 8 B to 1 MiB (RUNTIME-CUDA.md).
	TransferSMMax int64
	// CheckLaunches synchronises after every compute launch, so a fault
	// names the op that caused it (HIR_CUDA_CHECK_LAUNCHES=1).
	CheckLaunches bool
	// CodegenUnroll is how many 16-byte vectors a thread of a generated
	// flat kernel loads at once (HIR_CODEGEN_UNROLL, 1 to 8), and
	// CodegenBlocksPerSM how many blocks per multiprocessor a generated
	// kernel's grid holds at most (HIR_CODEGEN_BLOCKS_PER_SM, 1 to 32):
	// codegen.Tuning.
	CodegenUnroll, CodegenBlocksPerSM int
	// CodegenScalarColumns: columns reductions without 16-byte vectors
	// (HIR_CODEGEN_SCALAR_COLUMNS=1; codegen.Tuning.ScalarColumns).
	CodegenScalarColumns bool
	// CodegenScalarRows: rows reductions without 16-byte vectors
	// (HIR_CODEGEN_SCALAR_ROWS=1; codegen.Tuning.ScalarRows).
	CodegenScalarRows bool
	// CodegenCapped: flat and columns kernels on a grid of at most
	// CodegenBlocksPerSM blocks per multiprocessor looping over their
	// work, not one that covers it once (HIR_CODEGEN_CAPPED=1;
	// codegen.Tuning.Capped).
	CodegenCapped bool
	// PDL launches the runtime's own kernels with programmatic dependent
	// launch where the device has it (gpu.Device.LaunchOwn): a kernel's
	// launch overlaps the end of the one before it (HIR_PDL=0: never).
	PDL bool
}

// DefaultTuning is the Tuning with no variable set.
func DefaultTuning() Tuning {
	return Tuning{
		AutoOneShotMax: 64 << 20,
		AutoRingMin:    64 << 20,
		LLMax:          oneShotLLMax,
		LLTwoShotMin:   256 << 10,
		LLBulkMin:      0,
		LL128Min:       64 << 10,
		TwoShotBulk:    true,
		BulkPortion:    8 << 10,
		CEPush:         true,
		TwoShotCEMin:   128 << 20,
		AllToAllCEMin:  256 << 20,
		AutoCEMin:      256 << 20,
		RingBlocks:     RingDefault.Blocks, RingSeg: RingDefault.Seg, RingSlots: RingDefault.Slots, RingWave: RingDefault.Wave,
		BlasWorkspace: 32 << 20,
		TransferSMMax: 1 << 20,
		CodegenUnroll: codegen.DefaultTuning.Unroll, CodegenBlocksPerSM: codegen.DefaultTuning.BlocksPerSM,
		PDL: true,
	}
}

// TuningFromEnv is DefaultTuning with the environment's knobs applied; a
// value that does not parse, or is out of range, leaves the default.
func TuningFromEnv() Tuning {
	t := DefaultTuning()
	if v, ok := envInt("HIR_COLL_AUTO_ONESHOT_MAX"); ok && v >= 0 {
		t.AutoOneShotMax = v
	}
	if v, ok := envInt("HIR_COLL_AUTO_RING_MIN"); ok && v >= 0 {
		t.AutoRingMin = v
	}
	if v, ok := envInt("HIR_COLL_LL_MAX"); ok && v >= 0 {
		t.LLMax = min(v, LlCapBytes)
	}
	if v, ok := envInt("HIR_COLL_LL_TWO_SHOT_MIN"); ok {
		t.LLTwoShotMin = v
	}
	if v, ok := envInt("HIR_COLL_LL_BULK_MIN"); ok {
		t.LLBulkMin = v
	}
	if v, ok := envInt("HIR_COLL_LL128_MIN"); ok {
		t.LL128Min = v
	}
	t.TwoShotBulk = os.Getenv("HIR_COLL_TWO_SHOT_BULK") != "0"
	if v, ok := envInt("HIR_COLL_BULK_PORTION"); ok && v >= 1<<10 {
		t.BulkPortion = v
	}
	if v, err := strconv.Atoi(os.Getenv("HIR_COLL_BLOCKS")); err == nil && v > 0 {
		t.Blocks = v
	}
	t.CEPush = os.Getenv("HIR_COLL_CE_PUSH") != "0"
	if v, ok := envInt("HIR_COLL_TWO_SHOT_CE_MIN"); ok && v >= 0 {
		t.TwoShotCEMin = v
	}
	if v, ok := envInt("HIR_COLL_A2A_CE_MIN"); ok && v >= 0 {
		t.AllToAllCEMin = v
	}
	if v, ok := envInt("HIR_COLL_RS_CE_CHUNK"); ok && v >= 0 {
		t.RSCEChunk = v
		if v > 0 {
			t.RSCEChunk = max(v, 1<<20) &^ 15
		}
	}
	if v, ok := envInt("HIR_COLL_AUTO_CE_MIN"); ok && v >= 0 {
		t.AutoCEMin = v
	}
	if v, ok := envInt("HIR_CODEGEN_UNROLL"); ok && v >= 1 && v <= 8 {
		t.CodegenUnroll = int(v)
	}
	if v, ok := envInt("HIR_CODEGEN_SCALAR_COLUMNS"); ok {
		t.CodegenScalarColumns = v == 1
	}
	if v, ok := envInt("HIR_CODEGEN_SCALAR_ROWS"); ok {
		t.CodegenScalarRows = v == 1
	}
	if v, ok := envInt("HIR_CODEGEN_CAPPED"); ok {
		t.CodegenCapped = v == 1
	}
	if v, ok := envInt("HIR_CODEGEN_BLOCKS_PER_SM"); ok && v >= 1 && v <= 32 {
		t.CodegenBlocksPerSM = int(v)
	}
	if v, ok := envInt("HIR_XFER_SM_MAX"); ok && v >= 0 {
		t.TransferSMMax = v
	}
	if v, ok := envInt("HIR_CUBLAS_WORKSPACE"); ok && v >= 0 {
		t.BlasWorkspace = v
	}
	if v, ok := envInt("HIR_COLL_RING_BLOCKS"); ok && v > 0 {
		t.RingBlocks = min(v, MaxBlocks)
	}
	if v, ok := envInt("HIR_COLL_RING_SEG"); ok && v >= 16 {
		t.RingSeg = min(v/16*16, 64<<20)
	}
	if v, ok := envInt("HIR_COLL_RING_SLOTS"); ok && v > 0 {
		t.RingSlots = min(max(v, 2), 16)
	}
	switch os.Getenv("HIR_COLL_RING_WAVE") {
	case "1":
		t.RingWave = true
	case "0":
		t.RingWave = false
	}
	t.Matmul = os.Getenv(EnvMatmul)
	t.CheckLaunches = os.Getenv("HIR_CUDA_CHECK_LAUNCHES") == "1"
	t.PDL = os.Getenv("HIR_PDL") != "0"
	return t
}

func envInt(name string) (int64, bool) {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	return v, err == nil
}

// ring is the ring geometry t sets.
func (t *Tuning) Ring() RingGeom {
	return RingGeom{Blocks: t.RingBlocks, Seg: t.RingSeg, Slots: t.RingSlots, Wave: t.RingWave}
}

// setRing sets t's ring geometry to g.
func (t *Tuning) SetRing(g RingGeom) {
	t.RingBlocks, t.RingSeg, t.RingSlots, t.RingWave = g.Blocks, g.Seg, g.Slots, g.Wave
}
