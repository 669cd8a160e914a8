package dispatch

import (
	"strconv"
	"strings"
	"unicode"
)

// termSafe makes text safe to print on a terminal: control characters
// (escape sequences, carriage returns, backspaces) and invisible format
// characters (bidirectional overrides, zero-width characters) are written
// as Go escapes (\x1b, \r, \u202e), so a package, an input or an inspector
// reason cannot redraw or hide part of the prompt the user answers.
func termSafe(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}
