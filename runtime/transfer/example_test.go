package transfer_test

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
	"github.com/hirlab/hir/runtime/transfer"
)

// A ring read on the CPU runtime: every rank registers its shard of a
// symmetric tensor and reads its right neighbour's into a local buffer.
// Each rank runs the same code; on GPUs each would be its own process.
func Example() {
	const world, n = 3, 4
	rt, _ := sim.New(runtime.Config{WorldSize: world})
	defer rt.Close()
	got := make([][]int32, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, _ := rt.Device(r)
			got[r] = ringRead(dev, n)
		}()
	}
	wg.Wait()
	for r, v := range got {
		fmt.Printf("rank %d read %v\n", r, v)
	}
	// Output:
	// rank 0 read [10 11 12 13]
	// rank 1 read [20 21 22 23]
	// rank 2 read [0 1 2 3]
}

func ringRead(dev runtime.Device, n int64) []int32 {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	rank, world := dev.Rank(), dev.WorldSize()
	a, err := transfer.New(dev) // collective: runs the availability probe
	must(err)
	defer a.Close()

	// The registered tensor lives on the symmetric heap; fill it with
	// rank*10 + i.
	buf, err := dev.Alloc(n*4, ir.Symmetric) // collective
	must(err)
	defer dev.Free(buf)
	shard := runtime.Tensor{Buf: buf, DType: ir.I32, Shape: []int64{n}}
	data := make([]byte, n*4)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], uint32(rank*10+int(i)))
	}
	s := dev.DefaultStream()
	must(dev.CopyFromHost(shard, data, s))
	must(s.Synchronize())

	reg, err := a.Register(shard) // collective: every rank's descriptor goes round
	must(err)

	// The local side may be any memory; it need not be registered.
	lbuf, err := dev.Alloc(n*4, ir.Global)
	must(err)
	defer dev.Free(lbuf)
	local := runtime.Tensor{Buf: lbuf, DType: ir.I32, Shape: []int64{n}}
	h, err := reg.Prepare(transfer.Read, []runtime.Tensor{local}, (rank+1)%world, []transfer.Desc{transfer.Whole(0)})
	must(err)
	must(h.Post(s)) // returns at once
	must(h.Wait())  // sleeps until the read has landed (h.WaitOn(s) would not block)

	// Collective: waits for this rank's transfers, then for every rank, so
	// no peer still reads our shard when we free it.
	must(reg.Deregister())

	must(dev.CopyToHost(data, local, s))
	must(s.Synchronize())
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}
