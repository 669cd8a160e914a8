//go:build !egresstest

package dispatch

import "testing"

// Without the egresstest build tag nothing can change the proxy's
// resolver: the test hosts variable is ignored.
func TestEgressResolverOnlyUnderTag(t *testing.T) {
	t.Setenv("AGENTNODE_EGRESSTEST_HOSTS", "api.example.com=127.0.0.2")
	if egressResolver != nil {
		t.Fatal("a resolver override is compiled into a build without the egresstest tag")
	}
}
