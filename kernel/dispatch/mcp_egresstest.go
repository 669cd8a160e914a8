//go:build egresstest

package dispatch

import "github.com/agentnode/agentnode/kernel/egress"

// Test-only: an egresstest build (the e2e tests' second agentnode binary)
// lets the environment name test hosts and permitted test addresses for
// the sealed-egress proxy (egress.TestResolverFromEnv). No release build
// compiles this file.
func init() {
	egressResolver = func() (egress.Resolver, error) {
		r, err := egress.TestResolverFromEnv()
		if r == nil || err != nil {
			return nil, err
		}
		return r, nil
	}
}
