package main

import (
	"context"
	"errors"

	"github.com/agentnode/agentnode/sdk/egress"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// The contract's event types, used unqualified throughout this plugin.
type (
	Event    = egress.Event
	Decision = egress.Decision
)

// Decisions of an Event.
const (
	Allow  = egress.Allow
	Deny   = egress.Deny
	Closed = egress.Closed
)

// service starts one Proxy per session.
type service struct{}

func (service) Start(ctx context.Context, req *egress.StartRequest, audit func(egress.Event) error) (egress.Instance, error) {
	cfg := Config{Allowed: req.Allowed, SocketDir: req.SocketDir, Audit: audit}
	if req.TestHosts != "" || req.TestPermit != "" {
		r, err := testDestinations(req.TestHosts, req.TestPermit)
		if err != nil {
			return nil, err
		}
		if r != nil {
			cfg.Resolver = r
		}
	}
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// errNoTestDestinations refuses test-only settings in a build without the
// egresstest tag.
var errNoTestDestinations = errors.New("egress proxy: test destinations requested, but this build has none (egresstest tag)")

func main() {
	egress.Serve(plugin.Info{Name: "proxy", Version: "1.0.0"}, service{})
}
