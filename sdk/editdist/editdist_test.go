package editdist

import (
	"slices"
	"testing"
)

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

// TestClosest ranks config-like dotted keys: the same last element first,
// then a typo of the whole key, then words of the last element; never the
// key itself, at most three.
func TestClosest(t *testing.T) {
	known := []string{"sandbox.limits.memory_mb", "sandbox.backend", "trust.minimum_trust_level", "guard.rate_limits", "sandbox.image", "sandbox.node_image"}
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"limits.memory_mb", []string{"sandbox.limits.memory_mb"}},
		{"sandbox.backnd", []string{"sandbox.backend"}},
		{"trust.minimum_level", []string{"trust.minimum_trust_level"}},
		{"sandbox.backend", nil},
		{"zzz.qqq", nil},
		{"sandbox.imag", []string{"sandbox.image"}},
	} {
		if got := Closest(known, c.key); !slices.Equal(got, c.want) {
			t.Errorf("Closest(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// TestNearest: the closest known name within 2 edits (1 for short names),
// else none.
func TestNearest(t *testing.T) {
	known := []string{"entrypoint", "permissions", "tools", "name"}
	for in, want := range map[string]string{"entrypiont": "entrypoint", "permisions": "permissions", "tool": "tools", "nmae": "name", "nm": "", "capabilities": ""} {
		if got := Nearest(in, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
