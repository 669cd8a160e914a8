// Package trusttest runs a trust.Evaluator through the real go-plugin gRPC
// path in memory, so plugin authors can test their evaluator without building
// a binary.
package trusttest

import (
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed when the test ends.
func Connect(t testing.TB, info plugin.Info, impl trust.Evaluator) *trust.Client {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		plugin.KindTrust: &trust.GRPCPlugin{Impl: impl, Info: info},
	})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.KindTrust)
	if err != nil {
		t.Fatalf("trusttest: dispense: %v", err)
	}
	return raw.(*trust.Client)
}
