package ir

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorListKeepsTheFirst adds many errors in a shuffled order, with
// ties: the list keeps MaxErrors of them, which are the first MaxErrors of
// every error sorted (stably, so ties in the order added), and counts the
// rest.
func TestErrorListKeepsTheFirst(t *testing.T) {
	for _, n := range []int{0, 1, MaxErrors - 1, MaxErrors, MaxErrors + 1, 2*MaxErrors + 3, 5000} {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		var all, l ErrorList
		for i := range n {
			// Lines repeat (ties), and a run of them comes in order, as a
			// parser's errors mostly do.
			line := i
			if rng.IntN(3) == 0 {
				line = rng.IntN(n)
			}
			pos := NewPos("a.hir", line/3+1, 1)
			all = append(all, &Error{Pos: pos, Msg: fmt.Sprint("error ", i)})
			l.Add(pos, "error %d", i)
		}
		require.LessOrEqual(t, len(l), MaxErrors, "n=%d", n)
		assert.Equal(t, n, l.Count(), "n=%d", n)
		all.Sort()
		err := l.Err()
		if n == 0 {
			assert.NoError(t, err)
			continue
		}
		var want strings.Builder
		for i, e := range all[:min(n, MaxErrors)] {
			if i > 0 {
				want.WriteString("\n")
			}
			want.WriteString(e.Error())
		}
		if n > MaxErrors {
			fmt.Fprintf(&want, "\nand %d more error", n-MaxErrors)
			if n-MaxErrors > 1 {
				want.WriteString("s")
			}
		}
		assert.EqualError(t, err, want.String(), "n=%d", n)
	}
}

// A full list says which errors it keeps, and counts the others without
// formatting them.
func TestErrorListKeeps(t *testing.T) {
	var l ErrorList
	for i := range MaxErrors + 1 {
		assert.True(t, l.Keeps(NewPos("a.hir", 10+i, 1)))
		l.Add(NewPos("a.hir", 10+i, 1), "e%d", i)
	}
	last := NewPos("a.hir", 10+MaxErrors-1, 1)
	assert.False(t, l.Keeps(last), "at the last kept error")
	assert.False(t, l.Keeps(NewPos("a.hir", 1000, 1)))
	assert.True(t, l.Keeps(NewPos("a.hir", 1, 1)))
	assert.True(t, l.Keeps(NewPos("a.hir", 10+MaxErrors-2, 9)))
	l.Add(NewPos("a.hir", 2000, 1), "%v", panicky{})
	assert.Equal(t, MaxErrors+2, l.Count())
	// One before the last kept pushes it out.
	l.Add(NewPos("a.hir", 1, 1), "early")
	assert.Equal(t, MaxErrors+3, l.Count())
	require.Len(t, l, MaxErrors)
	require.Error(t, l.Err())
	assert.Equal(t, "early", l[0].Msg)
	assert.Equal(t, fmt.Sprint("e", MaxErrors-2), l[MaxErrors-1].Msg)
	assert.True(t, strings.HasSuffix(l.Error(), "\nand 3 more errors"), l.Error())
}

// Errors that come in reverse order are each the first so far: a full
// list keeps each for a while, and formats only those it keeps in the end,
// where the arguments are values that cannot change. Others it formats as
// they come.
func TestErrorListFormatsWhatItKeeps(t *testing.T) {
	var l ErrorList
	n := 10 * MaxErrors
	for i := range n {
		l.Add(NewPos("a.hir", 1, n-i), "error %d of %s at %v", i, "many", NewPos("a.hir", 1, n-i))
	}
	for _, e := range l {
		assert.True(t, e.pending, "%s formatted before the list is", e.Pos)
	}
	mutable := &changing{"before"}
	l.Add(NewPos("a.hir", 1, 1), "with %s", mutable)
	mutable.s = "after"
	require.Error(t, l.Err())
	assert.Equal(t, n+1, l.Count())
	assert.Equal(t, fmt.Sprintf("error %d of many at a.hir:1:1", n-1), l[0].Msg)
	assert.Equal(t, "with before", l[1].Msg, "after the error at its position added before it")
	assert.Equal(t, fmt.Sprintf("error %d of many at a.hir:1:%d", n-MaxErrors+1, MaxErrors-1), l[MaxErrors-1].Msg)
}

type changing struct{ s string }

func (c *changing) String() string { return c.s }

// panicky fails the test if an error that is only counted is formatted.
type panicky struct{}

func (panicky) String() string { panic("formatted an error the list does not keep") }

// A list that is appended to and sorted by hand, as a caller merging lists
// does, still counts every error and prints the first.
func TestErrorListMerged(t *testing.T) {
	var a, b ErrorList
	for i := range 3 * MaxErrors {
		a.Add(NewPos("a.hir", 2*i+2, 1), "a%d", i)
		b.Add(NewPos("a.hir", 2*i+1, 1), "b%d", i)
	}
	merged := append(a, b...)
	assert.Equal(t, 6*MaxErrors, merged.Count())
	merged.Add(NewPos("a.hir", 1, 5), "c")
	err := merged.Err()
	require.Error(t, err)
	list := err.(ErrorList)
	require.Len(t, list, MaxErrors)
	assert.Equal(t, 6*MaxErrors+1, list.Count())
	lines := strings.Split(list.Error(), "\n")
	require.Len(t, lines, MaxErrors+1)
	assert.Equal(t, "a.hir:1:1: b0", lines[0])
	assert.Equal(t, "a.hir:1:5: c", lines[1])
	assert.Equal(t, "a.hir:2:1: a0", lines[2])
	assert.Equal(t, fmt.Sprintf("and %d more errors", 5*MaxErrors+1), lines[MaxErrors])
}
