//go:build egresstest

package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Test-only, like PermitForTest: compiled only with the egresstest build
// tag. agentnode built with the tag (the e2e tests' second binary) reads
// AGENTNODE_EGRESSTEST_HOSTS and AGENTNODE_EGRESSTEST_PERMIT and sends them
// in the session's start request (StartRequest.TestHosts, TestPermit), so a
// test can give the proxy a destination it runs itself. A plugin built
// without the tag refuses such a request; it has neither this code nor any
// way to change the proxy's resolver or the public-address check.

// testDestinations applies permit ("prefix,…" or single addresses, see
// PermitForTest) and returns a resolver for hosts ("name=addr,…"; other
// names go to the system resolver), or nil when hosts is empty. The plugin
// process serves one session, so the permits last as long as it does.
func testDestinations(hostList, permit string) (Resolver, error) {
	for _, f := range splitList(permit) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("test permit: %q is not an address or prefix", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		PermitForTest(p)
	}
	hosts := map[string][]netip.Addr{}
	for _, f := range splitList(hostList) {
		name, addr, ok := strings.Cut(f, "=")
		a, err := netip.ParseAddr(addr)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("test hosts: %q is not name=address", f)
		}
		name = strings.ToLower(name)
		hosts[name] = append(hosts[name], a)
	}
	if len(hosts) == 0 {
		return nil, nil
	}
	return testHosts(hosts), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// testHosts answers its names and asks the system resolver for the rest.
type testHosts map[string][]netip.Addr

func (h testHosts) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}
