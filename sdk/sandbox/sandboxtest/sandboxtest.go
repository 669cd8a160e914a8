package sandboxtest

import (
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed, and with it the server, when the test ends.
func Connect(t testing.TB, info plugin.Info, impl sandbox.Backend) *sandbox.Client {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		plugin.KindSandbox: &sandbox.GRPCPlugin{Impl: impl, Info: info},
	})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.KindSandbox)
	if err != nil {
		t.Fatalf("sandboxtest: dispense: %v", err)
	}
	c, ok := raw.(*sandbox.Client)
	if !ok {
		t.Fatalf("sandboxtest: dispensed %T, want *sandbox.Client", raw)
	}
	return c
}
