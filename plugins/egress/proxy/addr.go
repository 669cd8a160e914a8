package main

import (
	"fmt"
	"net/netip"
)

// nonPublic lists the address ranges the proxy never connects to, most
// specific first so the reason names the narrowest range. IPv6 addresses
// outside global unicast (2000::/3) are refused as well, except NAT64
// (64:ff9b::/96), whose embedded IPv4 address is checked instead.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	// IPv4.
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network/unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space/CGNAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (incl. cloud metadata 169.254.169.254)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	// IPv6.
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (SIIT)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("5f00::/16"), "SRv6 SIDs"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
)

// checkPublic returns the address to dial for a resolved address a — a
// itself, or the IPv4 address inside an IPv4-mapped form — or an error naming
// why a is not public. Addresses permitted by a test (egresstest builds only)
// pass.
func checkPublic(a netip.Addr) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, fmt.Errorf("invalid address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%s is scoped (zone %q)", a, a.Zone())
	}
	dial := a.Unmap()
	if testPermitted(dial) {
		return dial, nil
	}
	if what := classify(dial); what != "" {
		if a.Is4In6() {
			return netip.Addr{}, fmt.Errorf("%s (IPv4-mapped %s) is not public: %s", a, dial, what)
		}
		return netip.Addr{}, fmt.Errorf("%s is not public: %s", a, what)
	}
	return dial, nil
}

// classify returns "" for a public unicast address and otherwise what a is.
// a must be unmapped.
func classify(a netip.Addr) string {
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if a.Is6() {
		if nat64.Contains(a) {
			b := a.As16()
			v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
			if what := classify(v4); what != "" {
				return "NAT64 of " + v4.String() + ": " + what
			}
			return ""
		}
		if !globalUnicast6.Contains(a) {
			return "not IPv6 global unicast (2000::/3)"
		}
	}
	// Belt and braces: the standard library's own classification.
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	}
	return ""
}
