// Package plugintest runs a plugin of any kind through the real go-plugin
// gRPC path in memory, so that a plugin can be tested without building a
// binary. Each kind's test package (trusttest, guardtest, sandboxtest,
// brokertest) wraps Connect with its own types.
package plugintest

import (
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
)

// Connect serves p (a kind's GRPCPlugin with its Impl and Info) over
// in-memory gRPC under the name kind and returns the host-side client it
// dispenses, which must be a C, and the go-plugin client (its Conn is the
// raw gRPC connection; closing it breaks the connection). The connection is
// closed, and with it the server, when the test ends.
func Connect[C any](t testing.TB, kind string, p goplugin.Plugin) (C, *goplugin.GRPCClient) {
	t.Helper()
	// Closing the client also stops the server (go-plugin's controller
	// Shutdown).
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{kind: p})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatalf("plugintest: dispense %s: %v", kind, err)
	}
	c, ok := raw.(C)
	if !ok {
		var want C
		t.Fatalf("plugintest: dispensed %T, want %T", raw, want)
	}
	return c, client
}
