package main

import (
	"os"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestConformance runs the shared conformance and escape suite against
// this backend through the real gRPC plugin path.
func TestConformance(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)
	sandboxtest.Run(t, c, suiteConfig(fx))
}

// TestConformanceEgress runs the whole suite again with sealed egress on
// every run (Config.WithEgress): the forwarder as pid 1 and the socket
// mount weaken nothing.
func TestConformanceEgress(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)
	cfg := suiteConfig(fx)
	cfg.WithEgress = true
	sandboxtest.Run(t, c, cfg)
}

func suiteConfig(fx fixture) sandboxtest.Config {
	return sandboxtest.Config{
		Image:      fx.Image,
		ImageStore: fx.Store,
		// Run by a normal user (rootless.go): no idmapped mount, so no
		// workspace at all.
		WorkspaceRefused: os.Getenv(rootlessEnv) == "1",
	}
}
