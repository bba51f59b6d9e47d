package main

import (
	"fmt"

	"github.com/hirlab/hir/runtime/launch"
)

// runsHere is for a backend that runs every rank of a program in one
// process (sim) when a launcher (torchrun, srun, mpirun) started several
// hirruns: the one of rank 0 runs the whole program, and prints it all
// once, as rank 0 of a cuda job does; the others have nothing to do and
// exit 0. Each says so in one line on stderr, so a job that meant
// --backend cuda is not mistaken for one that used the GPUs. ok is false
// when this process is not to run the program; code is then its exit
// status.
func (c *cli) runsHere(backend string) (code int, ok bool) {
	p, launched, err := launch.PlaceFromEnv(launch.LookupSet)
	if err != nil {
		c.errorf("run: %v", err)
		return exitUsage, false
	}
	if !launched || p.WorldSize == 1 {
		return exitOK, true
	}
	if p.Rank != 0 {
		c.errorf("run: %v: --backend %s runs every rank of the program in one process, rank 0's; this one exits (--backend cuda runs a rank per process)", p, backend)
		return exitOK, false
	}
	others := "the launcher's other process exits"
	if p.WorldSize > 2 {
		others = fmt.Sprintf("the launcher's %d other processes exit", p.WorldSize-1)
	}
	c.errorf("run: %v: --backend %s runs every rank of the program in this process; %s at once (--backend cuda runs a rank per process)", p, backend, others)
	return exitOK, true
}
