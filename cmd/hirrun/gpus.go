package main

import (
	"github.com/hirlab/hir/runtime/cuda"
)

// gpuRanks is how many ranks, one per GPU, a measuring command (topo,
// bench) started by hand runs: --nproc, or every GPU. When the machine
// cannot, it prints why and returns the exit code as well.
func (c *cli) gpuRanks(cmd string, nproc int) (n, code int, ok bool) {
	p := cuda.Probe()
	if !p.Available {
		c.errorf("%s: cuda backend unavailable: %s", cmd, p.Reason)
		return 0, exitFail, false
	}
	n = nproc
	if n == 0 {
		n = len(p.Devices)
	}
	if n > len(p.Devices) {
		c.errorf("%s: --nproc %d, but this machine shows %d GPU%s", cmd, n, len(p.Devices), plural(len(p.Devices)))
		return 0, exitFail, false
	}
	return n, 0, true
}
