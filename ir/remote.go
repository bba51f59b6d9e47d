package ir

import (
	"fmt"
	"strings"
)

// RemoteAccess says which of a collective's tensors peers touch through the
// symmetric heap. A tensor read remotely must be symmetric (a pass imports it
// when it is not); a tensor written remotely must already be symmetric.
type RemoteAccess struct {
	ReadsInput   bool // peers load from this rank's input
	WritesOutput bool // peers store into this rank's output
}

// CollectiveRule is one cell of the symmetric-heap table.
type CollectiveRule struct {
	Op     Opcode
	Algo   Algo
	Access RemoteAccess
}

var (
	none   = RemoteAccess{}
	reads  = RemoteAccess{ReadsInput: true}
	writes = RemoteAccess{WritesOutput: true}
	both   = RemoteAccess{ReadsInput: true, WritesOutput: true}
)

// symmetricRules is the one place that says which algorithms each collective
// has and what each touches remotely. `auto` is listed with the access the
// runtime may rely on: it picks only algorithms whose needs the operands meet.
var symmetricRules = []CollectiveRule{
	{OpAllGather, AlgoAuto, writes},
	{OpAllGather, AlgoOneShot, writes},
	{OpAllGather, AlgoRing, writes},
	{OpAllGather, AlgoCopyEngine, reads},
	{OpAllGather, AlgoNCCL, none},

	{OpReduceScatter, AlgoAuto, reads},
	{OpReduceScatter, AlgoOneShot, reads},
	{OpReduceScatter, AlgoRing, none},
	{OpReduceScatter, AlgoNCCL, none},

	{OpAllReduce, AlgoAuto, reads},
	{OpAllReduce, AlgoOneShot, reads},
	{OpAllReduce, AlgoTwoShot, both},
	{OpAllReduce, AlgoRing, none},
	{OpAllReduce, AlgoNCCL, none},

	{OpAllToAll, AlgoAuto, both},
	{OpAllToAll, AlgoOneShot, both},
	{OpAllToAll, AlgoNCCL, none},

	{OpBroadcast, AlgoAuto, reads},
	{OpBroadcast, AlgoOneShot, reads},
	{OpBroadcast, AlgoNCCL, none},

	{OpReduce, AlgoAuto, reads},
	{OpReduce, AlgoOneShot, reads},
	{OpReduce, AlgoNCCL, none},

	{OpGather, AlgoAuto, reads},
	{OpGather, AlgoOneShot, reads},
	{OpGather, AlgoNCCL, none},

	{OpScatter, AlgoAuto, reads},
	{OpScatter, AlgoOneShot, reads},
	{OpScatter, AlgoNCCL, none},
}

// SymmetricRules returns the whole table, in a stable order.
func SymmetricRules() []CollectiveRule { return append([]CollectiveRule(nil), symmetricRules...) }

// LookupRule returns what collective op with algorithm algo touches
// remotely; ok is false when op has no such algorithm.
func LookupRule(op Opcode, algo Algo) (access RemoteAccess, ok bool) {
	for _, r := range symmetricRules {
		if r.Op == op && r.Algo == algo {
			return r.Access, true
		}
	}
	return RemoteAccess{}, false
}

// Algorithms lists the algorithms collective op supports.
func Algorithms(op Opcode) []Algo {
	var out []Algo
	for _, r := range symmetricRules {
		if r.Op == op {
			out = append(out, r.Algo)
		}
	}
	return out
}

// RulesTable renders the symmetric-heap table as Markdown, for the docs and
// `hirrun rules`.
func RulesTable() string {
	var b strings.Builder
	b.WriteString("| collective | algo | reads input remotely | writes output remotely |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	yes := func(x bool) string {
		if x {
			return "yes"
		}
		return "no"
	}
	for _, r := range symmetricRules {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Op, r.Algo, yes(r.Access.ReadsInput), yes(r.Access.WritesOutput))
	}
	return b.String()
}
