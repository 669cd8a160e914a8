package bounded

import (
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/lexer"
)

// yamlSeeds are documents whose nesting the measure must not underestimate:
// tags and anchors around block collections, zero-indented sequences,
// explicit keys, block scalars, flow collections over several lines, and the
// hostile shapes of the attack suite.
var yamlSeeds = []string{
	"a: 1\n",
	"foo: !!seq\n  - !!str a\n  - !!map\n    key: !!str value\n",
	"--- !<tag:x,2002:invoice>\ninvoice: 1\ndate: 2\nbill: &id\n  given: x\n  address:\n    lines: |\n      458\n    city: y\n",
	"key: &a\n- a\n- b\n",
	"&a\n!!seq\n- x\n- [y, {z: w}]\n",
	"? a\n: b\n? !!str c\n: - d\n  - e\n",
	"- - - x\n  - y\n- z\n",
	"a:\n- b:\n  - c:\n    - d\n",
	"[a: [b: [c: d]], {e: {f: g}}]\n",
	"[\n  a,\n [b,\n  [c]]]\n",
	"lit: |\n  [[[[ ]]]] not structure\nnext: {a: [1, 2]}\n",
	"\"a\": 'b'\n\"c\": \"]]]]\"\nd: [[[]]]\n",
	"a: b # [[[[ comment\nc: d\n",
	strings.Repeat("- ", 100) + "x\n",
	strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n",
	strings.Repeat("{a: ", 100) + "b" + strings.Repeat("}", 100) + "\n",
	strings.Repeat("? ", 100) + "x\n",
	strings.Repeat("!!seq ", 50) + "[x]\n",
	"a: &a [1, 2]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n",
}

func TestYAMLDepth(t *testing.T) {
	lim := YAMLLimits{MaxDepth: 64, MaxTokens: 1 << 20}
	for _, tc := range []struct {
		doc  string
		want int // exact measure
	}{
		{"a: 1\n", 1},
		{"a:\n  b:\n    c: 1\n", 3},
		{"a:\n- 1\n- 2\n", 2},
		{"- - - x\n", 3},
		{"[[1], {a: [2]}]\n", 3},
		{"a: |\n  [[[[\n", 1},
		{"a: '[[[['\n", 1},
		{"a: [b, c] # {{{{\n", 2},
	} {
		toks := lexer.Tokenize(tc.doc)
		if got, _ := yamlDepth(toks, 1<<30); got != tc.want {
			t.Errorf("%q: depth %d, want %d", tc.doc, got, tc.want)
		}
		if _, err := YAML([]byte(tc.doc), lim); err != nil {
			t.Errorf("%q: %v", tc.doc, err)
		}
	}
	for _, doc := range []string{
		strings.Repeat("- ", 65) + "x\n",
		strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n",
		"a:\n" + strings.Repeat("  ", 1) + strings.Repeat("{b: ", 64) + "c" + strings.Repeat("}", 64) + "\n",
	} {
		_, err := YAML([]byte(doc), lim)
		var de *DepthError
		if !errors.As(err, &de) || !errors.Is(err, ErrTooDeep) || de.Max != 64 || de.Line != 1 && de.Line != 2 {
			t.Errorf("%.30q: err = %v, want a depth error at line 1 or 2", doc, err)
		}
	}
}

// The 400,000-level document of the attack suite (800 KB) is refused before
// the lexer runs, by the token bound, allocating nothing in proportion.
func TestYAMLTokenBound(t *testing.T) {
	doc := []byte(strings.Repeat("- ", 400000) + "x\n")
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := YAML(doc, YAMLLimits{MaxDepth: 64, MaxTokens: 200000}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
	if allocs > 10 {
		t.Errorf("%v allocations before refusing", allocs)
	}
}

// FuzzYAML checks YAML's two bounds against goccy/go-yaml itself: the lexer
// never makes more tokens than the bound computed from the bytes, and the
// parser never builds a tree deeper than the measured depth. Either would
// let a document past the checks cost more than they allow.
func FuzzYAML(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		if n, bound := len(lexer.Tokenize(string(data))), yamlTokenBound(data); n > bound {
			t.Fatalf("%d tokens, bound %d", n, bound)
		}
		measured, _ := yamlDepth(lexer.Tokenize(string(data)), 1<<30)
		if tree, ok := astDepth(data); ok && tree > measured {
			t.Fatalf("tree depth %d, measured %d", tree, measured)
		}
	})
}
