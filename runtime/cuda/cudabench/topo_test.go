package cudabench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/cuda/internal/ranktest"
)

func init() { scenarios["topo"] = topoScenario }

func checkTopology(topo *Topology, world int) error {
	if len(topo.Ranks) != world || len(topo.Links) != world*world {
		return fmt.Errorf("%d ranks and %d links for a world of %d", len(topo.Ranks), len(topo.Links), world)
	}
	for i, l := range topo.Links {
		if l.From != i/world || l.To != i%world {
			return fmt.Errorf("link %d is %d→%d, out of order", i, l.From, l.To)
		}
		if l.Err != "" || l.GBps <= 0 || l.Latency <= 0 || !l.PeerAccess || l.Bytes <= 0 {
			return fmt.Errorf("link %d→%d: %+v", l.From, l.To, l)
		}
	}
	return nil
}

func TestTopologySingleGPU(t *testing.T) {
	rt := openSingle(t)
	d := rt.CUDADevice()
	topo, err := MeasureTopology(rt, TopoOptions{Bytes: 64 << 20})
	require.NoError(t, err)
	require.NoError(t, checkTopology(topo, 1))
	t.Logf("GPU 0 within itself: %.1f GB/s, %v", topo.Links[0].GBps, topo.Links[0].Latency)
	st := d.Stats()
	wantSt := st // what is not checked here, as it is
	wantSt.Allocations, wantSt.Events = 0, 0
	assert.Equal(t, wantSt, st, "left behind")
}

func TestTopologyAcrossProcesses2(t *testing.T) {
	needGPUs(t, 2)
	ranktest.Check(t, ranktest.Ranks(t, 2, "topo"))
}

func topoScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	topo, err := MeasureTopology(rt, TopoOptions{Bytes: 64 << 20})
	if err != nil {
		return err
	}
	if err := checkTopology(topo, d.WorldSize()); err != nil {
		return err
	}
	for _, l := range topo.Links {
		if l.From == d.Rank() {
			fmt.Printf("rank %d: %d→%d %.1f GB/s latency %v peer access %v\n", d.Rank(), l.From, l.To, l.GBps, l.Latency, l.PeerAccess)
		}
	}
	if st := d.Stats(); st.Allocations != 0 || st.Events != 0 || st.Mappings != 0 {
		return fmt.Errorf("left behind: %+v", st)
	}
	return nil
}
