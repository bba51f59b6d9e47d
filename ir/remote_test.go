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
		if len(algos) == 0 || algos[0] != "auto" {
			t.Errorf("%s: algorithms %v must start with auto", op, algos)
		}
		if _, ok := LookupRule(op, "nccl"); !ok {
			t.Errorf("%s has no nccl rule", op)
		}
		for _, a := range algos {
			if !contains(AlgoWords, a) {
				t.Errorf("%s: algorithm %q is not in AlgoWords", op, a)
			}
		}
	}
	if _, ok := LookupRule(OpAllToAll, "two_shot"); ok {
		t.Error("all_to_all must not have two_shot")
	}
}
