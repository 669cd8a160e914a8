// Package brokertest runs a broker.Broker through the real go-plugin gRPC
// path in memory, so broker authors can test without building a binary.
package brokertest

import (
	"testing"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed, and with it the server, when the test ends.
func Connect(t testing.TB, info plugin.Info, impl broker.Broker) *broker.Client {
	t.Helper()
	c, _ := plugintest.Connect[*broker.Client](t, plugin.KindBroker, &broker.GRPCPlugin{Impl: impl, Info: info})
	return c
}
