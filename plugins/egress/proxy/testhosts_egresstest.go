//go:build egresstest

package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
)

// Test-only, like PermitForTest: compiled only with the egresstest build
// tag. An agentnode binary built with the tag (the e2e tests' second
// binary) reads two environment variables so a test can give the proxy a
// destination it runs itself; a release build has neither this code nor
// any way to change the proxy's resolver or the public-address check.

// Environment variables of egresstest builds.
const (
	// TestHostsEnv maps names to addresses for the proxy's resolver:
	// "name=addr,name=addr". Other names go to the system resolver.
	TestHostsEnv = "AGENTNODE_EGRESSTEST_HOSTS"
	// TestPermitEnv lists prefixes (or single addresses) that pass the
	// public-address check (PermitForTest): "127.0.0.2/32,...".
	TestPermitEnv = "AGENTNODE_EGRESSTEST_PERMIT"
)

var permitEnvOnce sync.Once

// TestResolverFromEnv applies TestPermitEnv (once per process) and returns a
// resolver for TestHostsEnv, or nil when it is unset. Only egresstest
// builds have it.
func TestResolverFromEnv() (Resolver, error) {
	var perr error
	permitEnvOnce.Do(func() {
		for _, f := range splitList(os.Getenv(TestPermitEnv)) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				a, aerr := netip.ParseAddr(f)
				if aerr != nil {
					perr = fmt.Errorf("%s: %q is not an address or prefix", TestPermitEnv, f)
					return
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			PermitForTest(p)
		}
	})
	if perr != nil {
		return nil, perr
	}
	hosts := map[string][]netip.Addr{}
	for _, f := range splitList(os.Getenv(TestHostsEnv)) {
		name, addr, ok := strings.Cut(f, "=")
		a, err := netip.ParseAddr(addr)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%s: %q is not name=address", TestHostsEnv, f)
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
