package lockedit

import (
	"fmt"
	"time"

	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/store"
)

// SourceLocal is the source of a package installed from the local disk.
const SourceLocal = "local"

// EntryInfo is what an entry records beyond the package itself.
type EntryInfo struct {
	// TrustLevel is the trust tier known at install; "" leaves trust_level
	// out (nothing is claimed).
	TrustLevel string
	// CheckedAt is when TrustLevel was determined (last_trust_check).
	CheckedAt time.Time
	// Source is where the package came from (SourceLocal).
	Source string
}

// EntryFor builds the lockfile entry of an installed package, without
// _integrity (Updater.Put computes it). Canonical fields come from the
// manifest as written: version, package_type, runtime, entrypoint (the
// agent's, or the one every tool shares), artifact_hash, publisher_slug
// (the manifest's publisher, so entries are canonical_version 3), tools
// (capabilities.tools), permissions (flat, as the AgentNode SDK has them:
// network_level, ...), agent, connector, env_requirements and,
// for MCP servers, mcp_command, mcp_env_keys, mcp_allowed_domains and the
// preinstall fields mcp_preinstalled, mcp_preinstall ({manager, package,
// version, artifact_hash}) and mcp_preinstall_command.
// Mutable fields: installed_at, source, install_path, and trust_level and
// last_trust_check only if info names a tier (agentnode install does not:
// specs/lockfile.md).
func EntryFor(p *store.Package, info EntryInfo) (*lockfile.Value, error) {
	m := p.Manifest
	raw, err := lockfile.ParseValue(m.Raw)
	if err != nil {
		return nil, fmt.Errorf("package %s: manifest as JSON: %w", p.ID, err)
	}
	e := lockfile.Obj(
		lockfile.Member{Key: "version", Value: lockfile.Str(p.Version)},
		lockfile.Member{Key: "package_type", Value: lockfile.Str(m.PackageType)},
		lockfile.Member{Key: "runtime", Value: lockfile.Str(m.Runtime)},
	)
	tools := raw.Get("capabilities").Get("tools")
	if ep := entrypoint(raw, tools); ep != "" {
		e.Set("entrypoint", lockfile.Str(ep))
	}
	e.Set("artifact_hash", lockfile.Str(p.ArtifactHash))
	if p.DepsHash != "" {
		// The dependencies agentnode installed into the package
		// (specs/python.md): not part of AgentNode's canonical fields, so
		// the keyed seal covers them, _integrity does not.
		e.Set(lockfile.FieldDepsHash, lockfile.Str(p.DepsHash))
	}
	if m.Publisher != "" {
		e.Set("publisher_slug", lockfile.Str(m.Publisher))
	}
	setIf(e, "tools", tools)
	// The flat form the AgentNode SDK writes and reads (permissions.go).
	setIf(e, "permissions", FlatPermissions(raw.Get("permissions")))
	setIf(e, "agent", raw.Get("agent"))
	setIf(e, "connector", raw.Get("connector"))
	setIf(e, "env_requirements", raw.Get("env_requirements"))
	mcp := raw.Get("mcp_server")
	if mcp == nil {
		mcp = raw.Get("mcp")
	}
	setIf(e, "mcp_command", mcp.Get("command"))
	setIf(e, "mcp_env_keys", mcp.Get("env_keys"))
	if m.PackageType == manifest.TypeMCPServer && m.MCP != nil && m.MCP.Install != nil {
		// Load admitted it, so the server is preinstalled in the package
		// (specs/mcp.md): the pin, the tree it lives in (the package's
		// own content hash: there is no separate volume, so no
		// mcp_sandbox_volume) and the command that starts it.
		e.Set("mcp_preinstalled", &lockfile.Value{Kind: lockfile.Bool, Bool: true})
		e.Set("mcp_preinstall", lockfile.Obj(
			lockfile.Member{Key: "manager", Value: lockfile.Str(m.MCP.Install.Manager)},
			lockfile.Member{Key: "package", Value: lockfile.Str(m.MCP.Install.Package)},
			lockfile.Member{Key: "version", Value: lockfile.Str(m.MCP.Install.Version)},
			lockfile.Member{Key: "artifact_hash", Value: lockfile.Str(p.ArtifactHash)},
		))
		cmd := &lockfile.Value{Kind: lockfile.Array}
		for _, a := range m.MCP.Command {
			cmd.Arr = append(cmd.Arr, lockfile.Str(a))
		}
		e.Set("mcp_preinstall_command", cmd)
	}
	setIf(e, "mcp_allowed_domains", mcp.Get("allowed_domains"))

	e.Set("installed_at", lockfile.Str(p.InstalledAt.UTC().Format(time.RFC3339)))
	if info.TrustLevel != "" {
		e.Set("trust_level", lockfile.Str(info.TrustLevel))
		if !info.CheckedAt.IsZero() {
			e.Set("last_trust_check", lockfile.Str(info.CheckedAt.UTC().Format(time.RFC3339)))
		}
	}
	if info.Source != "" {
		e.Set("source", lockfile.Str(info.Source))
	}
	e.Set("install_path", lockfile.Str(p.Dir))
	return e, nil
}

func setIf(e *lockfile.Value, key string, v *lockfile.Value) {
	if v != nil && v.Kind != lockfile.Null {
		e.Set(key, v)
	}
}

// entrypoint is agent.entrypoint, else the entrypoint every tool shares,
// else "".
func entrypoint(raw, tools *lockfile.Value) string {
	if ep := stringField(raw.Get("agent"), "entrypoint"); ep != "" {
		return ep
	}
	if tools == nil || tools.Kind != lockfile.Array || len(tools.Arr) == 0 {
		return ""
	}
	ep := stringField(tools.Arr[0], "entrypoint")
	for _, t := range tools.Arr[1:] {
		if stringField(t, "entrypoint") != ep {
			return ""
		}
	}
	return ep
}

// stringField returns the string value of field in v, "" if absent, null
// or not a string.
func stringField(v *lockfile.Value, field string) string {
	if x := v.Get(field); x != nil && x.Kind == lockfile.String {
		return x.Str
	}
	return ""
}
