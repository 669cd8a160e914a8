package main

import (
	"os"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestConformance runs the shared conformance and escape suite against the
// backend in-process, on the image cmd/agentnode/imagebuild.Build makes (its /tmp is
// 1777: Debian's runc 1.1 gives the tmpfs the image directory's mode),
// loaded into a private dockerd. Nothing is skipped.
func TestConformance(t *testing.T) {
	e := testEnv(t)
	sandboxtest.Run(t, newTestBackend(t, e), suiteConfig(e))
}

// TestConformanceBinary runs the whole suite through the built plugin
// binary (go-plugin, gRPC, SHA-256 pinned), as agentnode does.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the whole suite")
	}
	e := testEnv(t)
	sandboxtest.Run(t, sandboxtest.LaunchPlugin(t, buildPlugin(t, e)), suiteConfig(e))
}

// TestConformanceEgress runs the whole suite again with sealed egress on
// every run (Config.WithEgress): the forwarder as pid 1 and the socket
// mount weaken nothing.
func TestConformanceEgress(t *testing.T) {
	e := testEnv(t)
	cfg := suiteConfig(e)
	cfg.WithEgress = true
	sandboxtest.Run(t, newTestBackend(t, e), cfg)
}

// TestConformanceGVisor runs the whole suite with Spec.Runtime gvisor:
// the private dockerd has runsc registered (helpers_test.go).
func TestConformanceGVisor(t *testing.T) {
	e := testEnv(t)
	requireRunsc(t)
	cfg := suiteConfig(e)
	cfg.Runtime = sandbox.RuntimeGVisor
	// gVisor does not see the workspace volume's noexec (config.go): every
	// workspace is refused, and the suite checks the refusal.
	cfg.WorkspaceRefused = true
	sandboxtest.Run(t, newTestBackend(t, e), cfg)
}

// requireRunsc skips a gVisor test when runsc is not installed, or fails
// it when AGENTNODE_REQUIRE_GVISOR=1 (test/deps.sh installs it).
func requireRunsc(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/usr/bin/runsc"); err == nil {
		return
	}
	if os.Getenv("AGENTNODE_REQUIRE_GVISOR") == "1" {
		tb.Fatal("runsc (gVisor) is not installed at /usr/bin/runsc (and AGENTNODE_REQUIRE_GVISOR=1)")
	}
	tb.Skip("runsc (gVisor) is not installed at /usr/bin/runsc")
}

func suiteConfig(e *dockerEnv) sandboxtest.Config {
	// A writable workspace is refused (config.go, workspaceMount): the
	// suite checks the refusal. The daemon's containers share the host's
	// user namespace (unless dockerd runs with --userns-remap, which
	// agentnode does not ask for).
	return sandboxtest.Config{Image: e.img.Ref, ImageStore: e.img.Store, WorkspaceWriteRefused: true,
		NoUserNamespace: "docker runs the sandbox in the host's user namespace"}
}
