package termsafe

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestLineAndText(t *testing.T) {
	cases := []struct {
		in, line, text string
	}{
		{"plain text, ünïcode, 日本\\n", "plain text, ünïcode, 日本\\n", "plain text, ünïcode, 日本\\n"},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\atitle`, `\x1b]0;pwned\atitle`},
		{"bs\b\b zw\u200b ls\u2028 bom\ufeff", `bs\b\b zw\u200b ls\u2028 bom\ufeff`, `bs\b\b zw\u200b ls\u2028 bom\ufeff`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"c1 \u009b2J \u0085", `c1 \u009b2J \u0085`, `c1 \u009b2J \u0085`},
		{"bidi \u202eevil\u202c \u2066x\u2069 \u200f\u061c", `bidi \u202eevil\u202c \u2066x\u2069 \u200f\u061c`, `bidi \u202eevil\u202c \u2066x\u2069 \u200f\u061c`},
		{"bad \xff\xfe utf8 \xe2\x82", `bad \xff\xfe utf8 \xe2\x82`, `bad \xff\xfe utf8 \xe2\x82`},
		{"replacement char \ufffd stays", "replacement char \ufffd stays", "replacement char \ufffd stays"},
		{"nul\x00", `nul\x00`, `nul\x00`},
	}
	for _, c := range cases {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

// TestNoUnsafeLeft: whatever goes in, the escaped text has no byte a
// terminal acts on (only \n and \t in Text), and is valid UTF-8.
func TestNoUnsafeLeft(t *testing.T) {
	var all []byte
	for c := 0; c < 256; c++ {
		all = append(all, byte(c))
	}
	all = append(all, "\u0085\u009b\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"...)
	for _, multiline := range []bool{false, true} {
		out := escape(string(all), multiline)
		for _, r := range out {
			if Unsafe(r) && !(multiline && (r == '\n' || r == '\t')) {
				t.Errorf("multiline=%v: %U left in the output", multiline, r)
			}
			if r == 0xfffd {
				t.Errorf("multiline=%v: invalid UTF-8 decoded into the output", multiline)
			}
		}
	}
}

func TestJSONKeepsTheValue(t *testing.T) {
	v := map[string]any{
		"stderr": "\x1b]0;title\x07 \x1b[2J del\x7f c1\u009b bidi\u202e\u2066 fine: ü 日本 \\ \"q\"",
		"n":      []any{1.0, "x\ny", "tag\U000e0001"},
	}
	doc, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json escapes the C0 controls but not DEL, C1 or bidi: the
	// reason JSON exists.
	if !bytes.Contains(doc, []byte("\x7f")) || !bytes.Contains(doc, []byte("\u009b")) || !bytes.Contains(doc, []byte(`\u001b`)) {
		t.Fatalf("encoding/json changed: %q", doc)
	}
	doc = append(doc, '\n')
	out := JSON(doc)
	if !bytes.HasSuffix(out, []byte("}\n")) {
		t.Errorf("the newline after the document was escaped: %q", out)
	}
	for _, r := range string(out) {
		if Unsafe(r) && r != '\n' {
			t.Errorf("%U left in %q", r, out)
		}
	}
	for _, want := range []string{`\u001b]0;title\u0007`, `\u007f`, `\u009b`, `\u202e`, `\u2066`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s missing from %s", want, out)
		}
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("not JSON any more: %v: %s", err, out)
	}
	if !reflect.DeepEqual(back, v) {
		t.Errorf("value changed:\n got %#v\nwant %#v", back, v)
	}
	// Invalid UTF-8 (a json.RawMessage can carry it) becomes U+FFFD, as
	// encoding/json decodes it.
	raw := []byte("{\"a\":\"x\xffy\"}")
	if got := string(JSON(raw)); got != `{"a":"x\ufffdy"}` {
		t.Errorf("JSON(%q) = %s", raw, got)
	}
	// Nothing to do: the same slice.
	clean := []byte(`{"a":"b"}` + "\n")
	if got := JSON(clean); &got[0] != &clean[0] {
		t.Errorf("clean document copied")
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if NewWriter(w) != w {
		t.Errorf("a Writer wrapped twice")
	}
	in := "line one\n\x1b]0;owned\x07line\ttwo\u202e\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if want := "line one\n\\x1b]0;owned\\aline\ttwo\\u202e\n"; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
	if strings.ContainsRune(buf.String(), 0x1b) {
		t.Errorf("raw ESC written")
	}
}
