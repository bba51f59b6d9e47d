package parser

import (
	"iter"
	"slices"
	"sort"
	"strings"
)

// Suggest returns the candidate closest to word in edit distance (letters
// compared without case), or "" when none is close enough to be a likely
// typo (none for one letter but its other case, 1 edit for words of up to
// 3 letters, 2 up to 6, else 3); of
// candidates as close, the first in sorted order. It is the "did you
// mean" of the parser's messages, for tools that name the program's
// values too (hirrun's --input, --output, --expect).
func Suggest(word string, candidates []string) string {
	return suggestAmong(word, slices.Values(candidates))
}

func suggest(word string, candidates []string) string { return Suggest(word, candidates) }

// suggestAmong is suggest over any number of candidates (every name a
// program defines): most are ruled out by their length or letters without
// an edit distance being computed, and none costs an allocation.
func suggestAmong(word string, candidates iter.Seq[string]) string {
	limit := 1
	switch n := len(word); {
	case n > 6:
		limit = 3
	case n > 3:
		limit = 2
	case n == 1:
		limit = 0 // a letter is one edit from every other: only its other case
	}
	m := newMatcher(word)
	best, bestDist := "", limit+1
	for c := range candidates {
		if c == word {
			continue
		}
		d := m.distance(c, bestDist)
		if d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean is " (did you mean X?)" or "".
func didYouMean(word string, candidates []string, prefix string) string {
	return didYouMeanAmong(word, slices.Values(candidates), prefix)
}

func didYouMeanAmong(word string, candidates iter.Seq[string], prefix string) string {
	if s := suggestAmong(word, candidates); s != "" {
		return " (did you mean " + prefix + s + "?)"
	}
	return ""
}

// matcher measures the edit distance from one word, lower-cased, to
// others.
type matcher struct {
	word  string // lower-cased
	ascii bool
	set   [2]uint64 // the bytes of word (ASCII)
}

func newMatcher(word string) *matcher {
	m := &matcher{word: strings.ToLower(word), ascii: isASCII(word)}
	for i := 0; i < len(m.word); i++ {
		c := m.word[i]
		m.set[c>>6] |= 1 << (c & 63)
	}
	return m
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// distance is editDistance(m.word, lower-cased c) where that is at most
// limit, and more than limit otherwise.
func (m *matcher) distance(c string, limit int) int {
	if !m.ascii || !isASCII(c) {
		return editDistance(m.word, strings.ToLower(c))
	}
	a := m.word
	if len(a) > 64 || len(c) > 64 {
		if len(a) == len(c) && strings.EqualFold(a, c) {
			return 0
		}
		return 1 << 20
	}
	// Lower bounds: the difference in length, and the letters of each that
	// the other lacks (each takes an edit of its own).
	if d := len(a) - len(c); d > limit || -d > limit {
		return limit + 1
	}
	var set [2]uint64
	foreign := 0
	for i := 0; i < len(c); i++ {
		ch := lower(c[i])
		set[ch>>6] |= 1 << (ch & 63)
		if m.set[ch>>6]&(1<<(ch&63)) == 0 {
			foreign++
		}
	}
	if foreign > limit {
		return limit + 1
	}
	foreign = 0
	for i := 0; i < len(a); i++ {
		if ch := a[i]; set[ch>>6]&(1<<(ch&63)) == 0 {
			foreign++
		}
	}
	if foreign > limit {
		return limit + 1
	}
	// Levenshtein, a row at a time, given up once a row's least is over
	// limit (no later row's is less).
	var prevBuf, curBuf [65]int
	prev, cur := prevBuf[:len(c)+1], curBuf[:len(c)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		least := i
		for j := 1; j <= len(c); j++ {
			cost := 1
			if a[i-1] == lower(c[j-1]) {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			least = min(least, cur[j])
		}
		if least > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(c)]
}

// editDistance is the Levenshtein distance between a and b, counted in
// bytes (names are ASCII).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Long words are never typos of our short keywords; skip the
		// quadratic work.
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// opNameList lists every spelling the text accepts in op position, sorted.
var opNameList = opNames()

func opNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, op := range allOpcodes {
		if n := op.String(); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
