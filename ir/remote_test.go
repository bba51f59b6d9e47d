package ir

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The docs print the symmetric-heap table; keep them equal to the code.
func TestRulesTableInArchitectureDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/ARCHITECTURE.md")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(doc), RulesTable()), "docs/ARCHITECTURE.md does not contain the current rules table; paste this in:\n%s", RulesTable())
}

func TestEveryCollectiveHasRules(t *testing.T) {
	for _, op := range Opcodes() {
		if !op.IsCollective() {
			continue
		}
		algos := Algorithms(op)
		if assert.NotEmpty(t, algos, "%s: algorithms must start with auto", op) {
			assert.Equal(t, AlgoAuto, algos[0], "%s: algorithms %v must start with auto", op, algos)
		}
		_, ok := LookupRule(op, AlgoNCCL)
		assert.True(t, ok, "%s has no nccl rule", op)
		for _, a := range algos {
			assert.Contains(t, AlgoWords, a.String(), "%s: algorithm %q is not in AlgoWords", op, a)
		}
	}
	for _, op := range Opcodes() {
		if !op.IsCollective() {
			assert.Empty(t, op.Info().Algos, "%s is no collective but lists algorithms", op)
		}
		seen := map[Algo]bool{}
		for _, a := range Algorithms(op) {
			assert.False(t, seen[a], "%s lists %s twice", op, a)
			seen[a] = true
		}
	}
	_, ok := LookupRule(OpAllToAll, AlgoTwoShot)
	assert.False(t, ok, "all_to_all must not have two_shot")
}

func TestAlgoAndReduceOpWords(t *testing.T) {
	for _, w := range AlgoWords {
		a, ok := ParseAlgo(w)
		assert.True(t, ok, "ParseAlgo(%q)", w)
		assert.Equal(t, w, a.String(), "ParseAlgo(%q)", w)
	}
	for _, w := range ReduceOpWords {
		r, ok := ParseReduceOp(w)
		assert.True(t, ok, "ParseReduceOp(%q)", w)
		assert.Equal(t, w, r.String(), "ParseReduceOp(%q)", w)
		assert.True(t, r.Valid(), "ParseReduceOp(%q) = %v is not Valid", w, r)
	}
	_, ok := ParseAlgo("two_shots")
	assert.False(t, ok, "ParseAlgo accepted two_shots")
	_, ok = ParseReduceOp("")
	assert.False(t, ok, `ParseReduceOp accepted ""`)
	assert.False(t, ReduceUnset.Valid(), "ReduceUnset is Valid")
}
