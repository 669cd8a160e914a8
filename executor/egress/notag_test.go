//go:build !egresstest

package egress

import "testing"

// Without the egresstest build tag nothing can give the proxy test
// destinations: the variables are not read, and the release plugin is
// the one started.
func TestTestDestinationsOnlyUnderTag(t *testing.T) {
	t.Setenv("AGENTNODE_EGRESSTEST_HOSTS", "api.example.com=127.0.0.2")
	t.Setenv("AGENTNODE_EGRESSTEST_PERMIT", "127.0.0.2/32")
	if testDestinations != nil {
		t.Fatal("test destinations are compiled into a build without the egresstest tag")
	}
	if proxyName != "proxy" {
		t.Fatalf("a build without the egresstest tag starts agentnode-egress-%s", proxyName)
	}
}
