package main

import (
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestConformance runs the shared conformance and escape suite against
// this backend in-process, through the real gRPC adapter.
func TestConformance(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)
	sandboxtest.Run(t, c, suiteConfig(fx))
}

func suiteConfig(fx fixture) sandboxtest.Config {
	return sandboxtest.Config{
		Image:   fx.Img.Ref,
		ImageID: fx.Img.ConfigDigest,
	}
}
