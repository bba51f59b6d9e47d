package cuda

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// TestManyJobsOnGPU: 2 ranks make, run and close 1,000 jobs in one
// process, each with collectives on two streams (ll, ring, an async
// one_shot; every tenth job in graph mode); nothing grows — allocations,
// handles, mappings, descriptors, graphs, streams, events, collective
// channels — and the last job's outputs equal the first's (issue 20: the
// overlap benchmark's fifth job stopped at "more than 16 streams" before
// closed streams gave their channels back). The CPU runtime's
// TestManyJobsLeaveNothing (evaluator) runs the same program.
func TestManyJobsOnGPU(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "many-jobs"))
}

func init() { scenarios["many-jobs"] = manyJobsScenario }

func manyJobsScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	// the program evaluator's TestManyJobsLeaveNothing runs on the CPU
	root, err := repoRoot()
	if err != nil {
		return err
	}
	prog, err := parser.ParseFile(filepath.Join(root, "evaluator", "testdata", "many_jobs.hir"))
	if err != nil {
		return err
	}
	if err := passes.Lower(prog, &passes.Context{}); err != nil {
		return err
	}
	in := prog.Inputs[0].Tensor()
	inputs := map[string]*host.Array{"x": host.Random(in.DType, in.Shape(), 1)}
	run := func(graph bool) (map[string][]byte, error) {
		job, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: graph})
		if err != nil {
			return nil, err
		}
		res, err := job.Run(inputs)
		if err == nil && graph {
			res, err = job.Run(inputs) // the replay
		}
		if err != nil {
			job.Close()
			return nil, err
		}
		// This process hosts one rank: its own shards (Logical would
		// need every rank's).
		out := map[string][]byte{}
		for _, rr := range res.Ranks {
			for _, name := range []string{"r", "y"} {
				a := rr.Outputs[name]
				if a == nil {
					job.Close()
					return nil, fmt.Errorf("rank %d has no output %%%s", rr.Rank, name)
				}
				out[name] = a.Data
			}
		}
		return out, job.Close()
	}
	// What a device keeps for good (pads, LL staging, pinned output
	// memory, compiled modules) is made by the first eager and the first
	// graph job; after those nothing may grow.
	first, err := run(false)
	if err != nil {
		return err
	}
	if _, err := run(true); err != nil {
		return err
	}
	base := d.Stats()
	for i := 1; i <= 1000; i++ {
		got, err := run(i%10 == 0)
		if err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		for name, b := range got {
			if !bytes.Equal(b, first[name]) {
				return fmt.Errorf("job %d: %%%s differs from the first job's", i, name)
			}
		}
		if st := d.Stats(); st != base {
			return fmt.Errorf("job %d left more behind: %+v, after the first job %+v", i, st, base)
		}
	}
	fmt.Printf("rank %d: 1000 jobs, nothing grew: %+v\n", d.Rank(), base)
	return nil
}
