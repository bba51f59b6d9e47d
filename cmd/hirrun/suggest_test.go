package main

import (
	"testing"

	"github.com/hirlab/hir/ir"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDidYouMean(t *testing.T) {
	vals := func(names ...string) []*ir.Value {
		vs := make([]*ir.Value, len(names))
		for i, n := range names {
			vs[i] = &ir.Value{Name: n}
		}
		return vs
	}
	for _, tc := range []struct {
		name string
		vs   []*ir.Value
		want string
	}{
		{"X", vals("x", "w"), "; did you mean %x?"}, // another case
		{"wieght", vals("weight", "bias"), "; did you mean %weight?"},
		{"weights", vals("weight", "bias"), "; did you mean %weight?"},
		{"query", vals("key", "value"), ""}, // too far
		{"x", vals("x"), ""},                // itself is no suggestion
	} {
		assert.Equal(t, tc.want, didYouMean(tc.name, tc.vs), "didYouMean(%q)", tc.name)
	}
}

func TestMeantRandom(t *testing.T) {
	for value, want := range map[string]string{
		"rand":          "random",
		"r":             "random",
		"Random":        "random",
		"RANDOM:seed=3": "random:seed=3",
		"randon":        "random",
		"radnom:seed=1": "random:seed=1",
		"random.npy":    "",
		"x.npy":         "",
		"weights":       "",
		"":              "",
	} {
		got, ok := meantRandom(value)
		assert.Equal(t, want, got, "meantRandom(%q)", value)
		assert.Equal(t, want != "", ok, "meantRandom(%q)", value)
	}
}

// TestParseRandomSeeds: random alone takes the default seed (the input's
// position); seed=N overrides it; bad options say what is wrong.
func TestParseRandomSeeds(t *testing.T) {
	for value, want := range map[string]uint64{
		"random":                           3,
		"random:seed=0":                    0,
		"random:seed=7":                    7,
		"random:seed=18446744073709551615": 1<<64 - 1,
	} {
		got, err := parseRandom(value, 3)
		require.NoError(t, err, value)
		assert.Equal(t, want, got, value)
	}
	for value, msg := range map[string]string{
		"random:":                          "empty random option (want random alone, or random:seed=N)",
		"random:,seed=1":                   "empty random option (want random alone, or random:seed=N)",
		"random:seed=18446744073709551616": "seed 18446744073709551616 is out of range (at most 18446744073709551615)",
		"random:seed=x":                    `seed "x" is not a non-negative integer`,
		"random:seed=":                     `seed "" is not a non-negative integer`,
		"random:sed=1":                     `unknown random option "sed=1" (want random:seed=N)`,
	} {
		_, err := parseRandom(value, 3)
		assert.EqualError(t, err, msg, value)
	}
}
