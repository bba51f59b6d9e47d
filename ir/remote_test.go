package ir

import (
	"os"
	"strings"
	"testing"
)

// The docs print the symmetric-heap table; keep them equal to the code.
func TestRulesTableInArchitectureDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), RulesTable()) {
		t.Fatalf("docs/ARCHITECTURE.md does not contain the current rules table; paste this in:\n%s", RulesTable())
	}
}

func TestEveryCollectiveHasRules(t *testing.T) {
	for _, op := range Opcodes() {
		if !op.IsCollective() {
			continue
		}
		algos := Algorithms(op)
		if len(algos) == 0 || algos[0] != AlgoAuto {
			t.Errorf("%s: algorithms %v must start with auto", op, algos)
		}
		if _, ok := LookupRule(op, AlgoNCCL); !ok {
			t.Errorf("%s has no nccl rule", op)
		}
		for _, a := range algos {
			if !contains(AlgoWords, a.String()) {
				t.Errorf("%s: algorithm %q is not in AlgoWords", op, a)
			}
		}
	}
	for _, op := range Opcodes() {
		if algos := op.Info().Algos; !op.IsCollective() && len(algos) > 0 {
			t.Errorf("%s is no collective but lists algorithms %v", op, algos)
		}
		seen := map[Algo]bool{}
		for _, a := range Algorithms(op) {
			if seen[a] {
				t.Errorf("%s lists %s twice", op, a)
			}
			seen[a] = true
		}
	}
	if _, ok := LookupRule(OpAllToAll, AlgoTwoShot); ok {
		t.Error("all_to_all must not have two_shot")
	}
}

func TestAlgoAndReduceOpWords(t *testing.T) {
	for _, w := range AlgoWords {
		a, ok := ParseAlgo(w)
		if !ok || a.String() != w {
			t.Errorf("ParseAlgo(%q) = %v, %v", w, a, ok)
		}
	}
	for _, w := range ReduceOpWords {
		r, ok := ParseReduceOp(w)
		if !ok || r.String() != w || !r.Valid() {
			t.Errorf("ParseReduceOp(%q) = %v, %v", w, r, ok)
		}
	}
	if _, ok := ParseAlgo("two_shots"); ok {
		t.Error("ParseAlgo accepted two_shots")
	}
	if _, ok := ParseReduceOp(""); ok {
		t.Error(`ParseReduceOp accepted ""`)
	}
	if ReduceUnset.Valid() {
		t.Error("ReduceUnset is Valid")
	}
}
