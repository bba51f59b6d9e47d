package main

import (
	"github.com/hirlab/hir/runtime/cuda"
)

// probeCUDA is cuda.Probe; tests replace it to see the messages of a
// machine without GPUs on one that has them, and the other way round.
var probeCUDA = cuda.Probe

// gpuRanks is how many ranks, one per GPU, a measuring command (topo,
// bench) started by hand runs: --nproc, or every GPU. When the machine
// cannot, it prints why and returns the exit code as well.
func (c *cli) gpuRanks(cmd string, nproc int) (n, code int, ok bool) {
	p := probeCUDA()
	if !p.Available {
		c.errorf("%s: needs GPUs, and the cuda backend cannot run here: %s; %s", cmd, p.Reason, noGPUAdvice[cmd])
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

// noGPUAdvice is what each measuring command suggests where there is no
// GPU: neither has a CPU backend, so the advice is about figures measured
// elsewhere.
var noGPUAdvice = map[string]string{
	"bench": "to print or chart figures measured on GPUs, run 'hirrun bench --from FILE.json' on a file " +
		"'hirrun bench --format json' saved there (hir's docs/bench/h100-x2.json is one, from 2 H100s)",
	"topo": "run it on a machine with NVIDIA GPUs (docs/RUNTIME-CUDA.md, \"hirrun topo\", shows a table from 2 H200s)",
}
