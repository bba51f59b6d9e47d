package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/hirlab/hir/internal/benchplot"
)

// benchChart is the picture of a report: a row per collective and dtype,
// in the records' order; in each, a line per algorithm (NCCL as "nccl")
// and, for figures replayed from a graph, a dashed one of the same colour.
func benchChart(r *benchReport) benchplot.Chart {
	title := fmt.Sprintf("hirrun bench: %s × %d", r.Device, r.World)
	if len(r.Created) >= len("2006-01-02") {
		title += ", " + r.Created[:len("2006-01-02")]
	}
	c := benchplot.Chart{Title: title}
	type line struct {
		eager, graph benchplot.Series
	}
	type row struct {
		lines map[string]*line
		algos []string // in the order they came
	}
	rows := map[string]*row{}
	var order []string
	for _, rec := range r.Records {
		name := rec.Op + " " + rec.DType
		rw, ok := rows[name]
		if !ok {
			rw = &row{lines: map[string]*line{}}
			rows[name] = rw
			order = append(order, name)
		}
		l, ok := rw.lines[rec.Algo]
		if !ok {
			l = &line{
				eager: benchplot.Series{Name: rec.Algo, Key: rec.Algo},
				graph: benchplot.Series{Name: rec.Algo + " (graph)", Key: rec.Algo, Dashed: true},
			}
			rw.lines[rec.Algo] = l
			rw.algos = append(rw.algos, rec.Algo)
		}
		l.eager.Points = append(l.eager.Points, benchplot.Point{Bytes: rec.SizeBytes, BusGBps: rec.BusBwGBps, Micros: rec.LatencyUs})
		if rec.GraphLatencyUs != nil {
			l.graph.Points = append(l.graph.Points, benchplot.Point{Bytes: rec.SizeBytes, BusGBps: *rec.GraphBusBwGBps, Micros: *rec.GraphLatencyUs})
		}
	}
	for _, name := range order {
		out := benchplot.Row{Title: name}
		for _, algo := range rows[name].algos {
			l := rows[name].lines[algo]
			for _, s := range []benchplot.Series{l.eager, l.graph} {
				if len(s.Points) > 0 {
					sort.SliceStable(s.Points, func(i, j int) bool { return s.Points[i].Bytes < s.Points[j].Bytes })
					out.Series = append(out.Series, s)
				}
			}
		}
		c.Rows = append(c.Rows, out)
	}
	return c
}

// checkPlotPath makes sure, before anything is measured, that a chart can
// be written at path: a .svg or .png name in a directory that exists and
// takes a new file.
func checkPlotPath(path string) (benchplot.Format, error) {
	format, err := benchplot.FormatOf(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return "", fmt.Errorf("%q is a directory", path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%q: directory %s does not exist", path, dir)
	case err != nil:
		return "", fmt.Errorf("%q: %v", path, err)
	case !st.IsDir():
		return "", fmt.Errorf("%q: %s is not a directory", path, dir)
	}
	probe, err := os.CreateTemp(dir, ".hirrun-plot-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%q: cannot write in %s: %v", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return format, nil
}

// writePlot draws r to path. The chart is drawn in memory first, so that
// a figure gonum cannot draw leaves no file behind.
func writePlot(path string, format benchplot.Format, r *benchReport) error {
	var b bytes.Buffer
	if err := benchplot.Write(&b, format, benchChart(r)); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
