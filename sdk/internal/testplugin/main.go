// Command testplugin is a minimal trust plugin built by the SDK's tests to
// exercise the real go-plugin path: handshake, mutual TLS, checksum pinning,
// version negotiation and the parent watchdog. It serves testeval.Evaluator.
package main

import (
	"github.com/agentnode/agentnode/sdk/internal/testeval"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

func main() {
	trust.Serve(plugin.Info{Name: "testplugin", Version: "0.0.1"}, testeval.Evaluator{})
}
