package main

import (
	"net/netip"
	"strings"
	"testing"
)

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Every range of the table is refused at both ends, and IPv4 ranges also in
// their IPv4-mapped and NAT64 forms.
func TestNonPublicTable(t *testing.T) {
	for _, r := range nonPublic {
		for _, a := range []netip.Addr{r.prefix.Addr(), lastAddr(r.prefix)} {
			forms := []netip.Addr{a}
			if a.Is4() {
				b := a.As4()
				forms = append(forms,
					netip.AddrFrom16(a.As16()), // ::ffff:a.b.c.d
					netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 10: 0, 11: 0, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}), // 64:ff9b::a.b.c.d
				)
			}
			for _, f := range forms {
				if _, err := checkPublic(f); err == nil {
					t.Errorf("%s (%s, form of %s) accepted", f, r.what, a)
				}
			}
		}
	}
}

func TestCheckPublic(t *testing.T) {
	for _, tc := range []struct {
		addr, want string // want: "" = public; else a word of the reason
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "metadata"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"0.0.0.0", "unspecified"},
		{"255.255.255.255", "broadcast"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"192.0.2.1", "TEST-NET-1"},
		{"198.51.100.7", "TEST-NET-2"},
		{"203.0.113.9", "TEST-NET-3"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"192.0.0.8", "IETF"},
		{"192.88.99.1", "6to4"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::ffff:127.0.0.1", "IPv4-mapped 127.0.0.1"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:0:10.0.0.1", "SIIT"},
		{"64:ff9b::127.0.0.1", "NAT64 of 127.0.0.1"},
		{"64:ff9b::10.0.0.1", "NAT64 of 10.0.0.1"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"100::1", "discard"},
		{"2001::1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:2::1", "IETF"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"2002:7f00:1::1", "6to4"},
		{"2002:0808:0808::1", "6to4"},
		{"5f00::1", "SRv6"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"4000::1", "global unicast"},
		{"1::1", "global unicast"},
		{"fe80::1%eth0", "zone"},
		// Public.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.215.14", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"64:ff9b::8.8.8.8", ""},
		{"::ffff:8.8.8.8", ""},
	} {
		a := netip.MustParseAddr(tc.addr)
		got, err := checkPublic(a)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.addr, err)
		case tc.want == "" && got != a.Unmap():
			t.Errorf("%s: dial address %s, want %s", tc.addr, got, a.Unmap())
		case tc.want != "" && err == nil:
			t.Errorf("%s accepted, want refused (%s)", tc.addr, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want it to mention %q", tc.addr, err, tc.want)
		}
	}
	if _, err := checkPublic(netip.Addr{}); err == nil {
		t.Error("invalid address accepted")
	}
}
