//go:build egresstest

package main

import (
	"net/netip"
	"slices"
	"sync"
)

// Test-only: compiled only with the egresstest build tag, which no release
// build sets. See the package comment.

var (
	permitMu sync.Mutex
	permits  []netip.Prefix
)

// PermitForTest lets addresses in p pass the public-address check, so a test
// can reach a server on loopback or in a network namespace it made. Port 443
// and the allowlist still apply. It returns a function that removes the
// permit. Only egresstest builds have it.
func PermitForTest(p netip.Prefix) (undo func()) {
	p = p.Masked()
	permitMu.Lock()
	permits = append(permits, p)
	permitMu.Unlock()
	return func() {
		permitMu.Lock()
		defer permitMu.Unlock()
		if i := slices.Index(permits, p); i >= 0 {
			permits = slices.Delete(permits, i, i+1)
		}
	}
}

func testPermitted(a netip.Addr) bool {
	permitMu.Lock()
	defer permitMu.Unlock()
	for _, p := range permits {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
