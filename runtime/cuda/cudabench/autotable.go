package cudabench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda"
)

// The building side of auto's table (runtime/cuda/autotable.go reads it):
// the figures MeasureCollectives gives, ranked per point, merged with the
// table already saved and written.

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
	// GraphMicros is the time of one call replayed from a CUDA graph of
	// Iters calls (CollBenchOptions.Graph), 0 when not measured.
	GraphMicros float64 `json:"graph_us,omitempty"`
	Err         string  `json:"error,omitempty"`
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
func BuildAutoTable(device, created string, figs []CollFigure) *cuda.AutoTable {
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
		k := key{f.Op, cuda.DTypeClass(dt), f.World, f.Bytes}
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
	t := &cuda.AutoTable{Version: cuda.AutoTableVersion, Device: device, Created: created}
	for _, k := range keys {
		g := groups[k]
		// The fastest per algorithm (two dtypes of one class both
		// measured), eager and replayed from a graph.
		bestOf, bestGraph := map[string]float64{}, map[string]float64{}
		for _, f := range g {
			if v, ok := bestOf[f.Algo]; !ok || f.Micros < v {
				bestOf[f.Algo] = f.Micros
			}
			if v, ok := bestGraph[f.Algo]; f.GraphMicros > 0 && (!ok || f.GraphMicros < v) {
				bestGraph[f.Algo] = f.GraphMicros
			}
		}
		e := cuda.AutoEntry{Op: k.op, World: k.world, Class: k.class, Bytes: k.bytes, Micros: bestOf,
			Ranked: rankBy(bestOf)}
		if len(bestGraph) > 0 {
			e.GraphMicros, e.RankedGraph = bestGraph, rankBy(bestGraph)
		}
		t.Entries = append(t.Entries, e)
	}
	return t
}

// rankBy lists the algorithms of times, fastest first (ties by name).
func rankBy(times map[string]float64) []string {
	out := make([]string, 0, len(times))
	for a := range times {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if times[out[i]] != times[out[j]] {
			return times[out[i]] < times[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// SaveAutoTable writes t to path (its directory made, private to the user),
// through a temporary file and a rename.
func SaveAutoTable(t *cuda.AutoTable, path string) error {
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

// MergeAutoTable is t with the entries of old that t does not measure
// again: old's entries for collectives, world sizes or dtype classes t
// has no entry for (old measured on another device counts for nothing).
func MergeAutoTable(t, old *cuda.AutoTable) *cuda.AutoTable {
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
