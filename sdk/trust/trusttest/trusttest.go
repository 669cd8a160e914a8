// Package trusttest runs a trust.Evaluator through the real go-plugin gRPC
// path in memory, so plugin authors can test their evaluator without building
// a binary.
package trusttest

import (
	"testing"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
	"github.com/agentnode/agentnode/sdk/trust"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection is closed when the test ends.
func Connect(t testing.TB, info plugin.Info, impl trust.Evaluator) *trust.Client {
	t.Helper()
	c, _ := plugintest.Connect[*trust.Client](t, plugin.KindTrust, &trust.GRPCPlugin{Impl: impl, Info: info})
	return c
}
