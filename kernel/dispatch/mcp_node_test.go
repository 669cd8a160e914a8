package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/trust"
)

// TestMCPNodeNeedsNodeImage: an MCP server started as [node, /pack/FILE]
// of a community tier is placed in the sandbox, where it needs
// sandbox.node_image: unset, the run is refused before anything starts
// with sandbox_unavailable naming `agentnode sandbox build --node` — never
// the host (where node is installed), never the default image; set, it is
// that image that is resolved (here one that is not there). A server that
// is the package's own binary keeps the default image.
func TestMCPNodeNeedsNodeImage(t *testing.T) {
	nodeManifest := strings.Replace(mcpTestManifest, "command: [/pack/bin/server]", "command: [node, /pack/bin/server]", 1)
	unknownTrust := func(t *testing.T) {
		var stages []stage
		for _, s := range decisionStages {
			if s.name == "trust" {
				s.run = func(_ context.Context, st *state) error { st.res.Trust = trust.LevelUnknown; return nil }
			}
			stages = append(stages, s)
		}
		withStages(t, stages...)
	}
	k, _ := mcpHome(t, nodeManifest)
	unknownTrust(t)
	setConfig(t, k, "trust.minimum_trust_level", "unknown")
	res, err := mcpRun(t, k, "echo", `{}`)
	if !errors.Is(err, reason.ErrSandboxUnavailable) || res.Ran || res.Placement != PlacementSandbox ||
		!strings.Contains(err.Error(), "no Node runtime image is configured (sandbox.node_image): build and pin it with `agentnode sandbox build --node`") {
		t.Fatalf("no node image: placement %q ran %v: %v", res.Placement, res.Ran, err)
	}

	missing := "agentnode/node@sha256:" + strings.Repeat("1", 64)
	setConfig(t, k, "sandbox.node_image", missing)
	res, err = mcpRun(t, k, "echo", `{}`)
	if !errors.Is(err, reason.ErrSandboxUnavailable) || res.Ran || !strings.Contains(err.Error(), "image_missing") ||
		strings.Contains(err.Error(), "--node") {
		t.Fatalf("missing node image: ran %v: %v", res.Ran, err)
	}

	// The package's own binary: the default image (here the placeholder,
	// so image_unpinned), whatever sandbox.node_image says.
	k2, _ := mcpHome(t, mcpTestManifest)
	unknownTrust(t)
	setConfig(t, k2, "trust.minimum_trust_level", "unknown")
	setConfig(t, k2, "sandbox.node_image", missing)
	if res, err := mcpRun(t, k2, "echo", `{}`); !errors.Is(err, reason.ErrImageUnpinned) || res.Ran {
		t.Fatalf("static server: ran %v: %v", res.Ran, err)
	}
}
