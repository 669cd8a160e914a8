//go:build !egresstest

package main

import "net/netip"

// testPermitted is false for every address: outside egresstest builds there
// is no way to let a non-public address through.
func testPermitted(netip.Addr) bool { return false }

// testDestinations refuses: a build without the egresstest tag has no test
// destinations, whatever agentnode asks for.
func testDestinations(hosts, permit string) (Resolver, error) {
	return nil, errNoTestDestinations
}
