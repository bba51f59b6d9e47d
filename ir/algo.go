package ir

import "fmt"

// Algo names a collective's algorithm. The text format spells it as a word
// (algo=ring); code compares and passes the typed constants, so a misspelt
// algorithm does not compile.
type Algo uint8

const (
	AlgoAuto       Algo = iota // the runtime picks (the zero value)
	AlgoOneShot                // one_shot
	AlgoTwoShot                // two_shot
	AlgoRing                   // ring
	AlgoCopyEngine             // copy_engine
	AlgoNCCL                   // nccl
	AlgoLL                     // ll: the low-latency protocol (flags in the data, no barrier)
	numAlgos
)

var algoNames = [numAlgos]string{"auto", "one_shot", "two_shot", "ring", "copy_engine", "nccl", "ll"}

// LLMaxBytes is the most data algo=ll sends from one rank to one peer in
// one call (LLPieceBytes): the protocol stages what it sends in the
// receiver's private staging, which holds this much per sender (small
// pieces as LL lines, 8 bytes with two flag words per line; larger ones
// in bulk, plain data with a flag per portion). The checker rejects
// larger calls; auto picks ll only below it.
const LLMaxBytes = 4 << 20

// LLPieceBytes is how many bytes algo=ll sends from one rank to one peer
// for collective op with local input and output sizes in and out (bytes)
// on world ranks: the whole input for all_reduce and broadcast, the input
// for all_gather, the output (one block) for reduce_scatter, one block of
// the input for all_to_all.
func LLPieceBytes(op Opcode, in, out int64, world int) int64 {
	switch op.Info().Layout {
	case LayoutGather:
		return in
	case LayoutScatter:
		return out
	case LayoutAllToAll:
		return in / int64(max(world, 1))
	}
	return in
}

// String is the algorithm's word in the text format.
func (a Algo) String() string {
	if a < numAlgos {
		return algoNames[a]
	}
	return fmt.Sprintf("Algo(%d)", uint8(a))
}

// ParseAlgo returns the algorithm spelled w.
func ParseAlgo(w string) (Algo, bool) {
	for a, n := range algoNames {
		if n == w {
			return Algo(a), true
		}
	}
	return numAlgos, false
}

// ReduceOp names how a reducing collective combines the ranks' values.
type ReduceOp uint8

const (
	// ReduceUnset is the zero value of a runtime.CollectiveCall's ReduceOp:
	// the reducing collectives take it as sum. It is no word of the text
	// format and prints as "".
	ReduceUnset ReduceOp = iota
	ReduceSum            // sum
	ReduceMax            // max
	ReduceMin            // min
	ReduceProd           // prod
	ReduceAvg            // avg (floats only)
	numReduceOps
)

var reduceOpNames = [numReduceOps]string{"", "sum", "max", "min", "prod", "avg"}

// String is the reduce op's word in the text format ("" when unset).
func (r ReduceOp) String() string {
	if r < numReduceOps {
		return reduceOpNames[r]
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(r))
}

// Valid reports whether r is one of the reduce ops of the text format.
func (r ReduceOp) Valid() bool { return r > ReduceUnset && r < numReduceOps }

// ParseReduceOp returns the reduce op spelled w.
func ParseReduceOp(w string) (ReduceOp, bool) {
	for r := ReduceSum; r < numReduceOps; r++ {
		if reduceOpNames[r] == w {
			return r, true
		}
	}
	return numReduceOps, false
}

// ReduceOps lists the reduce ops in the text format's order.
func ReduceOps() []ReduceOp {
	out := make([]ReduceOp, 0, numReduceOps-1)
	for r := ReduceSum; r < numReduceOps; r++ {
		out = append(out, r)
	}
	return out
}

// Words spells each of xs (algorithms, reduce ops) as the text format does.
func Words[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// SizeLimited says whether a's collectives have a size limit (AlgoFits).
func (a Algo) SizeLimited() bool { return a == AlgoLL }

// AlgoFits says whether algorithm algo can run collective op with local
// input and output sizes in and out (bytes) on world ranks: nil, or why
// not (only ll has a size limit: LLFits).
func AlgoFits(op Opcode, algo Algo, in, out int64, world int) error {
	if algo == AlgoLL {
		return LLFits(op, in, out, world)
	}
	return nil
}

// LLFits says whether algo=ll can run collective op with local input and
// output sizes in and out (bytes) on world ranks: an error naming the
// bytes each rank would send to a peer where that passes LLMaxBytes. The
// checker, both runtimes and auto's choice ask it.
func LLFits(op Opcode, in, out int64, world int) error {
	if n := LLPieceBytes(op, in, out, world); n > LLMaxBytes {
		return fmt.Errorf("algo=ll sends %d bytes from each rank to each peer here, above the %d it stages (ir.LLMaxBytes); use algo=auto or another algorithm for a tensor this large", n, LLMaxBytes)
	}
	return nil
}
