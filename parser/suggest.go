package parser

import (
	"sort"
	"strings"
)

// suggest returns the candidate closest to word in edit distance, or "" when
// none is close enough to be a likely typo.
func suggest(word string, candidates []string) string {
	limit := 1
	switch n := len(word); {
	case n > 6:
		limit = 3
	case n > 3:
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if c == word {
			continue
		}
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean is " (did you mean X?)" or "".
func didYouMean(word string, candidates []string, prefix string) string {
	if s := suggest(word, candidates); s != "" {
		return " (did you mean " + prefix + s + "?)"
	}
	return ""
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

// opNames lists every spelling the text accepts in op position.
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
