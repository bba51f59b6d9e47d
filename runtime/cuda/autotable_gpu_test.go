package cuda

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
)

// TestCollectiveAutoFollowsTable (on the GPU machine, with
// HIR_COLL_AUTO_TABLE naming a table hirrun bench saved): auto runs what
// the table ranks first among the algorithms the operands allow, on every
// rank alike.
func TestCollectiveAutoFollowsTable(t *testing.T) {
	if os.Getenv("HIR_COLL_AUTO_TABLE") == "" {
		t.Skip("HIR_COLL_AUTO_TABLE=path (a table hirrun bench saved) runs it")
	}
	needCollGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "coll-auto"))
}

func init() { scenarios["coll-auto"] = collAutoScenario }

func collAutoScenario() error {
	path := os.Getenv("HIR_COLL_AUTO_TABLE")
	os.Setenv(autotable.AutoTableEnv, path)
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	rt, err := runtime.Open("cuda", runtime.Config{WorldSize: world, Rank: -1, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer rt.Close()
	d := rt.(*Runtime).dev
	tbl, err := autotable.LoadAutoTable(path)
	if err != nil || tbl == nil {
		return fmt.Errorf("no table at %s: %v", path, err)
	}
	const maxBytes = 64 << 20
	inB, err := d.Alloc(maxBytes, ir.Symmetric)
	if err != nil {
		return err
	}
	outB, err := d.Alloc(maxBytes, ir.Symmetric)
	if err != nil {
		return err
	}
	globB, err := d.Alloc(maxBytes, ir.Global)
	if err != nil {
		return err
	}
	s := d.DefaultStream()
	checked := 0
	for _, out := range []runtime.Buffer{outB, globB} {
		for _, op := range []ir.Opcode{ir.OpAllReduce, ir.OpAllGather, ir.OpReduceScatter} {
			if op == ir.OpAllGather && out == globB {
				continue // every all_gather but copy_engine writes its output remotely
			}
			for _, size := range []int64{8 << 10, 64 << 10, 512 << 10, 4 << 20, 64 << 20} {
				call, _ := autotable.BenchCall(op, ir.BF16, size/2, d.WorldSize(), inB, out)
				call.Algo = ir.AlgoAuto
				if err := d.Collective(&call, s); err != nil {
					return err
				}
				p, err := d.PlanCollective(&call, false)
				if err != nil {
					return err
				}
				want, found := ir.AlgoAuto, false
				for _, a := range tbl.Ranked(op, d.WorldSize(), ir.BF16, size) {
					if d.Fits(p, a) {
						want, found = a, true
						break
					}
				}
				if !found {
					want = d.DefaultAlgo(p, false)
				}
				fmt.Printf("rank %d: auto %s bf16 %d bytes into %v: %s (table: %v)\n", d.Rank(), op, size, out.Mem(), p.Impl, tbl.Ranked(op, d.WorldSize(), ir.BF16, size))
				if p.Impl != want {
					return fmt.Errorf("auto %s of %d bytes ran %s, the table says %s", op, size, p.Impl, want)
				}
				checked++
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	fmt.Printf("rank %d: %d auto calls followed the table (%s)\n", d.Rank(), checked, d.AutoTableNote())
	d.Free(inB)
	d.Free(outB)
	d.Free(globB)
	return d.ReleaseComm()
}
