package cuda

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
)

// The collectives (package internal/coll: the plan, the (op, algo) table,
// the one_shot, two_shot, ring, ll and copy-engine algorithms, the signal
// pads, NCCL, send/recv, the knobs and auto's measured table) are
// internal; what they offer the package's users is named here.

// AutoTableEnv names the variable that overrides where the table lives:
// a file path, or "off" (also "0", "none", "false") for no table.
const AutoTableEnv = autotable.AutoTableEnv

// AutoTableVersion is the format version a table file carries.
const AutoTableVersion = autotable.AutoTableVersion

type (
	AutoTable = autotable.AutoTable
	AutoEntry = autotable.AutoEntry
	Tuning    = coll.Tuning
)

// ErrCollectiveTimeout matches the error of a collective whose kernel
// waited too long for a peer.
var ErrCollectiveTimeout = coll.ErrCollectiveTimeout

// DTypeClass is the class a dtype's figures are filed under: its element
// width (autotable.DTypeClass).
func DTypeClass(dt ir.DType) string { return autotable.DTypeClass(dt) }

// AutoTablePath is where the table is read and saved: $HIR_COLL_TABLE,
// else os.UserCacheDir()/hir/collectives.json. It is "" when the table is
// turned off.
func AutoTablePath() (string, error) { return autotable.AutoTablePath() }

// ParseAutoTable reads a table, dropping entries it cannot use (an unknown
// collective, algorithms the collective does not have).
func ParseAutoTable(data []byte) (*AutoTable, error) { return autotable.ParseAutoTable(data) }

// LoadAutoTable reads the table at path; a missing file is (nil, nil).
func LoadAutoTable(path string) (*AutoTable, error) { return autotable.LoadAutoTable(path) }

// BenchCall is the collective call that benchmarks op on n elements of dt
// over D ranks (autotable.BenchCall); false where op is not benchmarked or n is
// smaller than the world.
func BenchCall(op ir.Opcode, dt ir.DType, n int64, D int, inB, outB runtime.Buffer) (runtime.CollectiveCall, bool) {
	return autotable.BenchCall(op, dt, n, D, inB, outB)
}

// NCCLVersion is the version of the NCCL this process loaded, or an error
// saying why it cannot load it.
func NCCLVersion() (string, error) { return coll.NCCLVersion() }

// DefaultTuning is the Tuning with no variable set.
func DefaultTuning() Tuning { return coll.DefaultTuning() }

// TuningFromEnv is DefaultTuning with the environment's knobs applied; a
// value that does not parse, or is out of range, leaves the default.
func TuningFromEnv() Tuning { return coll.TuningFromEnv() }
