//go:build egresstest

package egress

import "os"

// Test-only: an egresstest build (the e2e tests' second agentnode binary)
// starts the egress plugin built with the same tag
// (agentnode-egress-proxy-egresstest) and hands it the test hosts and
// permitted test addresses the environment names (see
// plugins/egress/proxy/testhosts_egresstest.go). No release build compiles
// this file.

// Environment variables of egresstest builds.
const (
	// testHostsEnv maps names to addresses for the proxy's resolver:
	// "name=addr,name=addr". Other names go to the system resolver.
	testHostsEnv = "AGENTNODE_EGRESSTEST_HOSTS"
	// testPermitEnv lists prefixes (or single addresses) that pass the
	// proxy's public-address check: "127.0.0.2/32,...".
	testPermitEnv = "AGENTNODE_EGRESSTEST_PERMIT"
)

func init() {
	proxyName = "proxy-egresstest"
	testDestinations = func() (string, string) {
		return os.Getenv(testHostsEnv), os.Getenv(testPermitEnv)
	}
}
