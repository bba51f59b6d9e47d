package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// The table topo prints, from figures made up here (the GPU run measures
// real ones).
func TestPrintTopology(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out}
	c.printTopology(&cudabench.Topology{
		Options: cudabench.TopoOptions{Bytes: 256 << 20, Warmups: 2, Iters: 5, LatencyBytes: 8, LatencySamples: 50},
		Ranks:   []cudabench.TopoRank{{Rank: 0, Device: 0, Name: "GPU A"}, {Rank: 1, Device: 1, Name: "GPU B"}},
		Links: []cudabench.Link{
			{From: 0, To: 0, PeerAccess: true, GBps: 2100.04, Latency: 1900 * time.Nanosecond},
			{From: 0, To: 1, PeerAccess: true, GBps: 396.96, Latency: 2345 * time.Nanosecond},
			{From: 1, To: 0, PeerAccess: false, Err: "cuMemcpyAsync: CUDA_ERROR_INVALID_VALUE"},
			{From: 1, To: 1, PeerAccess: true, GBps: 2099.5, Latency: 2 * time.Microsecond},
		},
	})
	got := out.String()
	t.Log("\n" + got)
	for _, want := range []string{
		"rank 0: GPU 0 (GPU A)\nrank 1: GPU 1 (GPU B)\n",
		"256 MiB copies pushed through the symmetric mapping, 5 timed back to back after 2 warm-ups",
		"median of 50 copies of 8 bytes",
		"128 MiB copies between the halves",
	} {
		assert.Contains(t, got, want)
	}
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	rows := lines[len(lines)-5:]
	for i, want := range [][]string{
		{"from", "to", "peer access", "GB/s", "latency µs"},
		{"0", "0", "same GPU", "2100.0", "1.90"},
		{"0", "1", "yes", "397.0", "2.35"},
		{"1", "0", "no", "-", "-", "error: cuMemcpyAsync: CUDA_ERROR_INVALID_VALUE"},
		{"1", "1", "same GPU", "2099.5", "2.00"},
	} {
		for _, w := range want {
			assert.Contains(t, rows[i], w, "row %d", i)
		}
	}
}
