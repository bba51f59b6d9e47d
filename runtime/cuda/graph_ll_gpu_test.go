package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// TestLLReplaysEqualEager: every LL kernel (algo=ll all_gather,
// reduce_scatter, all_to_all, broadcast, all_reduce; as lines and in
// bulk) captured in one graph
// per rank and replayed 1,000 times with fresh inputs, a late rank
// varying, each replay's outputs equal to an eager run on the same inputs.
// An LL line is ready when it carries the launch's flag: had a replay
// reused the flag of the capture (or of the replay before), a reader
// would take a line its peer had not yet rewritten, and its output would
// hold the previous replay's data.
func TestLLReplaysEqualEager(t *testing.T) {
	needGPUs(t, 2)
	checkRanks(t, runRanks(t, 2, "ll-replays"))
}

func TestLLReplaysEqualEager4(t *testing.T) {
	needGPUs(t, 4)
	checkRanks(t, runRanks(t, 4, "ll-replays"))
}

func init() { scenarios["ll-replays"] = llReplaysScenario }

func llReplaysScenario() error {
	rt, d, err := openFromEnv()
	if err != nil {
		return err
	}
	defer rt.Close()
	rank, world := d.Rank(), d.WorldSize()
	D := int64(world)
	const k = 501 // odd: lines that are not whole, unaligned blocks
	type pair struct{ in, out []int64 }
	shapes := []struct {
		call runtime.CollectiveCall
		pair
	}{
		{runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoLL}, pair{[]int64{k}, []int64{k * D}}},
		{runtime.CollectiveCall{Op: ir.OpReduceScatter, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{k * D}, []int64{k}}},
		{runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoLL, Axis: 1, ConcatAxis: 0}, pair{[]int64{3, 7 * D}, []int64{3 * D, 7}}},
		{runtime.CollectiveCall{Op: ir.OpBroadcast, Algo: ir.AlgoLL, Root: world - 1}, pair{[]int64{k}, []int64{k}}},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoLL, ReduceOp: ir.ReduceMax}, pair{[]int64{k}, []int64{k}}},
		// two hops on more than two ranks (Tuning.LLTwoShotMin)
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{150001}, []int64{150001}}},
		// in LL128 lines (pieces above Tuning.LL128Min; the all_reduce of
		// 800 KB in two hops of 200 KB chunks on four ranks, in bulk on two)
		{runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoLL}, pair{[]int64{60001}, []int64{60001 * D}}},
		{runtime.CollectiveCall{Op: ir.OpReduceScatter, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{60001 * D}, []int64{60001}}},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{60001}, []int64{60001}}},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{400001}, []int64{400001}}},
		{runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoLL, Axis: 1, ConcatAxis: 0}, pair{[]int64{3, 20001 * D}, []int64{3 * D, 20001}}},
		{runtime.CollectiveCall{Op: ir.OpBroadcast, Algo: ir.AlgoLL, Root: 1}, pair{[]int64{60001}, []int64{60001}}},
		// past 512 KiB a piece (the all_gather, reduce_scatter and
		// broadcast) in bulk on four ranks, as LL128 lines on two; the
		// all_reduce of 1.4 MB in bulk on two, in LL128 chunks on four:
		// every protocol on the same staging slots' count
		{runtime.CollectiveCall{Op: ir.OpAllGather, Algo: ir.AlgoLL}, pair{[]int64{300001}, []int64{300001 * D}}},
		{runtime.CollectiveCall{Op: ir.OpReduceScatter, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{300001 * D}, []int64{300001}}},
		{runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoLL, ReduceOp: ir.ReduceSum}, pair{[]int64{700001}, []int64{700001}}},
		{runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoLL, Axis: 1, ConcatAxis: 0}, pair{[]int64{1000, 150 * D}, []int64{1000 * D, 150}}},
		{runtime.CollectiveCall{Op: ir.OpBroadcast, Algo: ir.AlgoLL, Root: 0}, pair{[]int64{300001}, []int64{300001}}},
	}
	calls := make([]*runtime.CollectiveCall, len(shapes))
	var ins, outs []runtime.Tensor
	for i, sh := range shapes {
		inB, err := d.Alloc(ir.Product(sh.in)*2, ir.Global)
		if err != nil {
			return err
		}
		defer d.Free(inB)
		outB, err := d.Alloc(ir.Product(sh.out)*2, ir.Global)
		if err != nil {
			return err
		}
		defer d.Free(outB)
		c := sh.call
		c.In = runtime.Tensor{Buf: inB, DType: ir.BF16, Shape: sh.in}
		c.Out = runtime.Tensor{Buf: outB, DType: ir.BF16, Shape: sh.out}
		calls[i] = &c
		ins, outs = append(ins, c.In), append(outs, c.Out)
	}
	s := d.DefaultStream()
	fill := func(it int) error {
		for i, t := range ins {
			b := make([]byte, t.Bytes())
			x := uint32(it*7919 + rank*104729 + i*31)
			for j := 0; j < len(b); j += 2 {
				x = x*1664525 + 1013904223
				b[j], b[j+1] = byte(x>>16), 0x3f&byte(x>>24) // finite bf16 values
			}
			if err := d.CopyFromHost(t, b, s); err != nil {
				return err
			}
		}
		return nil
	}
	read := func() ([][]byte, error) {
		got := make([][]byte, len(outs))
		for i, t := range outs {
			got[i] = make([]byte, t.Bytes())
			if err := d.CopyToHost(got[i], t, s); err != nil {
				return nil, err
			}
		}
		return got, s.Synchronize()
	}
	eager := func() error {
		for _, c := range calls {
			if err := d.Collective(c, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := errors.Join(fill(0), eager(), s.Synchronize()); err != nil {
		return err
	}
	if err := d.BeginCapture(s); err != nil {
		return err
	}
	if err := eager(); err != nil {
		d.EndCapture(s)
		return err
	}
	g, err := d.EndCapture(s)
	if err != nil {
		return err
	}
	defer g.Close()
	const replays = 1000
	for it := 1; it <= replays; it++ {
		if rank == 1 && it%3 == 0 {
			time.Sleep(time.Duration(it%4) * 50 * time.Microsecond)
		}
		if err := errors.Join(fill(it), g.Launch(s)); err != nil {
			return err
		}
		replayed, err := read()
		if err != nil {
			return err
		}
		if err := errors.Join(fill(it), eager()); err != nil {
			return err
		}
		want, err := read()
		if err != nil {
			return err
		}
		for i := range want {
			if !bytes.Equal(replayed[i], want[i]) {
				return fmt.Errorf("replay %d: %s algo=ll: the replayed output differs from the eager one", it, calls[i].Op)
			}
		}
	}
	fmt.Printf("rank %d: %d replays of %d LL kernels equal to eager\n", rank, replays, len(calls))
	return nil
}
