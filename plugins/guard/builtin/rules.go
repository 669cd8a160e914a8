package main

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// secretPattern is one kind of credential recognised in input values.
type secretPattern struct {
	kind string
	// hints are literals one of which every match contains: a cheap filter
	// before the regular expression runs.
	hints []string
	re    *regexp.Regexp
	// needDigit drops matches without a digit, so that long hyphenated
	// words ("sk-" followed by prose) are not taken for keys.
	needDigit bool
}

// secretPatterns are checked in order; the first match names the kind.
var secretPatterns = []secretPattern{
	{kind: "Anthropic API key", hints: []string{"sk-ant-"}, re: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{20,}`)},
	{kind: "OpenAI API key", hints: []string{"sk-"}, re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`), needDigit: true},
	{kind: "AWS access key id", hints: []string{"AKIA", "ASIA"}, re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{kind: "GitHub token", hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`)},
	{kind: "Slack token", hints: []string{"xox"}, re: regexp.MustCompile(`\bxox[bpars]-[A-Za-z0-9-]{10,}`)},
	{kind: "Stripe live key", hints: []string{"_live_"}, re: regexp.MustCompile(`\b(?:sk|rk)_live_[A-Za-z0-9]{16,}`)},
	{kind: "Google API key", hints: []string{"AIza"}, re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{kind: "private key", hints: []string{"PRIVATE KEY"}, re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)},
	{kind: "JSON Web Token", hints: []string{"eyJ"}, re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*`)},
}

// secretKind names the kind of credential s appears to contain, or "".
func secretKind(s string) string {
	for _, p := range secretPatterns {
		if !slices.ContainsFunc(p.hints, func(h string) bool { return strings.Contains(s, h) }) {
			continue
		}
		if !p.needDigit {
			if p.re.MatchString(s) {
				return p.kind
			}
			continue
		}
		for _, m := range p.re.FindAllString(s, -1) {
			if strings.ContainsAny(m, "0123456789") {
				return p.kind
			}
		}
	}
	return ""
}

// maxDecodeRounds bounds percent-decoding (double and triple encoding).
const maxDecodeRounds = 3

// variants returns s and, if it holds percent escapes, its percent-decoded
// forms: decoded once, twice and three times, and decoded "deeply" (see
// deepDecode), so that %2e%2e%2f and %252e%252e%252f are seen as ../.
func variants(s string) []string {
	out := []string{s}
	if !strings.Contains(s, "%") {
		return out
	}
	cur := s
	for range maxDecodeRounds {
		d := percentDecode(cur)
		if d == cur {
			break
		}
		out = append(out, d)
		cur = d
	}
	if d := deepDecode(s); !slices.Contains(out, d) {
		out = append(out, d)
	}
	return out
}

// deepDecode decodes, in one pass, every escape encoded any number of
// times: "%" followed by any number of "25" and then two hex digits
// ("%2e", "%252e", "%25252e", ... all become ".").
func deepDecode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] == '%' {
			j := i + 1
			for j+1 < len(s) && s[j] == '2' && s[j+1] == '5' {
				j += 2
			}
			if j+1 < len(s) {
				if h, ok := unhex(s[j]); ok {
					if l, ok := unhex(s[j+1]); ok {
						b.WriteByte(h<<4 | l)
						i = j + 2
						continue
					}
				}
			}
			if j > i+1 { // the last "25" was the escape: a "%"
				b.WriteByte('%')
				i = j
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// percentDecode decodes every valid %XX escape and keeps everything else
// (invalid escapes included) as it is.
func percentDecode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if h, ok := unhex(s[i+1]); ok {
				if l, ok := unhex(s[i+2]); ok {
					b.WriteByte(h<<4 | l)
					i += 2
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// hasTraversal reports a parent-directory reference: "../" or "..\"
// anywhere, or a string that is ".." or ends in "/.." or "\..". Dots inside
// a name ("a..b", "...") are not one.
func hasTraversal(s string) bool {
	s = strings.ReplaceAll(s, `\`, "/")
	t := strings.TrimSpace(s)
	return strings.Contains(s, "../") || t == ".." || strings.HasSuffix(t, "/..")
}

// homePath matches "~", "~/...", "~user/..." (and with a backslash).
var homePath = regexp.MustCompile(`^~[A-Za-z0-9_.-]*(?:[/\\]|$)`)

// inWorkspace reports whether s is exactly an absolute path at or below
// the granted workspace ws (absolute and clean): no surrounding white
// space, no "." or ".." component, no doubled slash, no NUL (the
// traversal rule refuses ".." anyway). Anything else absolute stays
// refused.
func inWorkspace(s, ws string) bool {
	if ws == "" || !strings.HasPrefix(ws, "/") || strings.IndexByte(s, 0) >= 0 {
		return false
	}
	if p := strings.TrimSuffix(s, "/"); p != "" && path.Clean(p) != p {
		return false
	}
	return s == ws || s == ws+"/" || strings.HasPrefix(s, strings.TrimSuffix(ws, "/")+"/")
}

// isAbsolutePath reports whether s (leading white space ignored) is an
// absolute path: Unix "/...", UNC or rooted Windows "\...", a home path
// "~/...", a Windows drive path "C:\..." or "C:/...", or a file: URL.
func isAbsolutePath(s string) bool {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if s == "" {
		return false
	}
	switch {
	case s[0] == '/':
		return true
	case s[0] == '\\':
		// A UNC path (\\server\share) or a rooted Windows path
		// (\Windows\System32); a lone backslash escape is a regular
		// expression or an escaped character (\d+, \n), not a path.
		return strings.HasPrefix(s, `\\`) || rootedWindowsPath.MatchString(s)
	case homePath.MatchString(s):
		return true
	case len(s) >= 2 && isASCIILetter(s[0]) && s[1] == ':' && (len(s) == 2 || s[2] == '\\' || s[2] == '/'):
		return true
	case len(s) >= 5 && strings.EqualFold(s[:5], "file:"):
		return true
	}
	return false
}

// rootedWindowsPath is \name\… or \name/…: a first component of at
// least two name characters, then a separator (a one-letter one is a
// regular expression's escape: \b\w+, \d\s).
var rootedWindowsPath = regexp.MustCompile(`^\\[A-Za-z0-9._ $~-]{2,}[\\/]`)

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// urlScheme matches "scheme://" anywhere (http, https, ftp, file, ws, s3,
// ...).
var urlScheme = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://`)

// hasURL reports whether s contains a URL with a scheme.
func hasURL(s string) bool { return strings.Contains(s, "://") && urlScheme.MatchString(s) }

// shellTokenNames name the shell tokens, so reasons never quote input.
var shellTokenNames = []struct {
	tok  string
	name string
}{
	{";", "semicolon"},
	{"&", "ampersand"},
	{"|", "pipe"},
	{"`", "backtick"},
	{"$(", "command substitution"},
	{"$", "dollar sign"},
}

// shellTokens lists the names of the shell tokens in s, comma separated, or
// "".
func shellTokens(s string) string {
	var names []string
	for _, t := range shellTokenNames {
		if strings.Contains(s, t.tok) {
			names = append(names, t.name)
		}
	}
	return strings.Join(names, ", ")
}
