// Package termsafe makes strings that agentnode did not write itself — a
// tool's stderr and error message, names and versions from manifests,
// plugin errors, audit fields — safe to print on a terminal. It is the one
// implementation of that escaping; every text agentnode prints goes through
// it (cmd/agentnode wraps its stdout and stderr in a Writer, the plugin
// host's log and the kernel's warnings too).
//
// A terminal acts on control characters: ESC starts CSI and OSC sequences
// (clear the screen, move the cursor, set the window title, write the
// clipboard, …), CR and BS overwrite what was printed, C1 controls
// (U+0080–U+009F) are 8-bit forms of ESC sequences, and the Unicode bidi
// controls reorder what the user reads ("Trojan Source"). Escaped, each
// shows as text instead:
//
//	C0 controls (but \n and \t in multi-line text), DEL   \x1b, \r, \a, \x7f …
//	C1 controls U+0080–U+009F                             \u009b …
//	format characters (Cf): the bidi controls U+061C,
//	  U+200E, U+200F, U+202A–U+202E, U+2066–U+2069,
//	  zero-width characters, …; U+2028, U+2029             \u202e, \u200b …
//	bytes that are not UTF-8                              \xff …
//
// (Go's escapes, as strconv.QuoteRuneToASCII writes them.) Everything else,
// backslashes included, is printed as it is. In JSON
// (JSON) the same characters are written as JSON escapes (\u001b, \u009b,
// \u202e; an invalid byte as \ufffd), so the document means exactly what
// it meant before and a terminal shows it harmlessly.
package termsafe

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is: a control
// character (C0, DEL, C1), an invisible format character (Unicode category
// Cf: the bidi controls, zero-width characters, …) or a line or paragraph
// separator.
func Unsafe(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

const hexDigits = "0123456789abcdef"

// Line escapes s for printing on one line: newlines and tabs are escaped
// too.
func Line(s string) string { return escape(s, false) }

// Text escapes s for printing as multi-line text: newlines and tabs stay.
func Text(s string) string { return escape(s, true) }

func escape(s string, multiline bool) string {
	if clean(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	appendEscaped(&b, s, multiline)
	return b.String()
}

// clean reports whether s has nothing to escape.
func clean(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && !(multiline && (c == '\n' || c == '\t')) || c == 0x7f {
			return false
		}
		if c >= 0x80 {
			// Decode only when non-ASCII text shows up.
			for _, r := range s[i:] {
				if r == utf8.RuneError || Unsafe(r) && !(multiline && (r == '\n' || r == '\t')) {
					return false
				}
			}
			return utf8.ValidString(s[i:])
		}
	}
	return true
}

type byteWriter interface {
	WriteByte(c byte) error
	WriteString(s string) (int, error)
}

func appendEscaped(b byteWriter, s string, multiline bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			writeX(b, s[i])
		case r == '\n' && multiline, r == '\t' && multiline:
			_ = b.WriteByte(byte(r))
		case Unsafe(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			_, _ = b.WriteString(q[1 : len(q)-1])
		default:
			_, _ = b.WriteString(s[i : i+size])
		}
		i += size
	}
}

func writeX(b byteWriter, c byte) {
	_, _ = b.WriteString(`\x`)
	_ = b.WriteByte(hexDigits[c>>4])
	_ = b.WriteByte(hexDigits[c&0xf])
}

// writeU writes r as a JSON escape: \uXXXX, or a surrogate pair.
func writeU(b byteWriter, r rune) {
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		writeU(b, hi)
		writeU(b, lo)
		return
	}
	_, _ = b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		_ = b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}

// JSON returns the encoded JSON document doc with every character Unsafe
// reports written as a JSON \u escape, and every byte that is not UTF-8 as
// \ufffd (which is how encoding/json reads it anyway). encoding/json already
// escapes the C0 controls; it leaves DEL, the C1 controls and the bidi
// controls as they are. Outside strings valid JSON has only ASCII
// punctuation and whitespace, so the result decodes to the same value. doc
// is returned unchanged when there is nothing to escape.
func JSON(doc []byte) []byte {
	i := firstUnsafeJSON(doc)
	if i < 0 {
		return doc
	}
	out := make([]byte, 0, len(doc)+16)
	out = append(out, doc[:i]...)
	var b bytes.Buffer
	for i < len(doc) {
		r, size := utf8.DecodeRune(doc[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\ufffd`)
		case r == '\n', r == '\t', r == '\r':
			b.WriteByte(byte(r)) // whitespace between tokens
		case Unsafe(r):
			writeU(&b, r)
		default:
			b.Write(doc[i : i+size])
		}
		i += size
	}
	return append(out, b.Bytes()...)
}

// firstUnsafeJSON is the index of the first byte JSON must rewrite, or -1.
// The whitespace between JSON tokens (\n, \t, \r) is left alone.
func firstUnsafeJSON(doc []byte) int {
	for i := 0; i < len(doc); {
		c := doc[i]
		if c < 0x80 {
			if c == 0x7f || c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(doc[i:])
		if r == utf8.RuneError && size <= 1 || Unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

// Writer escapes everything written through it as multi-line text (Text)
// before passing it on. Each Write is escaped on its own: a multi-byte
// character split across two writes shows as \x escapes, never raw, so
// write whole strings (fmt.Fprint* does).
type Writer struct {
	w io.Writer
}

// NewWriter returns a Writer on w. A *Writer is returned as it is.
func NewWriter(w io.Writer) *Writer {
	if tw, ok := w.(*Writer); ok {
		return tw
	}
	return &Writer{w: w}
}

// Unwrap returns the writer underneath.
func (t *Writer) Unwrap() io.Writer { return t.w }

// Write escapes p and writes it. It reports len(p) when the escaped text
// was written in full.
func (t *Writer) Write(p []byte) (int, error) {
	s := string(p)
	if clean(s, true) {
		return t.w.Write(p)
	}
	var b strings.Builder
	b.Grow(len(p) + 16)
	appendEscaped(&b, s, true)
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
