package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// ErrInvalidDomain is wrapped by every ValidateDomains error. The caller
// attaches its own reason code (a manifest or lockfile error).
var ErrInvalidDomain = errors.New("invalid allowed domain")

// maxDomains bounds the allowlist so a lockfile cannot make it unbounded.
const maxDomains = 1024

// specialSuffixes are names that never denote a public host: RFC 6761/6762
// special-use and private-use names. An entry equal to one of them or ending
// in "."+one is refused.
var specialSuffixes = []string{"localhost", "local", "localdomain", "internal", "home.arpa", "invalid", "onion", "arpa"}

// ValidateDomains checks the entries of an `mcp_allowed_domains` list. Each
// entry must be an exact, canonical DNS hostname: lower-case ASCII (an
// internationalized name as its IDNA A-label, xn--…), at least two labels of
// letters, digits and inner hyphens, at most 253 characters, no trailing dot.
// Refused, each with an error naming the entry: IP literals (including
// numeric forms like 127.1), localhost and other special-use names, wildcards,
// ports, schemes, paths, `user@`, single labels, upper case, non-ASCII and
// duplicates. An empty list is valid (nothing is allowed).
func ValidateDomains(domains []string) error {
	if len(domains) > maxDomains {
		return fmt.Errorf("%w: %d entries (at most %d)", ErrInvalidDomain, len(domains), maxDomains)
	}
	seen := make(map[string]bool, len(domains))
	for i, d := range domains {
		if err := validateDomain(d); err != nil {
			return fmt.Errorf("%w: entry %d %q: %w", ErrInvalidDomain, i, d, err)
		}
		if seen[d] {
			return fmt.Errorf("%w: entry %d %q: duplicate", ErrInvalidDomain, i, d)
		}
		seen[d] = true
	}
	return nil
}

func validateDomain(d string) error {
	switch {
	case d == "":
		return errors.New("empty")
	case strings.Contains(d, "://"):
		return errors.New("a scheme is not allowed: write the hostname only")
	case strings.ContainsAny(d, "/?#"):
		return errors.New("a path is not allowed: write the hostname only")
	case strings.Contains(d, "@"):
		return errors.New("user@ is not allowed: write the hostname only")
	case strings.Contains(d, "*"):
		return errors.New("wildcards are not allowed: list each exact hostname")
	case strings.HasPrefix(d, "["):
		return errors.New("IP literals are not allowed")
	}
	if _, err := netip.ParseAddr(d); err == nil {
		return errors.New("IP literals are not allowed")
	}
	if strings.Contains(d, ":") {
		return errors.New("a port is not allowed (the port is always 443)")
	}
	if !isASCII(d) {
		if a, err := idna.Lookup.ToASCII(d); err == nil && isASCII(a) {
			return fmt.Errorf("not ASCII: write its IDNA A-label %q", a)
		}
		return errors.New("not ASCII and not a valid internationalized name")
	}
	if l := strings.ToLower(d); l != d {
		return fmt.Errorf("not lower-case: write %q", l)
	}
	if strings.HasSuffix(d, ".") {
		return fmt.Errorf("trailing dot: write %q", strings.TrimRight(d, "."))
	}
	if err := CheckHostname(d); err != nil {
		return err
	}
	for _, s := range specialSuffixes {
		if d == s || strings.HasSuffix(d, "."+s) {
			return fmt.Errorf("%q is a special-use name, never a public host", s)
		}
	}
	if strings.Contains(d, "xn--") {
		if a, err := idna.Registration.ToASCII(d); err != nil || a != d {
			return errors.New("not a valid IDNA A-label")
		}
	}
	return nil
}

// CheckHostname checks the syntax shared by allowlist entries and CONNECT
// targets: lower-case LDH labels of 1–63 characters, no leading or trailing
// hyphen, at least two labels, at most 253 characters, and a last label that
// is not numeric (which resolvers and URL parsers may read as an IPv4
// address: 127.1, 0x7f.1, 2130706433).
func CheckHostname(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return errors.New("a single label is not allowed: write the fully qualified hostname")
	}
	for _, l := range labels {
		if l == "" {
			return errors.New("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label %q longer than 63 characters", l[:20]+"…")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("character %q not allowed in a hostname", c)
			}
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		return errors.New("IP literals are not allowed (numeric last label)")
	}
	return nil
}

// numericLabel reports whether l reads as a number in an IPv4 address: all
// decimal digits, or 0x followed by hex digits.
func numericLabel(l string) bool {
	digits := l
	hex := false
	if strings.HasPrefix(l, "0x") {
		digits, hex = l[2:], true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f' {
			continue
		}
		return false
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
