package cudabench

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda"
)

// CollBenchOptions says what MeasureCollectives measures.
type CollBenchOptions struct {
	// Sizes are measured from MinBytes to MaxBytes, doubling (0: 8 KiB
	// and 1 GiB). Sizes count as nccl-tests counts them: the all_reduce
	// and all_to_all buffer, all_gather's output, reduce_scatter's input.
	MinBytes, MaxBytes int64
	// Ops are the collectives (nil: all_reduce, all_gather,
	// reduce_scatter, all_to_all); DTypes the dtypes (nil: bf16).
	Ops    []ir.Opcode
	DTypes []ir.DType
	// Warmups calls run untimed before the timed ones (0: 3); Iters
	// says how many are timed for a size (nil: BenchIters), in each of
	// Reps repetitions (0: 3), of which the median counts.
	Warmups int
	Iters   func(bytes int64) int
	Reps    int
	// Progress, when set, is called on every rank after each figure
	// this rank measured (its own time, before the ranks compare).
	Progress func(f CollFigure)
	// Graph also times each figure's Iters calls captured in one CUDA
	// graph and replayed (CollFigure.GraphMicros).
	Graph bool
}

// BenchIters is the default number of timed calls for a size.
func BenchIters(bytes int64) int {
	switch {
	case bytes <= 1<<20:
		return 300 // host-bound: average over many
	case bytes <= 16<<20:
		return 30
	case bytes <= 256<<20:
		return 10
	}
	return 5
}

// BenchAlgorithms are the algorithms MeasureCollectives runs for op: every
// one the rules table lists but auto, and nccl only where it loads.
func BenchAlgorithms(op ir.Opcode) []ir.Algo {
	_, ncclErr := cuda.NCCLVersion()
	var out []ir.Algo
	for _, a := range ir.Algorithms(op) {
		if a == ir.AlgoAuto || a == ir.AlgoNCCL && ncclErr != nil {
			continue
		}
		out = append(out, a)
	}
	return out
}

// MeasureCollectives times every algorithm of each collective at each
// size (bf16 by default), with symmetric operands so that every algorithm
// can run: Warmups untimed calls, a barrier, then Iters calls back to back
// between two CUDA events. It is collective (every rank calls it) and
// every rank gets the same figures: for each, the slowest rank's mean.
func MeasureCollectives(rt *cuda.Runtime, o CollBenchOptions) ([]CollFigure, error) {
	d := rt.CUDADevice()
	D := d.WorldSize()
	if o.MinBytes <= 0 {
		o.MinBytes = 8 << 10
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.MaxBytes < o.MinBytes {
		return nil, fmt.Errorf("bench: the largest size %d is below the smallest %d", o.MaxBytes, o.MinBytes)
	}
	if len(o.Ops) == 0 {
		o.Ops = ir.BenchmarkedCollectives()
	}
	if len(o.DTypes) == 0 {
		o.DTypes = []ir.DType{ir.BF16}
	}
	if o.Warmups <= 0 {
		o.Warmups = 3
	}
	if o.Iters == nil {
		o.Iters = BenchIters
	}
	if o.Reps <= 0 {
		o.Reps = 3
	}
	inB, err := d.Alloc(o.MaxBytes, ir.Symmetric)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer d.Free(inB)
	outB, err := d.Alloc(o.MaxBytes, ir.Symmetric)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer d.Free(outB)
	s := d.DefaultStream()
	ev := [2]runtime.Event{}
	for i := range ev {
		if ev[i], err = d.NewEvent(); err != nil {
			return nil, err
		}
		defer ev[i].Close()
	}
	// The first figures a process measured came out slow (2 × H200: 9.4
	// µs for a call that took 5.4 a moment later): warm the host and the
	// path up first, with the same number of calls on every rank.
	if warm, ok := cuda.BenchCall(ir.OpAllReduce, o.DTypes[0], o.MinBytes/int64(o.DTypes[0].Size()), D, inB, outB); ok {
		warm.Algo = ir.AlgoOneShot
		for i := 0; i < 3000; i++ {
			if err := d.Collective(&warm, s); err != nil {
				return nil, fmt.Errorf("bench: warming up: %w", err)
			}
		}
		if err := s.Synchronize(); err != nil {
			return nil, fmt.Errorf("bench: warming up: %w", err)
		}
	}
	var figs []CollFigure
	for _, dt := range o.DTypes {
		es := int64(dt.Size())
		for size := o.MinBytes; size <= o.MaxBytes; size *= 2 {
			for _, op := range o.Ops {
				call, ok := cuda.BenchCall(op, dt, size/es, D, inB, outB)
				if !ok {
					continue
				}
				for _, algo := range BenchAlgorithms(op) {
					if ir.AlgoFits(op, algo, call.In.Bytes(), call.Out.Bytes(), D) != nil {
						continue // ll above its size limit
					}
					call.Algo = algo
					f := CollFigure{Op: op.String(), Algo: algo.String(), DType: dt.String(), World: D, Bytes: size, Iters: o.Iters(size)}
					us, err := timeCollective(d, &call, s, ev, o.Warmups, f.Iters, o.Reps)
					if err != nil {
						return nil, fmt.Errorf("bench: %s algo=%s %s %d bytes: %w", op, algo, dt, size, err)
					}
					f.Micros = us
					if o.Graph {
						if f.GraphMicros, err = timeGraph(d, &call, s, ev, f.Iters, o.Reps); err != nil {
							return nil, fmt.Errorf("bench: %s algo=%s %s %d bytes in a graph: %w", op, algo, dt, size, err)
						}
					}
					if o.Progress != nil {
						o.Progress(f)
					}
					figs = append(figs, f)
				}
			}
		}
	}
	if D == 1 {
		return figs, nil
	}
	// Every rank measured the same figures in the same order: keep the
	// slowest rank's time of each.
	mine := make([]float64, 2*len(figs))
	for i, f := range figs {
		mine[2*i], mine[2*i+1] = f.Micros, f.GraphMicros
	}
	b, _ := json.Marshal(mine)
	all, err := d.ExchangeAll("cuda/collbench", b)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	for r, raw := range all {
		var theirs []float64
		if err := json.Unmarshal(raw, &theirs); err != nil || len(theirs) != 2*len(figs) {
			return nil, fmt.Errorf("bench: rank %d measured other figures (%d, %v)", r, len(theirs)/2, err)
		}
		for i := range figs {
			figs[i].Micros = max(figs[i].Micros, theirs[2*i])
			figs[i].GraphMicros = max(figs[i].GraphMicros, theirs[2*i+1])
		}
	}
	return figs, nil
}

// timeCollective is the time of one call of c, in µs: the median over
// reps repetitions of the mean of iters calls back to back (after
// warmups, each repetition after a barrier).
func timeCollective(d *cuda.Device, c *runtime.CollectiveCall, s runtime.Stream, ev [2]runtime.Event, warmups, iters, reps int) (float64, error) {
	calls := func(n int) error {
		for i := 0; i < n; i++ {
			if err := d.Collective(c, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := calls(warmups); err != nil {
		return 0, err
	}
	return medianPerCall(d, s, ev, iters, reps, func() error { return calls(iters) })
}

// timeGraph is the time of one call of c replayed from a CUDA graph, in
// µs: iters calls captured once, the graph launched once untimed, then the
// median over reps launches.
func timeGraph(d *cuda.Device, c *runtime.CollectiveCall, s runtime.Stream, ev [2]runtime.Event, iters, reps int) (float64, error) {
	if err := d.BeginCapture(s); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := d.Collective(c, s); err != nil {
			d.EndCapture(s)
			return 0, err
		}
	}
	g, err := d.EndCapture(s)
	if err != nil {
		return 0, err
	}
	defer g.Close()
	if err := g.Launch(s); err != nil {
		return 0, err
	}
	return medianPerCall(d, s, ev, iters, reps, func() error { return g.Launch(s) })
}

// medianPerCall runs issue (which enqueues iters calls on s) reps times,
// each after a barrier and between two events, and returns the median
// time per call in µs.
func medianPerCall(d *cuda.Device, s runtime.Stream, ev [2]runtime.Event, iters, reps int, issue func() error) (float64, error) {
	means := make([]float64, 0, reps)
	for r := 0; r < reps; r++ {
		if err := errors.Join(d.Barrier(s), s.Record(ev[0])); err != nil {
			return 0, err
		}
		if err := issue(); err != nil {
			return 0, err
		}
		if err := errors.Join(s.Record(ev[1]), ev[1].Synchronize()); err != nil {
			return 0, err
		}
		ms, err := cuda.ElapsedMillis(ev[0], ev[1])
		if err != nil {
			return 0, err
		}
		means = append(means, float64(ms)*1e3/float64(iters))
	}
	sort.Float64s(means)
	return means[len(means)/2], nil
}

// benchStamp is when a table was made, for its Created field.
func benchStamp() string { return time.Now().UTC().Format(time.RFC3339) }

// BuildAutoTableFor is BuildAutoTable for this runtime's device, stamped now.
func BuildAutoTableFor(rt *cuda.Runtime, figs []CollFigure) *cuda.AutoTable {
	return BuildAutoTable(rt.CUDADevice().Info().Name, benchStamp(), figs)
}
