package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func init() { scenarios["free-order"] = freeOrderScenario }

// Ranks free two symmetric buffers in opposite orders, while the other
// rank may still read the freed shard through its own mapping: no rank
// waits for another, and the reads see the data.
func TestSymmetricFreeInAnyOrder(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "free-order"))
}

func freeOrderScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	a, err := d.Alloc(1<<20, ir.Symmetric)
	if err != nil {
		return err
	}
	b, err := d.Alloc(1<<20, ir.Symmetric)
	if err != nil {
		return err
	}
	n := a.Size() / 4
	if err := d.CopyFromHost(runtime.Tensor{Buf: a, DType: ir.I32, Shape: []int64{n}}, i32Bytes(pattern(d.Rank(), n)), nil); err != nil {
		return err
	}
	if err := d.Barrier(nil); err != nil {
		return err
	}
	start := time.Now()
	first, second := a, b
	if d.Rank() == 1 {
		first, second = b, a
	} else {
		// Rank 0 reads rank 1's shard of a after rank 1 may have freed
		// its own handle to it.
		time.Sleep(100 * time.Millisecond)
		pa, err := d.PeerBuffer(a, 1)
		if err != nil {
			return err
		}
		got, err := readI32(d, runtime.Tensor{Buf: pa, DType: ir.I32, Shape: []int64{n}})
		if err != nil {
			return err
		}
		if err := compare("rank 1's shard after rank 1 freed it", got, pattern(1, n)); err != nil {
			return err
		}
	}
	if err := d.Free(first); err != nil {
		return err
	}
	if err := d.Free(second); err != nil {
		return err
	}
	if took := time.Since(start); took > 10*time.Second {
		return fmt.Errorf("freeing took %v", took)
	}
	// (Descriptors are not compared: the driver opens some on first use.)
	if st := d.Stats(); st.Allocations != 0 || st.Handles != 0 || st.Mappings != 0 || st.Reservations != 0 || st.OpenFDs != 0 {
		return fmt.Errorf("leaked: %+v", st)
	}
	// Still in step with the peer afterwards.
	return d.Barrier(nil)
}
