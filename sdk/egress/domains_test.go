package egress

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateDomainsAccepts(t *testing.T) {
	good := []string{
		"example.com", "api.github.com", "a.b.c.d.example.org", "x1.io", "a-b.example.com",
		"xn--bcher-kva.de", "1password.com", "123.example.com", "example.co.uk",
		strings.Repeat("a", 63) + ".com",
	}
	if err := ValidateDomains(good); err != nil {
		t.Fatalf("ValidateDomains(%q) = %v", good, err)
	}
	if err := ValidateDomains(nil); err != nil {
		t.Fatalf("empty list: %v", err)
	}
}

func TestValidateDomainsRefuses(t *testing.T) {
	long := strings.Repeat("a.", 127) + "com" // 257 characters
	for _, tc := range []struct{ entry, want string }{
		{"", "empty"},
		{"https://example.com", "scheme"},
		{"example.com/path", "path"},
		{"example.com?q", "path"},
		{"user@example.com", "user@"},
		{"*.example.com", "wildcard"},
		{"*", "wildcard"},
		{"example.com:443", "port"},
		{"1.2.3.4", "IP literal"},
		{"::1", "IP literal"},
		{"[::1]", "IP literal"},
		{"[2001:db8::1]:443", "IP literal"},
		{"127.1", "IP literal"},
		{"0x7f.1", "IP literal"},
		{"10.0.0.0x1", "IP literal"},
		{"2130706433", "single label"},
		{"localhost", "single label"},
		{"foo.localhost", "special-use"},
		{"printer.local", "special-use"},
		{"metadata.google.internal", "special-use"},
		{"router.home.arpa", "special-use"},
		{"1.0.0.127.in-addr.arpa", "special-use"},
		{"intranet", "single label"},
		{"Example.com", `write "example.com"`},
		{"example.com.", `trailing dot: write "example.com"`},
		{"bücher.de", `A-label "xn--bcher-kva.de"`},
		{"xn--zz.de", "A-label"},
		{"exa mple.com", "not allowed"},
		{"exa_mple.com", "not allowed"},
		{"-example.com", "hyphen"},
		{"example-.com", "hyphen"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{long, "longer than 253"},
		{"example.com\x00", "not allowed"},
	} {
		err := ValidateDomains([]string{"ok.example.com", tc.entry})
		if err == nil {
			t.Errorf("%q: accepted", tc.entry)
			continue
		}
		if !errors.Is(err, ErrInvalidDomain) {
			t.Errorf("%q: %v does not wrap ErrInvalidDomain", tc.entry, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("entry 1 %q", tc.entry)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not name the entry and %q", tc.entry, err, tc.want)
		}
	}
}

func TestValidateDomainsDuplicatesAndSize(t *testing.T) {
	if err := ValidateDomains([]string{"a.example.com", "a.example.com"}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate: %v", err)
	}
	many := make([]string, maxDomains+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	if err := ValidateDomains(many); err == nil {
		t.Error("over maxDomains accepted")
	}
	if err := ValidateDomains(many[:maxDomains]); err != nil {
		t.Errorf("maxDomains entries: %v", err)
	}
}
