// Package confinetest gates tests on a kernel that can confine host tools
// (Landlock ABI ≥ confine.MinABI).
package confinetest

import (
	"os"
	"testing"

	"github.com/agentnode/agentnode/executor/confine"
)

// Require skips tb on a kernel without enough Landlock, or fails it when
// AGENTNODE_REQUIRE_LANDLOCK=1 (CI), so a green run means it ran.
func Require(tb testing.TB) {
	tb.Helper()
	if abi := confine.LandlockABI(); abi < confine.MinABI {
		if os.Getenv("AGENTNODE_REQUIRE_LANDLOCK") == "1" {
			tb.Fatalf("AGENTNODE_REQUIRE_LANDLOCK=1 but the kernel's Landlock ABI is %d < %d", abi, confine.MinABI)
		}
		tb.Skipf("kernel Landlock ABI %d < %d: confinement tests need it", abi, confine.MinABI)
	}
}
