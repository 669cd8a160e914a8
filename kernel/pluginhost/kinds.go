package pluginhost

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/trust"
)

// adapters maps a plugin kind to a constructor of its host-side go-plugin
// adapter. The value the adapter dispenses must implement infoer. Adding a
// kind is one line here plus a typed accessor below.
var adapters = map[string]func() goplugin.Plugin{
	plugin.KindTrust:   func() goplugin.Plugin { return &trust.GRPCPlugin{} },
	plugin.KindGuard:   func() goplugin.Plugin { return &guard.GRPCPlugin{} },
	plugin.KindSandbox: func() goplugin.Plugin { return &sandbox.GRPCPlugin{} },
	plugin.KindBroker:  func() goplugin.Plugin { return &broker.GRPCPlugin{} },
}

// infoer is implemented by the client of every kind.
type infoer interface {
	Info(ctx context.Context) (plugin.Info, error)
}

// The typed accessors below return the client of the plugin
// agentnode-<kind>-<name>, starting it on first use. ctx bounds only the wait
// for the start. Errors wrap reason.ErrPluginUnpinned or
// reason.ErrPluginUnavailable.

// Trust returns the trust plugin agentnode-trust-<name>.
func (h *Host) Trust(ctx context.Context, name string) (*trust.Client, error) {
	return dispenseAs[*trust.Client](ctx, h, plugin.KindTrust, name)
}

// Guard returns the Guard inspector plugin agentnode-guard-<name>.
func (h *Host) Guard(ctx context.Context, name string) (*guard.Client, error) {
	return dispenseAs[*guard.Client](ctx, h, plugin.KindGuard, name)
}

// Sandbox returns the sandbox backend plugin agentnode-sandbox-<name>.
func (h *Host) Sandbox(ctx context.Context, name string) (*sandbox.Client, error) {
	return dispenseAs[*sandbox.Client](ctx, h, plugin.KindSandbox, name)
}

// Broker returns the broker plugin agentnode-broker-<name>.
func (h *Host) Broker(ctx context.Context, name string) (*broker.Client, error) {
	return dispenseAs[*broker.Client](ctx, h, plugin.KindBroker, name)
}
