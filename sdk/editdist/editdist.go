// Package editdist is the one edit distance, and the rankings built on it,
// behind the "did you mean" suggestions for a misspelt key of
// config.json (kernel/config) and field of agentnode.yaml
// (kernel/manifest). It sits in sdk, below the kernel, because it holds
// pure string functions with no part in any decision: both loaders only
// name the likely intended key in the errors a run reports.
package editdist

import (
	"slices"
	"sort"
	"strings"
)

// Distance is the optimal-string-alignment distance between a and b, in
// runes: insertions, deletions, substitutions and transpositions of
// adjacent runes each count 1.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// Closest returns up to three keys of known close to key, a dotted key
// (sandbox.limits.memory_mb): the same last element first, then small
// edit distances of the whole key or of its last element, then keys whose
// last element holds every "_"-separated word of key's.
func Closest(known []string, key string) []string {
	last := key[strings.LastIndex(key, ".")+1:]
	type cand struct {
		key  string
		dist int
	}
	var cs []cand
	for _, k := range known {
		d := Distance(key, k)
		klast := k[strings.LastIndex(k, ".")+1:]
		switch {
		case last != "" && klast == last:
			d = 0
		case d <= max(2, len(k)/5):
		case last != "" && Distance(last, klast) <= max(1, len(klast)/5):
			d = max(1, d/2)
		case last != "" && wordsIn(last, klast):
			d = max(2, d/2)
		default:
			continue
		}
		cs = append(cs, cand{k, d})
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].dist != cs[j].dist {
			return cs[i].dist < cs[j].dist
		}
		return cs[i].key < cs[j].key
	})
	var out []string
	for _, c := range cs {
		if c.key == key || len(out) == 3 {
			continue
		}
		out = append(out, c.key)
	}
	return out
}

// wordsIn reports whether every "_"-separated word of a is a word of b
// (minimum_level → minimum_trust_level).
func wordsIn(a, b string) bool {
	bw := strings.Split(b, "_")
	for _, w := range strings.Split(a, "_") {
		if !slices.Contains(bw, w) {
			return false
		}
	}
	return true
}

// Nearest returns the known name closest to name if it is close enough to
// be a typo of it: at most 2 edits away (1 for names of up to 4 bytes).
func Nearest(name string, known []string) string {
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, k := range known {
		if d := Distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
