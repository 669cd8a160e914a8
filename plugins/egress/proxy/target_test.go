package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/egress"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, host string // host "" = refused
		want     string // a word of the error
	}{
		{"example.com:443", "example.com", ""},
		{"EXAMPLE.Com:443", "example.com", ""},
		{"example.com.:443", "example.com", ""},
		{"api.example.com:443", "api.example.com", ""},
		{"example.com..:443", "", "empty label"},
		{"example.com:80", "", "port 80"},
		{"example.com:8443", "", "port 8443"},
		{"example.com:0443", "", "malformed port"},
		{"example.com:+443", "", "malformed port"},
		{"example.com:443 ", "", "space"},
		{"example.com:65979", "", "malformed port"},
		{"example.com:4430000", "", "malformed port"},
		{"example.com:", "", "malformed port"},
		{"example.com", "", "no port"},
		{"example.com:443:443", "", "malformed"},
		{"1.2.3.4:443", "", "IP literal"},
		{"127.0.0.1:443", "", "IP literal"},
		{"[::1]:443", "", "IP literal"},
		{"[2606:4700::1111]:443", "", "IP literal"},
		{"::1:443", "", "IP literal"},
		{"2606:4700::1111:443", "", "IP literal"},
		{"127.1:443", "", "IP literal"},
		{"2130706433:443", "", "single label"},
		{"0x7f000001:443", "", "single label"},
		{"a.0x7f:443", "", "IP literal"},
		{"localhost:443", "", "single label"},
		{"user@example.com:443", "", "userinfo"},
		{"user:pw@example.com:443", "", "userinfo"},
		{"/path", "", "authority-form"},
		{"https://example.com:443", "", "authority-form"},
		{"*.example.com:443", "", "not allowed"},
		{"exa%2emple.com:443", "", "not allowed"},
		{"bücher.de:443", "", "non-ASCII"},
		{"example.com\x00.evil.com:443", "", "control"},
		{"example.com\r\nX: y:443", "", "control"},
		{"", "", "empty"},
		{":443", "", "empty host"},
		{strings.Repeat("a", 300) + ":443", "", "longer"},
	} {
		host, port, err := parseTarget(tc.in)
		if tc.host != "" {
			if err != nil || host != tc.host || port != 443 {
				t.Errorf("parseTarget(%q) = %q, %d, %v; want %q, 443", tc.in, host, port, err, tc.host)
			}
			continue
		}
		if err == nil {
			t.Errorf("parseTarget(%q) = %q, %d; want refused (%s)", tc.in, host, port, tc.want)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseTarget(%q): %v; want it to mention %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseTarget checks that whatever parseTarget accepts is a canonical
// hostname on port 443 that the input names exactly, never an IP address.
// Seeds: testdata/fuzz/FuzzParseTarget and the f.Add calls.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:443", "127.1:443", "a.b:80", "user@a.b:443", "A.B.:443", "xn--bcher-kva.de:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		host, port, err := parseTarget(in)
		if err != nil {
			if host != "" {
				t.Fatalf("refused %q but returned host %q", in, host)
			}
			if strings.ContainsAny(err.Error(), "\x00\r\n") {
				t.Fatalf("error for %q carries control characters: %q", in, err)
			}
			return
		}
		if port != 443 {
			t.Fatalf("accepted %q with port %d", in, port)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			t.Fatalf("accepted IP literal %q from %q", host, in)
		}
		if err := egress.CheckHostname(host); err != nil {
			t.Fatalf("accepted %q as %q: %v", in, host, err)
		}
		if host != strings.ToLower(host) {
			t.Fatalf("host %q not lower-case", host)
		}
		l := strings.ToLower(in)
		if l != host+":443" && l != host+".:443" {
			t.Fatalf("host %q is not what %q names", host, in)
		}
	})
}
