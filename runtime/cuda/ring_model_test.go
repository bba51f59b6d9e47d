package cuda

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/numeric"
)

// A model of hir_ring (kernels/reduce.cu) on the CPU: the same ops in
// the same order per block, the same segment ranges, staging slots,
// phases, data flags and acks, with every (rank, block) a coroutine that
// a random scheduler advances one whole op at a time whenever its waits
// are met. It checks that the protocol never writes a slot that was not
// acked, never reads one that was not written, never deadlocks, and that
// the results are bf16 sums in ring order c+1, c+2, ..., c, rounded at
// every hop (and avg's division after the rounding), as runtime/sim's
// ring computes them. It cannot check the CUDA itself; the GPU tests do.

const (
	rpSend = 1 << iota
	rpRecv
	rpReduce
	rpStore
	rpFinish
)

type ringModelOp struct {
	f int
	c int
	k int64
}

// ringModelOps is the op list of one block, as ring_kernel issues it
// (segment after segment, or in waves).
func ringModelOps(D, r int, nseg int64, gather, avg, wave bool) []ringModelOp {
	fin := 0
	if avg {
		fin = rpFinish
	}
	J := D
	if gather {
		J = 2*D - 1
	}
	step := func(j int, k int64) ringModelOp {
		switch {
		case j == 0:
			return ringModelOp{rpSend, (r + D - 1) % D, k}
		case j < D-1:
			return ringModelOp{rpRecv | rpReduce | rpSend, (r - j - 1 + 2*D) % D, k}
		case j == D-1:
			f := rpRecv | rpReduce | rpStore | fin
			if gather {
				f |= rpSend
			}
			return ringModelOp{f, r, k}
		}
		f := rpRecv | rpStore
		if j < 2*D-2 {
			f |= rpSend
		}
		return ringModelOp{f, (r - (j - D) - 1 + 2*D) % D, k}
	}
	var ops []ringModelOp
	if wave {
		for w := int64(0); w < nseg+int64(J)-1; w++ {
			for j := 0; j < J && int64(j) <= w; j++ {
				if w-int64(j) < nseg {
					ops = append(ops, step(j, w-int64(j)))
				}
			}
		}
		return ops
	}
	for k := int64(0); k < nseg; k++ {
		for j := 0; j < J; j++ {
			ops = append(ops, step(j, k))
		}
	}
	return ops
}

func bf16Round(x float32) float32 { return numeric.BF16ToF32(numeric.F32ToBF16(x)) }

// runRingModel runs the model; it returns each rank's output (the whole
// tensor for all_reduce, chunk r for reduce_scatter).
func runRingModel(t *testing.T, rng *rand.Rand, g coll.RingGeom, D int, n int64, gather, avg, wave bool, src [][]float32) ([][]float32, error) {
	const es = 2
	const V = 16 / es
	chunk := make([]int64, D+1)
	for c := 0; c <= D; c++ {
		if gather {
			chunk[c] = n * int64(c) / int64(D)
		} else {
			chunk[c] = n / int64(D) * int64(c)
		}
	}
	cs := &coll.CommState{Blocks: 132}
	grid, seg, nseg := cs.RingLaunch(g, chunk, es)
	G, K := int(grid), int(g.Slots)
	strideEl := g.Stride() / es
	// staging[rank][block][slot]: elements; full marks a written, unacked slot.
	staging := make([][][][]float32, D)
	full := make([][][]bool, D)
	data := make([][]uint64, D) // data[rank][block]: the left's flag in rank's pad
	ack := make([][]uint64, D)  // ack[rank][block]: the right's ack in rank's pad
	dst := make([][]float32, D)
	for r := 0; r < D; r++ {
		staging[r] = make([][][]float32, G)
		full[r] = make([][]bool, G)
		for b := 0; b < G; b++ {
			staging[r][b] = make([][]float32, K)
			full[r][b] = make([]bool, K)
			for q := range staging[r][b] {
				staging[r][b][q] = make([]float32, strideEl)
			}
		}
		data[r] = make([]uint64, G)
		ack[r] = make([]uint64, G)
		dst[r] = make([]float32, n)
		for i := range dst[r] {
			dst[r][i] = float32(math.NaN())
		}
	}
	type co struct {
		r, b   int
		ops    []ringModelOp
		pc     int
		tx, rx uint64
		done   bool
	}
	var cos []*co
	for r := 0; r < D; r++ {
		for b := 0; b < G; b++ {
			cos = append(cos, &co{r: r, b: b, ops: ringModelOps(D, r, nseg, gather, avg, wave)})
		}
	}
	const base = 1000 // an earlier launch's flags are below it
	step := func(x *co) bool {
		r, b := x.r, x.b
		right, left := (r+1)%D, (r+D-1)%D
		if x.pc == len(x.ops) {
			if x.tx > 0 && ack[r][b] < base+x.tx {
				return false
			}
			x.done = true
			return true
		}
		op := x.ops[x.pc]
		recv, send := op.f&rpRecv != 0, op.f&rpSend != 0
		if recv && data[r][b] < base+x.rx+1 {
			return false
		}
		if send && x.tx >= uint64(K) && ack[r][b] < base+x.tx-uint64(K)+1 {
			return false
		}
		c0, ln := chunk[op.c], chunk[op.c+1]-chunk[op.c]
		plo, phi := c0+ln*int64(b)/int64(G), c0+ln*int64(b+1)/int64(G)
		lo := min(plo+op.k*seg, phi)
		hi := min(lo+seg, phi)
		phase := lo - lo%V
		var in, out []float32
		if recv {
			q := int(x.rx % uint64(K))
			require.True(t, full[r][b][q], "rank %d block %d reads slot %d before it was written", r, b, q)
			in = staging[r][b][q]
		}
		if send {
			q := int(x.tx % uint64(K))
			require.False(t, full[right][b][q], "rank %d block %d overwrites slot %d of rank %d before its ack", r, b, q, right)
			out = staging[right][b][q]
		}
		for i := lo; i < hi; i++ {
			var v float32
			switch {
			case op.f&rpReduce != 0:
				v = bf16Round(in[i-phase] + src[r][i])
				if op.f&rpFinish != 0 {
					v = bf16Round(v / float32(D))
				}
			case recv:
				v = in[i-phase]
			default:
				v = src[r][i]
			}
			if send {
				out[i-phase] = v
			}
			if op.f&rpStore != 0 {
				if !gather && (op.c != r || i < chunk[r] || i >= chunk[r+1]) { // checked here, not by testify: it runs for every element
					require.Failf(t, "a store outside the rank's chunk", "reduce_scatter stores element %d outside chunk %d", i, r)
				}
				dst[r][i] = v
			}
		}
		if send {
			full[right][b][x.tx%uint64(K)] = true
			data[right][b] = base + x.tx + 1
			x.tx++
		}
		if recv {
			full[r][b][x.rx%uint64(K)] = false
			ack[left][b] = base + x.rx + 1
			x.rx++
		}
		x.pc++
		return true
	}
	for {
		progress, left := false, 0
		for _, i := range rng.Perm(len(cos)) {
			x := cos[i]
			if x.done {
				continue
			}
			left++
			for s := rng.Intn(3); s >= 0 && !x.done; s-- {
				if step(x) {
					progress = true
				}
			}
		}
		if left == 0 {
			break
		}
		if !progress {
			return nil, fmt.Errorf("geometry %v D=%d n=%d: deadlock", g, D, n)
		}
	}
	outs := make([][]float32, D)
	for r := 0; r < D; r++ {
		outs[r] = dst[r]
		if !gather {
			outs[r] = dst[r][chunk[r]:chunk[r+1]]
		}
	}
	return outs, nil
}

func TestRingProtocolModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	geoms := []coll.RingGeom{{Blocks: 3, Seg: 48, Slots: 2}, {Blocks: 5, Seg: 64, Slots: 3}, {Blocks: 2, Seg: 16, Slots: 4}, {Blocks: 64, Seg: 256 << 10, Slots: 4},
		{Blocks: 3, Seg: 48, Slots: 3, Wave: true}, {Blocks: 2, Seg: 16, Slots: 4, Wave: true}, {Blocks: 3, Seg: 32, Slots: 16, Wave: true}, coll.RingDefault}
	for _, g := range geoms {
		for _, D := range []int{2, 3, 4, 5} {
			for _, n := range []int64{1, 7, 61, 1003} {
				for _, gather := range []bool{true, false} {
					for _, avg := range []bool{false, true} {
						name := fmt.Sprintf("%v D=%d n=%d gather=%v avg=%v", g, D, n, gather, avg)
						nn := n
						if !gather {
							nn = n * int64(D) // reduce_scatter: n per rank
						}
						src := make([][]float32, D)
						for r := range src {
							src[r] = make([]float32, nn)
							for i := range src[r] {
								src[r][i] = bf16Round(float32(rng.NormFloat64() * 100))
							}
						}
						outs, err := runRingModel(t, rng, g, D, nn, gather, avg, g.UseWave(D, gather), src)
						require.NoError(t, err)
						// The reference: chunk c in ring order c+1, ..., c.
						want := make([]float32, nn)
						for c := 0; c < D; c++ {
							var lo, hi int64
							if gather {
								lo, hi = nn*int64(c)/int64(D), nn*int64(c+1)/int64(D)
							} else {
								lo, hi = n*int64(c), n*int64(c+1)
							}
							for i := lo; i < hi; i++ {
								v := src[(c+1)%D][i]
								for s := 2; s <= D; s++ {
									v = bf16Round(v + src[(c+s)%D][i])
								}
								if avg {
									v = bf16Round(v / float32(D))
								}
								want[i] = v
							}
						}
						for r := 0; r < D; r++ {
							w := want
							if !gather {
								w = want[n*int64(r) : n*int64(r+1)]
							}
							for i := range w {
								if math.Float32bits(outs[r][i]) != math.Float32bits(w[i]) { // checked here, not by testify: it runs for every element
									require.Failf(t, "an element differs from the reference", "%s: rank %d element %d: got %v want %v", name, r, i, outs[r][i], w[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// The slots the wave order needs: fewer deadlock (a sender waits for an
// ack its receiver gives only after a later step), as the model shows;
// ringWaveSlots must be at least the least that never does.
func TestRingWaveSlots(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, gather := range []bool{true, false} {
		for D := 2; D <= 8; D++ {
			least := 0
			for K := int64(2); K <= 40 && least == 0; K++ {
				g := coll.RingGeom{Blocks: 2, Seg: 16, Slots: K, Wave: true}
				n := int64(8 * (2*D + 6) * 2 * D) // 2D+6 segments per block
				src := make([][]float32, D)
				for r := range src {
					src[r] = make([]float32, n)
				}
				ok := true
				for try := 0; try < 50 && ok; try++ {
					if _, err := runRingModel(t, rng, g, D, n, gather, false, true, src); err != nil {
						ok = false
					}
				}
				if ok {
					least = int(K)
				}
			}
			want := coll.RingWaveSlots(D, gather)
			if assert.NotZero(t, least, "D=%d gather=%v: the wave order needs %d slots; ringWaveSlots says %d", D, gather, least, want) &&
				assert.GreaterOrEqual(t, want, least, "D=%d gather=%v: the wave order needs %d slots; ringWaveSlots says %d", D, gather, least, want) {
				t.Logf("D=%d gather=%v: wave needs %d slots, ringWaveSlots %d", D, gather, least, want)
			}
		}
	}
}
