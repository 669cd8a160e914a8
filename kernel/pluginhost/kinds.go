package pluginhost

import (
	"context"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/egress"
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
	plugin.KindEgress:  func() goplugin.Plugin { return &egress.GRPCPlugin{} },
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

// EgressProxy starts a process of the egress plugin agentnode-egress-<name>
// for one caller alone (one MCP server session): unlike the accessors
// above it is neither cached nor shared, so every session's untrusted
// traffic is parsed in a process of its own. The caller stops it with
// Dedicated.Stop; Host.Close stops it too. Errors wrap
// reason.ErrPluginUnpinned or reason.ErrPluginUnavailable.
func (h *Host) EgressProxy(name string) (*egress.Client, *Dedicated, error) {
	d, err := h.startDedicated(plugin.KindEgress, name)
	if err != nil {
		return nil, nil, err
	}
	c, ok := d.p.raw.(*egress.Client)
	if !ok {
		d.Stop()
		return nil, nil, reason.New(reason.PluginUnavailable, "plugin %s: adapter dispensed %T, want *egress.Client", d.p.key, d.p.raw)
	}
	return c, d, nil
}

// Dedicated is a plugin process started for one caller (Host.EgressProxy).
type Dedicated struct {
	h    *Host
	p    *proc
	once sync.Once
}

// PID is the plugin's process id.
func (d *Dedicated) PID() int { return d.p.pid }

// Stop ends the process and its process group, as Host.Close does for
// every plugin, and waits for that. Later calls do nothing.
func (d *Dedicated) Stop() {
	d.once.Do(func() {
		d.h.mu.Lock()
		delete(d.h.dedicated, d)
		d.h.mu.Unlock()
		d.h.stop(d.p)
	})
}

// startDedicated verifies and starts kind/name outside the cache.
func (h *Host) startDedicated(kind, name string) (*Dedicated, error) {
	key := Key(kind, name)
	newAdapter, ok := adapters[kind]
	if !ok || !ValidName(name) {
		return nil, reason.New(reason.PluginUnavailable, "plugin %s: invalid kind or name", key)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, reason.New(reason.PluginUnavailable, "plugin %s: plugin host is closed", key)
	}
	h.launches.Add(1)
	h.mu.Unlock()
	defer h.launches.Done()
	p, err := h.start(kind, name, newAdapter())
	if err == nil {
		h.mu.Lock()
		if h.closed {
			err = reason.New(reason.PluginUnavailable, "plugin %s: plugin host closed while it started", key)
		} else {
			d := &Dedicated{h: h, p: p}
			h.dedicated[d] = struct{}{}
			h.mu.Unlock()
			return d, nil
		}
		h.mu.Unlock()
	}
	if p != nil {
		h.stop(p)
	}
	return nil, err
}
