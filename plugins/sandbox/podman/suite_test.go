package main

import (
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestConformance runs the shared conformance and escape suite against
// this backend in-process, through the real gRPC adapter.
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

// TestConformanceGVisor runs the whole suite with Spec.Runtime gvisor:
// podman with gVisor's runsc as the OCI runtime.
func TestConformanceGVisor(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t)
	c := sandboxtest.Connect(t, info(), b)
	cfg := suiteConfig(fx)
	cfg.Runtime = sandbox.RuntimeGVisor
	sandboxtest.Run(t, c, cfg)
}

func suiteConfig(fx fixture) sandboxtest.Config {
	return sandboxtest.Config{
		Image:      fx.Img.Ref,
		ImageStore: fx.Img.Store,
		// Rootful podman without --userns: the sandbox user is host uid
		// 1000.
		NoUserNamespace: "podman runs the sandbox in the host's user namespace",
	}
}
