// Package keychaintest gates tests on a real OS keychain (Secret Service),
// the one way every package's keychain tests decide to run, skip or fail.
package keychaintest

import (
	"os"
	"testing"

	"github.com/agentnode/agentnode/kernel/keychain"
)

// Require skips tb when no OS keychain is reachable, or fails it when
// AGENTNODE_REQUIRE_KEYRING=1 (CI), so a green run means the test ran.
// Run keychain tests through test/keyring.sh.
func Require(tb testing.TB) {
	tb.Helper()
	if err := keychain.Available(); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_KEYRING") == "1" {
			tb.Fatalf("AGENTNODE_REQUIRE_KEYRING=1 but: %v", err)
		}
		tb.Skipf("no OS keychain (run under test/keyring.sh): %v", err)
	}
}
