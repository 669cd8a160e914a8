// Package brokertest runs a broker.Broker through the real go-plugin gRPC
// path in memory, so broker authors can test without building a binary.
package brokertest

import (
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed, and with it the server, when the test ends.
func Connect(t testing.TB, info plugin.Info, impl broker.Broker) *broker.Client {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		plugin.KindBroker: &broker.GRPCPlugin{Impl: impl, Info: info},
	})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.KindBroker)
	if err != nil {
		t.Fatalf("brokertest: dispense: %v", err)
	}
	c, ok := raw.(*broker.Client)
	if !ok {
		t.Fatalf("brokertest: dispensed %T, want *broker.Client", raw)
	}
	return c
}
