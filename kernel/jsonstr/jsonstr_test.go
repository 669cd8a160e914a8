package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is encoding/json's encoding of s without HTML escaping.
func reference(t *testing.T, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// FuzzAppend holds both escapers to encoding/json: Append byte for byte,
// AppendPython on valid UTF-8 once U+2028 and U+2029 are written raw, and
// what either writes decodes back to the string.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{
		"", "plain", `"quoted" \back\slash/`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "<>&",
		"é日本😀", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\u0080\u009b\u202e", "\ufffd",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := reference(t, s)
		if got := Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s, encoding/json %s", s, got, want)
		}
		if !utf8.ValidString(s) {
			return
		}
		py := AppendPython([]byte("x"), s)[1:]
		// encoding/json's output with \u2028 and \u2029 written raw; an
		// escaped backslash (\\, never a raw NUL in the output) is kept
		// out of the way first.
		raw := strings.ReplaceAll(string(want), `\\`, "\x00")
		raw = strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(raw)
		raw = strings.ReplaceAll(raw, "\x00", `\\`)
		if string(py) != raw {
			t.Fatalf("AppendPython(%q) = %s, want %s", s, py, raw)
		}
		var back string
		if err := json.Unmarshal(py, &back); err != nil || back != s {
			t.Fatalf("AppendPython(%q) = %s decodes to %q, %v", s, py, back, err)
		}
	})
}

// BenchmarkAppend / BenchmarkAppendEncodingJSON: a typical audit reason.
var benchString = strings.Repeat("tool \"x\" denied: path /etc/passwd\n", 8)

func BenchmarkAppend(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], benchString)
	}
}

func BenchmarkAppendEncodingJSON(b *testing.B) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(benchString); err != nil {
			b.Fatal(err)
		}
	}
}
