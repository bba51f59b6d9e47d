// Package tp builds the two tensor-parallel patterns of a transformer
// block into hir programs, each in several decompositions that overlap
// communication with compute differently (docs/OVERLAP.md):
//
//   - AllGatherMatmul: a sequence-parallel input x, sharded by rows, is
//     gathered and multiplied by a weight block w.
//   - MatmulReduceScatter: the partial product a × w of every rank is
//     summed and scattered by rows.
//
// Every decomposition gives the unpipelined program's result; they differ
// in how the work is cut:
//
//   - Unpipelined: one collective and one matmul.
//   - Chunked: each rank's block of rows is cut into Chunks pieces, and a
//     collective moves one piece of every rank's block at a time, so the
//     matmul of a piece can run while the next piece moves.
//   - PeerRing: Mesh size steps; at step s each rank works on the block of
//     rank (its own + s) mod the mesh, reading it from that peer (or
//     writing its partial into that peer's slot) through the symmetric
//     contiguous view, with no collective.
//   - LocalFirst (all_gather + matmul): this rank's own rows are
//     multiplied where they lie while the copy engines fetch the peers'
//     rows on a stream of the decomposition's own (one copy per peer out
//     of the symmetric contiguous view, back to back); each peer's rows
//     are multiplied once their copy has landed. No step copies rows it
//     already holds, and the first matmul waits for nothing. Chunks cuts
//     each peer's rows into pieces (each multiplied once it lands),
//     Streams deals the copies round that many streams.
//   - PeersFirst (matmul + reduce_scatter): the products of the peers'
//     blocks are made first, each pushed by the copy engines (a stream of
//     the decomposition's own) into its owner's slot while the next is
//     made; this rank's own product goes straight into its own slot, the
//     ranks meet on the device (stream_barrier), and each sums its slots.
//     Chunks cuts each push into pieces of rows, Streams deals them round
//     that many push streams (several copy engines at once).
//   - RingAccumulate (matmul + reduce_scatter): the partial sum for each
//     owner travels round the ring and every rank adds its product to it
//     as it passes (matmul accumulate=true: cuBLAS's beta = 1), so no
//     rank sums slots at the end. At step s a rank adds its product for
//     the owner s+1 ranks behind it into the partial the rank before it
//     pushed, then pushes that on to the rank after it (the copy
//     engines); the last step's owner is the rank itself, and its partial
//     is the result. Chunks cuts each block into pieces of rows (0 means
//     2), each a chain of its own: a piece's push moves while the next
//     piece is multiplied. Before each accumulation the ranks meet on the
//     device (stream_barrier), so the partial it adds into has landed.
//     Streams is how many push streams (0 means one per piece).
//   - ChunkedAsync: Chunked's pieces, with every collective async
//     (`async=true`): they run one after another on the communication
//     stream while the matmuls run on the current one, each waiting
//     (`wait`) for its own piece only. Chunked on two streams lets two
//     pieces' collectives share the links at once (a GPU timeline showed
//     it, docs/OVERLAP.md); here they take turns, and piece i+1 moves
//     while piece i is multiplied. Unrolled (no loop): every piece's
//     async result is a value of its own.
//
// A framework calls the builders on its own ir.Builder; the results are
// ordinary values the program goes on with.
package tp

import (
	"fmt"

	"github.com/hirlab/hir/ir"
)

// Decomposition says how a pattern is cut into communication and compute.
type Decomposition int

const (
	Unpipelined Decomposition = iota
	Chunked
	PeerRing
	ChunkedAsync
	LocalFirst
	PeersFirst
	RingAccumulate
)

var decompositionNames = [...]string{"unpipelined", "chunked", "peer_ring", "chunked_async", "local_first", "peers_first", "ring_accumulate"}

func (d Decomposition) String() string {
	if d >= 0 && int(d) < len(decompositionNames) {
		return decompositionNames[d]
	}
	return fmt.Sprintf("Decomposition(%d)", int(d))
}

// Decompositions lists them all, in order.
func Decompositions() []Decomposition {
	return []Decomposition{Unpipelined, Chunked, PeerRing, ChunkedAsync, LocalFirst, PeersFirst, RingAccumulate}
}

// Pattern names one of the two tensor-parallel patterns.
type Pattern int

const (
	AGMatmul Pattern = iota // all_gather + matmul (AllGatherMatmul)
	MatmulRS                // matmul + reduce_scatter (MatmulReduceScatter)
)

var patternNames = [...]string{"all_gather_matmul", "matmul_reduce_scatter"}

func (p Pattern) String() string {
	if p >= 0 && int(p) < len(patternNames) {
		return patternNames[p]
	}
	return fmt.Sprintf("Pattern(%d)", int(p))
}

// Has says whether pattern p has decomposition d: LocalFirst is
// all_gather + matmul's only, PeersFirst and RingAccumulate matmul +
// reduce_scatter's.
func (d Decomposition) Has(p Pattern) bool {
	switch d {
	case LocalFirst:
		return p == AGMatmul
	case PeersFirst, RingAccumulate:
		return p == MatmulRS
	}
	return true
}

// DecompositionsOf lists p's decompositions, in order.
func DecompositionsOf(p Pattern) []Decomposition {
	var ds []Decomposition
	for _, d := range Decompositions() {
		if d.Has(p) {
			ds = append(ds, d)
		}
	}
	return ds
}

// Options choose a decomposition and its parameters.
type Options struct {
	Decomposition Decomposition
	// Chunks is how many pieces Chunked and ChunkedAsync cut each rank's
	// block of rows into (0 means 2), and LocalFirst and PeersFirst each
	// peer's block they fetch or push (0 means 1: whole); it must divide
	// the block's rows.
	Chunks int
	// Algo is the algorithm of the collectives (auto when zero).
	Algo ir.Algo
	// Streams spreads the loop's iterations over this many streams
	// (`for ... streams N`, the stream-parallel pass), so one step's
	// communication overlaps another's matmul; 0 keeps them on the
	// current stream. For LocalFirst and PeersFirst it is how many
	// streams the copies go on (0 means 1), the pieces dealt round them,
	// so several copy engines move at once. ChunkedAsync has no loop and
	// ignores it.
	Streams int
}

// loop appends the decomposition's loop over n steps, on o.Streams
// streams when set.
func (o Options) loop(b *ir.Builder, index string, n int64, body func(i *ir.Value)) {
	op := b.For(index, 0, n, 1, body)
	if o.Streams > 0 {
		op.SetAttr("streams", ir.AttrValue{Kind: ir.KindInt, Int: int64(o.Streams)})
	}
}

// shapes checks the operands of a pattern: a rank-2 float tensor x (its
// rows sharded when sharded is set, symmetric when symmetric is set) and
// a rank-2 weight w of x's dtype with as many rows as x has columns.
func shapes(pattern string, mesh int, x, w *ir.Value, sharded bool) (rows, k, n int64, err error) {
	xt, wt := x.Tensor(), w.Tensor()
	switch {
	case xt == nil || wt == nil:
		return 0, 0, 0, fmt.Errorf("tp.%s: %s and %s need tensor types (declare them as inputs, or give their types)", pattern, x, w)
	case xt.Rank() != 2 || wt.Rank() != 2:
		return 0, 0, 0, fmt.Errorf("tp.%s: %s is %s and %s is %s; both must be rank 2", pattern, x, xt, w, wt)
	case sharded && (xt.Dims[0].Parallel != ir.DIDx || xt.Dims[1].Parallel == ir.DIDx):
		return 0, 0, 0, fmt.Errorf("tp.%s: %s is %s; it must be sharded by rows only ([M/DIDx, K])", pattern, x, xt)
	case !sharded && xt.IsSharded():
		return 0, 0, 0, fmt.Errorf("tp.%s: %s is %s; it must be unsharded (this rank's [M, K] block)", pattern, x, xt)
	case wt.IsSharded():
		return 0, 0, 0, fmt.Errorf("tp.%s: the weight %s is %s; it must be unsharded (this rank's block)", pattern, w, wt)
	case xt.Dims[1].Extent != wt.Dims[0].Extent:
		return 0, 0, 0, fmt.Errorf("tp.%s: %s is %s and %s is %s: the contracted extents differ", pattern, x, xt, w, wt)
	case xt.Dims[0].Extent%int64(mesh) != 0:
		return 0, 0, 0, fmt.Errorf("tp.%s: %s has %d rows, which the mesh of %d ranks does not divide", pattern, x, xt.Dims[0].Extent, mesh)
	}
	return xt.Dims[0].Extent, xt.Dims[1].Extent, wt.Dims[1].Extent, nil
}

// check is a pattern's common prologue: the mesh size, the operands'
// shapes (shapes) and o's stream count.
func (o Options) check(b *ir.Builder, pattern string, x, w *ir.Value, sharded bool) (mesh, m, k, n int64, err error) {
	mesh = int64(b.Mesh().Size())
	if m, k, n, err = shapes(pattern, int(mesh), x, w, sharded); err != nil {
		return 0, 0, 0, 0, err
	}
	if o.Streams < 0 {
		return 0, 0, 0, 0, fmt.Errorf("tp.%s: %d streams; give 0 (none) or more", pattern, o.Streams)
	}
	return mesh, m, k, n, nil
}

// pieces is o.Chunks as LocalFirst and PeersFirst read it (0 means 1:
// each peer's block moves whole), checked against a block of rows.
func (o Options) pieces(pattern string, rows int64) (int64, error) {
	if o.Chunks == 0 {
		return 1, nil
	}
	return o.chunks(pattern, rows)
}

// sideStreams makes the streams LocalFirst fetches on and PeersFirst
// pushes on: o.Streams of them (0 means 1), none on a mesh of one rank.
func (o Options) sideStreams(b *ir.Builder, mesh int64) []*ir.Value {
	if mesh < 2 {
		return nil
	}
	ss := make([]*ir.Value, max(1, o.Streams))
	for i := range ss {
		ss[i] = b.Op(ir.OpStream).Value()
	}
	return ss
}

// split cuts t, a block of c*ch rows of cols, into its c pieces of ch
// rows (views); t itself when c is 1.
func split(b *ir.Builder, t *ir.Value, c, ch, cols int64) []*ir.Value {
	if c == 1 {
		return []*ir.Value{t}
	}
	t3 := reshape(b, t, c, ch, cols)
	ps := make([]*ir.Value, c)
	for j := range ps {
		ps[j] = sel(b, t3, ir.Int(int64(j)), 0, false)
	}
	return ps
}

// chunks is o.Chunks checked against a block of rows.
func (o Options) chunks(pattern string, rows int64) (int64, error) {
	c := int64(o.Chunks)
	if c == 0 {
		c = 2
	}
	if c < 1 || rows%c != 0 {
		return 0, fmt.Errorf("tp.%s: %d chunks do not divide a block of %d rows", pattern, c, rows)
	}
	return c, nil
}

func tensor(dt ir.DType, mem ir.MemoryType, shape ...int64) *ir.TensorType {
	return ir.Tensor(dt, shape...).In(mem)
}

func (o Options) collective(b *ir.Builder, code ir.Opcode, x *ir.Value) *ir.OpBuilder {
	return b.Collective(code, x, o.Algo)
}

func reshape(b *ir.Builder, x *ir.Value, shape ...int64) *ir.Value {
	return b.Op(ir.OpReshape, x).Ints("shape", shape...).Value()
}

// sel selects index i of axis 0 of x; with byRank, index (i + rank) mod
// the extent (select's shift=rank).
func sel(b *ir.Builder, x, i *ir.Value, axis int64, byRank bool) *ir.Value {
	ob := b.Op(ir.OpSelect, x, i)
	if axis != 0 {
		ob.Int("axis", axis)
	}
	if byRank {
		ob.Word("shift", "rank")
	}
	return ob.Value()
}
