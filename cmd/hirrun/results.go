package main

import (
	"fmt"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/ir"
)

// results is what a run does with its outputs once it ends: save them
// (--output) and compare them with references (--expect). Only the
// process that prints does this (rank 0 of a multi-process job, and the
// launching hirrun checks it first), so only that process touches these
// files: prepare checks the output paths and reads the references before
// the run, not after it.
type results struct {
	outputs []spec
	expects []spec
	loaded  []expectation // set by prepare
}

// prepare checks the --output and --trace paths and loads the --expect
// references.
func (r *results) prepare(prog *ir.Program, o *runOptions) error {
	if err := checkOutputPaths(r.outputs); err != nil {
		return err
	}
	if o.trace != "" {
		if err := checkWritable(o.trace); err != nil {
			return fmt.Errorf("--trace %s: %v", o.trace, err)
		}
	}
	var err error
	r.loaded, err = loadExpectations(prog, r.expects, o)
	return err
}

// wholeOutputs names the outputs rank 0 needs whole: those saved or
// compared. An archive, whose names only its reader knows, needs all.
func (r *results) wholeOutputs(prog *ir.Program) []string {
	var names []string
	for _, s := range append(append([]spec{}, r.outputs...), r.expects...) {
		if s.name == "" {
			names = names[:0]
			for _, out := range prog.Outputs {
				names = append(names, out.Name)
			}
			return names
		}
		names = append(names, s.name)
	}
	return names
}

// finishRun prints every rank's outputs, saves and compares them, prints
// the counters and writes the trace; a failed comparison makes the exit
// status 1 once all that is done.
func (c *cli) finishRun(prog *ir.Program, reports []rankReport, whole *evaluator.Result, r *results, o *runOptions) int {
	c.printOutputs(prog, reports)
	if code := c.writeOutputs(prog, whole, r.outputs); code != exitOK {
		return code
	}
	failed := c.checkExpectations(prog, whole, r.loaded)
	if o.stats {
		c.printStats(reports)
	}
	if code := c.writeTrace(o.trace, o.overlap, reports); code != exitOK {
		return code
	}
	if failed {
		return exitFail
	}
	return exitOK
}
