// Package autotable is the auto table: what `hirrun bench` measured on a
// machine, which algo=auto follows (package coll reads it).
package autotable

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The auto table: what `hirrun bench` measured on a machine, which `auto`
// then follows. For each collective, world size, dtype class and size
// bucket it ranks the algorithms that ran, fastest first; auto takes the
// first whose symmetric-heap needs the call's operands meet (and NCCL
// only where it loads), and the compiled-in choice (coll.Comm.DefaultAlgo) when the
// table has nothing that fits, has no entry for the call, or does not
// exist. The ranks of a job use a table only when every rank loaded the
// same bytes (coll's commSetup), so they always pick alike.

// AutoTableVersion is the format version a table file carries.
const AutoTableVersion = 1

// AutoTableEnv names the variable that overrides where the table lives:
// a file path, or "off" (also "0", "none", "false") for no table.
const AutoTableEnv = "HIR_COLL_TABLE"

// AutoTable is the saved table (JSON).
type AutoTable struct {
	Version int `json:"version"`
	// Device is the GPU the table was measured on (DeviceInfo.Name); a
	// device of another name does not use it.
	Device  string      `json:"device"`
	Created string      `json:"created,omitempty"`
	Entries []AutoEntry `json:"entries"`
}

// AutoEntry is one measured point: the algorithms of one collective for
// one world size, dtype class and size, fastest first. Sizes count as
// nccl-tests counts them (all_gather's output, every other collective's
// input); an entry stands for the sizes above the next smaller entry's
// of the same collective, world and class, up to its own (the smallest
// entry also for everything below it, the largest for everything above).
type AutoEntry struct {
	Op     string             `json:"collective"`
	World  int                `json:"world"`
	Class  string             `json:"dtype_class"`
	Bytes  int64              `json:"bytes"`
	Ranked []string           `json:"ranked"`
	Micros map[string]float64 `json:"us,omitempty"` // time per call of each algorithm
	// RankedGraph is the ranking replayed from CUDA graphs (hirrun bench
	// --graph), which a call captured into a graph follows: a replay has
	// no host cost, so another algorithm may win there. Empty: Ranked.
	RankedGraph []string           `json:"ranked_graph,omitempty"`
	GraphMicros map[string]float64 `json:"graph_us,omitempty"`
}

// DTypeClass is the class a dtype's figures are filed under: its element
// width (the collectives move and reduce memory-bound, so bf16 and f16,
// or f32 and i32, run alike).
func DTypeClass(dt ir.DType) string {
	return fmt.Sprintf("%dbit", 8*dt.Size())
}

// AutoTablePath is where the table is read and saved: $HIR_COLL_TABLE,
// else os.UserCacheDir()/hir/collectives.json. It is "" when the table is
// turned off.
func AutoTablePath() (string, error) {
	if v, ok := os.LookupEnv(AutoTableEnv); ok && v != "" {
		switch strings.ToLower(v) {
		case "off", "0", "none", "false":
			return "", nil
		}
		return v, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the auto table (set %s): %w", AutoTableEnv, err)
	}
	return filepath.Join(dir, "hir", "collectives.json"), nil
}

// ParseAutoTable reads a table, dropping entries it cannot use (an unknown
// collective, algorithms the collective does not have).
func ParseAutoTable(data []byte) (*AutoTable, error) {
	var t AutoTable
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("auto table: %w", err)
	}
	if t.Version != AutoTableVersion {
		return nil, fmt.Errorf("auto table: version %d, this hir reads version %d (run hirrun bench again)", t.Version, AutoTableVersion)
	}
	kept := t.Entries[:0]
	for _, e := range t.Entries {
		op, ok := ir.LookupOpcode(e.Op, 1)
		if !ok || !op.IsCollective() || e.World < 1 || e.Bytes <= 0 {
			continue
		}
		known := func(words []string) []string {
			var out []string
			for _, w := range words {
				a, ok := ir.ParseAlgo(w)
				if _, has := ir.LookupRule(op, a); ok && has && a != ir.AlgoAuto {
					out = append(out, w)
				}
			}
			return out
		}
		ranked := known(e.Ranked)
		if len(ranked) == 0 {
			continue
		}
		e.Ranked, e.RankedGraph = ranked, known(e.RankedGraph)
		kept = append(kept, e)
	}
	t.Entries = kept
	return &t, nil
}

// LoadAutoTable reads the table at path; a missing file is (nil, nil).
func LoadAutoTable(path string) (*AutoTable, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseAutoTable(data)
}

// Ranked is the table's ranking for a call of op over world ranks of dtype
// dt moving bytes (as benchBytes counts them), or nil when it has none.
// Words that name no algorithm are left out (LoadAutoTable drops them).
func (t *AutoTable) Ranked(op ir.Opcode, world int, dt ir.DType, bytes int64) []ir.Algo {
	return t.RankedFor(op, world, dt, bytes, false)
}

// RankedFor is Ranked for a call run eagerly or, with graph, captured into
// a CUDA graph: the graph ranking where the entry has one.
func (t *AutoTable) RankedFor(op ir.Opcode, world int, dt ir.DType, bytes int64, graph bool) []ir.Algo {
	if t == nil {
		return nil
	}
	name, class := op.String(), DTypeClass(dt)
	var best, largest *AutoEntry
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Op != name || e.World != world || e.Class != class {
			continue
		}
		if e.Bytes >= bytes && (best == nil || e.Bytes < best.Bytes) {
			best = e
		}
		if largest == nil || e.Bytes > largest.Bytes {
			largest = e
		}
	}
	if best == nil {
		best = largest
	}
	if best == nil {
		return nil
	}
	words := best.Ranked
	if graph && len(best.RankedGraph) > 0 {
		words = best.RankedGraph
	}
	out := make([]ir.Algo, 0, len(words))
	for _, w := range words {
		if a, ok := ir.ParseAlgo(w); ok {
			out = append(out, a)
		}
	}
	return out
}

// loadAutoTableFor loads the table for a device named device: the table
// (nil when there is none to use), a digest of its bytes the ranks
// compare ("none" without one), and what became of it, in words.
func LoadAutoTableFor(device string) (*AutoTable, string, string) {
	path, err := AutoTablePath()
	if err != nil {
		return nil, "none", err.Error()
	}
	if path == "" {
		return nil, "none", "turned off (" + AutoTableEnv + ")"
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "none", "none at " + path + " (hirrun bench makes it)"
	}
	if err != nil {
		return nil, "none", fmt.Sprintf("unreadable: %v", err)
	}
	t, err := ParseAutoTable(data)
	if err != nil {
		return nil, "none", fmt.Sprintf("%s: %v", path, err)
	}
	if t.Device != "" && t.Device != device {
		return nil, "none", fmt.Sprintf("%s was measured on %s, not %s", path, t.Device, device)
	}
	sum := sha256.Sum256(data)
	return t, hex.EncodeToString(sum[:8]), "from " + path
}

// BenchBytes is the size hirrun bench files a call under, as nccl-tests
// counts it (ir.Layout.SizedByOutput): all_gather's output, every other
// collective's input.
func BenchBytes(op ir.Opcode, in, out runtime.Tensor) int64 {
	if op.Info().Layout.SizedByOutput() {
		return out.Bytes()
	}
	return in.Bytes()
}

// BenchCall is the call hirrun bench times for op over n elements of dt
// (nccl-tests' size: all_gather's output, the other collectives' input)
// on the two symmetric buffers, its shapes and axes those of
// ir.Layout.BenchShapes; false where op is not benchmarked or n is
// smaller than the world. BenchBytes is the size auto's table files it
// under.
func BenchCall(op ir.Opcode, dt ir.DType, n int64, D int, inB, outB runtime.Buffer) (runtime.CollectiveCall, bool) {
	info := op.Info()
	if !info.Benchmarked {
		return runtime.CollectiveCall{}, false
	}
	in, out, axis, concat, ok := info.Layout.BenchShapes(n, D)
	if !ok {
		return runtime.CollectiveCall{}, false
	}
	c := runtime.CollectiveCall{Op: op, ReduceOp: ir.ReduceSum, Axis: axis, ConcatAxis: concat,
		In:  runtime.Tensor{Buf: inB, DType: dt, Shape: in},
		Out: runtime.Tensor{Buf: outB, DType: dt, Shape: out}}
	if !info.Reduces {
		c.ReduceOp = ir.ReduceUnset
	}
	return c, true
}
