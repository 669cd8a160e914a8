//go:build egresstest

package dispatch

import "os"

// Test-only: an egresstest build (the e2e tests' second agentnode binary)
// starts the egress plugin built with the same tag
// (agentnode-egress-proxy-egresstest) and hands it the test hosts and
// permitted test addresses the environment names (see
// plugins/egress/proxy/testhosts_egresstest.go). No release build compiles
// this file.

// Environment variables of egresstest builds.
const (
	// egressTestHostsEnv maps names to addresses for the proxy's
	// resolver: "name=addr,name=addr". Other names go to the system
	// resolver.
	egressTestHostsEnv = "AGENTNODE_EGRESSTEST_HOSTS"
	// egressTestPermitEnv lists prefixes (or single addresses) that pass
	// the proxy's public-address check: "127.0.0.2/32,...".
	egressTestPermitEnv = "AGENTNODE_EGRESSTEST_PERMIT"
)

func init() {
	egressProxyName = "proxy-egresstest"
	egressTestDestinations = func() (string, string) {
		return os.Getenv(egressTestHostsEnv), os.Getenv(egressTestPermitEnv)
	}
}
