package sandboxtest

import (
	"testing"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed, and with it the server, when the test ends.
func Connect(t testing.TB, info plugin.Info, impl sandbox.Backend) *sandbox.Client {
	t.Helper()
	c, _ := plugintest.Connect[*sandbox.Client](t, plugin.KindSandbox, &sandbox.GRPCPlugin{Impl: impl, Info: info})
	return c
}
