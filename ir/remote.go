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

// symmetricRules is the symmetric-heap table read off the collectives'
// OpInfo.Algos (ops.go, where each collective declares its algorithms),
// in opcode order.
var symmetricRules = func() []CollectiveRule {
	var rules []CollectiveRule
	for op := OpInvalid + 1; op < numOpcodes; op++ {
		for _, a := range opInfos[op].Algos {
			rules = append(rules, CollectiveRule{Op: op, Algo: a.Algo, Access: a.Access})
		}
	}
	return rules
}()

// SymmetricRules returns the whole table, in a stable order.
func SymmetricRules() []CollectiveRule { return append([]CollectiveRule(nil), symmetricRules...) }

// LookupRule returns what collective op with algorithm algo touches
// remotely; ok is false when op has no such algorithm.
func LookupRule(op Opcode, algo Algo) (access RemoteAccess, ok bool) {
	for _, a := range op.Info().Algos {
		if a.Algo == algo {
			return a.Access, true
		}
	}
	return RemoteAccess{}, false
}

// Algorithms lists the algorithms collective op supports, auto first.
func Algorithms(op Opcode) []Algo {
	algos := op.Info().Algos
	if len(algos) == 0 {
		return nil
	}
	out := make([]Algo, len(algos))
	for i, a := range algos {
		out[i] = a.Algo
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

// BenchmarkedCollectives lists the collectives `hirrun bench` times and
// auto's table ranks (OpInfo.Benchmarked), in opcode order.
func BenchmarkedCollectives() []Opcode {
	var out []Opcode
	for op := OpInvalid + 1; op < numOpcodes; op++ {
		if opInfos[op].Benchmarked {
			out = append(out, op)
		}
	}
	return out
}
