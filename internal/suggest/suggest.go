// Package suggest names the known name closest to a misspelled one, for
// the errors that refuse an unknown column, key or field: "unknown column
// "max_num_seq" (did you mean "max_num_seqs"?)".
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the name of known nearest to name by edit distance
// (case, '-' and ' ' against '_' ignored), and whether it is near enough
// to be what was meant: at most a third of the longer name's letters
// differ (at least one).
func Closest(name string, known []string) (string, bool) {
	best, bestD := "", -1
	n := normal(name)
	for _, k := range known {
		if d := distance(n, normal(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 {
		return "", false
	}
	return best, bestD <= max(1, max(len(n), len(best))/3)
}

// Unknown describes an unknown name of a kind ("column", "key") for an
// error: the closest known name when it is near enough, else every known
// name.
func Unknown(kind, name string, known []string) string {
	if c, ok := Closest(name, known); ok {
		return fmt.Sprintf("unknown %s %q (did you mean %q?)", kind, name, c)
	}
	return fmt.Sprintf("unknown %s %q (known: %s)", kind, name, strings.Join(known, ", "))
}

func normal(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
}

// distance is the Levenshtein distance of a and b in bytes.
func distance(a, b string) int {
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
