package editdist

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"name", "name", 0}, {"", "abc", 3}, {"abc", "", 3},
		{"nmae", "name", 1},             // transposition
		{"sumary", "summary", 1},        // insertion
		{"entrypiont", "entrypoint", 1}, // transposition
		{"memory", "memroy", 1},         // transposition
		{"kitten", "sitting", 3},        // substitutions and an insertion
		{"ca", "abc", 3},                // OSA, not Damerau: no edit of a transposed pair
		{"größe", "grösse", 2},          // runes, not bytes
		{"abc", "xyz", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}
