package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hirlab/hir/ir"
)

// The auto table: what `hirrun bench` measured on a machine, which `auto`
// then follows. For each collective, world size, dtype class and size
// bucket it ranks the algorithms that ran, fastest first; auto takes the
// first whose symmetric-heap needs the call's operands meet (and NCCL
// only where it loads), and the compiled-in choice (defaultAlgo) when the
// table has nothing that fits, has no entry for the call, or does not
// exist. The ranks of a job use a table only when every rank loaded the
// same bytes (commSetup), so they always pick alike.

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
		var ranked []string
		for _, w := range e.Ranked {
			a, ok := ir.ParseAlgo(w)
			if _, known := ir.LookupRule(op, a); ok && known && a != ir.AlgoAuto {
				ranked = append(ranked, w)
			}
		}
		if len(ranked) == 0 {
			continue
		}
		e.Ranked = ranked
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

// Save writes the table to path (its directory made, private to the user),
// through a temporary file and a rename.
func (t *AutoTable) Save(path string) error {
	data, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".collectives-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Merge is t with the entries of old that t does not measure again: old's
// entries for collectives, world sizes or dtype classes t has no entry
// for (old measured on another device counts for nothing).
func (t *AutoTable) Merge(old *AutoTable) *AutoTable {
	out := *t
	out.Entries = nil
	if old != nil && old.Device == t.Device {
		type key struct {
			op, class string
			world     int
		}
		fresh := map[key]bool{}
		for _, e := range t.Entries {
			fresh[key{e.Op, e.Class, e.World}] = true
		}
		for _, e := range old.Entries {
			if !fresh[key{e.Op, e.Class, e.World}] {
				out.Entries = append(out.Entries, e)
			}
		}
	}
	out.Entries = append(out.Entries, t.Entries...)
	return &out
}

// Ranked is the table's ranking for a call of op over world ranks of dtype
// dt moving bytes (as benchBytes counts them), or nil when it has none.
// Words that name no algorithm are left out (LoadAutoTable drops them).
func (t *AutoTable) Ranked(op ir.Opcode, world int, dt ir.DType, bytes int64) []ir.Algo {
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
	out := make([]ir.Algo, 0, len(best.Ranked))
	for _, w := range best.Ranked {
		if a, ok := ir.ParseAlgo(w); ok {
			out = append(out, a)
		}
	}
	return out
}

// CollFigure is one measured point of MeasureCollectives: the slowest
// rank's mean time per call.
type CollFigure struct {
	Op     string  `json:"collective"`
	Algo   string  `json:"algo"`
	DType  string  `json:"dtype"`
	World  int     `json:"world"`
	Bytes  int64   `json:"bytes"`
	Iters  int     `json:"iters"`
	Micros float64 `json:"us"`
	Err    string  `json:"error,omitempty"`
}

// BusGBps is the figure's bus bandwidth as nccl-tests defines it:
// bytes/time × 2(D−1)/D for all_reduce, × (D−1)/D for the others.
func (f CollFigure) BusGBps() float64 {
	if f.Micros <= 0 {
		return 0
	}
	factor := float64(f.World-1) / float64(f.World)
	if f.Op == ir.OpAllReduce.String() {
		factor *= 2
	}
	return float64(f.Bytes) / (f.Micros * 1e-6) * factor / 1e9
}

// BuildAutoTable ranks the algorithms of every measured point, fastest
// first (figures with an error are left out).
func BuildAutoTable(device, created string, figs []CollFigure) *AutoTable {
	type key struct {
		op, class string
		world     int
		bytes     int64
	}
	groups := map[key][]CollFigure{}
	var keys []key
	for _, f := range figs {
		dt, ok := ir.ParseDType(f.DType)
		if f.Err != "" || f.Micros <= 0 || !ok {
			continue
		}
		k := key{f.Op, DTypeClass(dt), f.World, f.Bytes}
		if _, seen := groups[k]; !seen {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], f)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.world != b.world {
			return a.world < b.world
		}
		if a.class != b.class {
			return a.class < b.class
		}
		return a.bytes < b.bytes
	})
	t := &AutoTable{Version: AutoTableVersion, Device: device, Created: created}
	for _, k := range keys {
		g := groups[k]
		// The fastest per algorithm (two dtypes of one class both measured).
		bestOf := map[string]float64{}
		for _, f := range g {
			if v, ok := bestOf[f.Algo]; !ok || f.Micros < v {
				bestOf[f.Algo] = f.Micros
			}
		}
		e := AutoEntry{Op: k.op, World: k.world, Class: k.class, Bytes: k.bytes, Micros: bestOf}
		for a := range bestOf {
			e.Ranked = append(e.Ranked, a)
		}
		sort.Slice(e.Ranked, func(i, j int) bool {
			if bestOf[e.Ranked[i]] != bestOf[e.Ranked[j]] {
				return bestOf[e.Ranked[i]] < bestOf[e.Ranked[j]]
			}
			return e.Ranked[i] < e.Ranked[j]
		})
		t.Entries = append(t.Entries, e)
	}
	return t
}

// loadAutoTableFor loads the table for a device named device: the table
// (nil when there is none to use), a digest of its bytes the ranks
// compare ("none" without one), and what became of it, in words.
func loadAutoTableFor(device string) (*AutoTable, string, string) {
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

// AutoTableNote says which auto table this device's collectives follow
// (after its first collective), or why none.
func (d *Device) AutoTableNote() string {
	d.comm.mu.Lock()
	defer d.comm.mu.Unlock()
	if !d.comm.ready {
		return "not loaded yet (at the first collective)"
	}
	return d.comm.tableNote
}
