package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/hirlab/hir/internal/benchplot"
	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// What hirrun bench does with its figures once it has them, measured or
// read back with --from: print them as --format says and draw --plot.

// benchFrom prints and draws a file an earlier --format json wrote.
func (c *cli) benchFrom(o *benchOptions) int {
	var measuring []string
	if o.fs != nil {
		o.fs.Visit(func(f *flag.Flag) {
			if f.Name != "from" && f.Name != "format" && f.Name != "plot" {
				measuring = append(measuring, "--"+f.Name)
			}
		})
	}
	if len(measuring) > 0 {
		c.errorf("bench: --from prints saved figures; leave out what only measuring takes: %s", strings.Join(measuring, " "))
		return exitUsage
	}
	out, err := checkBenchOutput(o, true)
	if err != nil {
		c.errorf("bench: %v", err)
		return exitUsage
	}
	data, code := c.readSource(o.from)
	if code != exitOK {
		return code
	}
	rep, err := readBenchReport(o.from, data)
	if err != nil {
		c.errorf("bench: %v", err)
		return exitFail
	}
	return c.emitBench(out, rep, rep.figures())
}

// benchOutput is how the figures come out: --format and --plot, checked.
type benchOutput struct {
	format     string
	plot       string
	plotFormat benchplot.Format
}

// checkBenchOutput checks --format and --plot before anything is measured
// (with checkDir, that the chart can be written where it is asked for).
func checkBenchOutput(o *benchOptions, checkDir bool) (*benchOutput, error) {
	out := &benchOutput{format: o.format, plot: o.plot}
	switch o.format {
	case "table", "csv", "json":
	default:
		return nil, fmt.Errorf("--format %q: the formats are table, csv and json", o.format)
	}
	if o.plot == "" {
		return out, nil
	}
	var err error
	if checkDir {
		out.plotFormat, err = checkPlotPath(o.plot)
	} else {
		out.plotFormat, err = benchplot.FormatOf(o.plot)
	}
	if err != nil {
		return nil, fmt.Errorf("--plot %v", err)
	}
	return out, nil
}

// note reports what was saved where: after the table, on stdout; on
// stderr when stdout carries csv or json.
func (out *benchOutput) note(c *cli, format string, args ...any) {
	if out.format == "table" {
		fmt.Fprintf(c.stdout, "\n"+format+"\n", args...)
		return
	}
	fmt.Fprintf(c.stderr, format+"\n", args...)
}

// emitBench prints the figures as --format says and draws the chart.
// figs are rep's figures, for the table (unrounded when just measured).
func (c *cli) emitBench(out *benchOutput, rep *benchReport, figs []cudabench.CollFigure) int {
	var err error
	switch out.format {
	case "csv":
		err = writeBenchCSV(c.stdout, rep)
	case "json":
		err = writeBenchJSON(c.stdout, rep)
	default:
		c.printBench(rep.Device, rep.World, figs)
	}
	if err != nil {
		c.errorf("bench: writing the figures: %v", err)
		return exitFail
	}
	if out.plot != "" {
		if err := writePlot(out.plot, out.plotFormat, rep); err != nil {
			c.errorf("bench: --plot %s: %v", out.plot, err)
			return exitFail
		}
		out.note(c, "chart: %s", out.plot)
	}
	return exitOK
}
