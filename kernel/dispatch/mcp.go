package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// MCP server packages (specs/mcp.md). Placement checks the launch
// (checkMCPLaunch): the server must be preinstalled in the package and
// pinned — from the sealed lockfile entry when the package has a verified
// one, which must agree with the installed manifest — else the run is
// refused (mcp_not_preinstalled, mcp_unpinned) before the decision record.
// Then it is placed like a toolpack, and the checked launch goes into the
// plan (plan.MCPLaunch). The executor (executor/mcpserver, wired in by
// cmd/agentnode) starts the server on that placement with no network (but
// a sealed egress proxy for sealed mcp_allowed_domains, whose every
// connection the kernel audits: egress.go) and nothing from the host
// environment, and makes the one tools/call the pipeline decided.

// errUnsealedDomains is the refusal of mcp_allowed_domains that no verified
// lockfile entry seals (egress_denied).
const errUnsealedDomains = "mcp_allowed_domains must be sealed in agentnode.lock"

// checkMCPLaunch checks that st's mcp_server package is preinstalled and
// pinned, and keeps the plan in st.mcp.
func checkMCPLaunch(st *state) error {
	m := st.pkg.Manifest
	if m.MCP == nil {
		return reason.New(reason.MCPNotPreinstalled, "package %s has no mcp_server section", m.PackageID)
	}
	launch := *m.MCP
	if st.lockEntry != nil {
		sealed, err := sealedMCP(st.lockEntry, st.pkg.ArtifactHash)
		if err != nil {
			return reason.New(reason.CodeOf(err), "package %s: lockfile entry: %w", m.PackageID, err)
		}
		switch {
		case !slices.Equal(sealed.Command, m.MCP.Command):
			return reason.New(reason.MCPUnpinned, "package %s: the lockfile's sealed mcp_preinstall_command differs from the installed manifest's mcp_server.command", m.PackageID)
		case m.MCP.Install == nil || *sealed.Install != *m.MCP.Install:
			return reason.New(reason.MCPUnpinned, "package %s: the lockfile's sealed mcp_preinstall differs from the installed manifest's mcp_server.install", m.PackageID)
		case !slices.Equal(sealed.AllowedDomains, m.MCP.AllowedDomains):
			return reason.New(reason.EgressDenied, "package %s: %s: the sealed list differs from the installed manifest's mcp_server.allowed_domains", m.PackageID, errUnsealedDomains)
		}
		launch = *sealed
	} else if len(m.MCP.AllowedDomains) > 0 {
		return reason.New(reason.EgressDenied, "package %s: %s: the package has no verified lockfile entry", m.PackageID, errUnsealedDomains)
	}
	cmd, err := manifest.CheckMCPLaunch(&launch, st.pkg.Dir)
	if err != nil {
		return reason.New(reason.CodeOf(err), "package %s: %w", m.PackageID, err)
	}
	if len(launch.AllowedDomains) > 0 {
		if err := egress.ValidateDomains(launch.AllowedDomains); err != nil {
			return reason.New(reason.EgressDenied, "package %s: sealed mcp_allowed_domains: %w", m.PackageID, err)
		}
	}
	l := &plan.MCPLaunch{Command: cmd, Domains: launch.AllowedDomains, Declared: map[string]string{}}
	for _, t := range m.Tools {
		l.Declared[t.Name] = t.Entrypoint
	}
	st.mcp = l
	return nil
}

// sealedMCP reads the launch from a verified lockfile entry: it must say
// mcp_preinstalled true and seal the preinstall of exactly this artifact.
func sealedMCP(e *lockfile.Value, artifactHash string) (*manifest.MCP, error) {
	if v := e.Get("mcp_preinstalled"); v == nil || v.Kind != lockfile.Bool || !v.Bool {
		return nil, reason.New(reason.MCPNotPreinstalled, "mcp_preinstalled is not true: reinstall the package with this agentnode")
	}
	pre := e.Get("mcp_preinstall")
	if pre == nil || pre.Kind != lockfile.Object {
		return nil, reason.New(reason.MCPNotPreinstalled, "mcp_preinstall is missing")
	}
	if got := lockString(pre, "artifact_hash"); got != artifactHash {
		return nil, reason.New(reason.MCPNotPreinstalled, "mcp_preinstall.artifact_hash does not name the installed package's content")
	}
	in := &manifest.MCPInstall{Manager: lockString(pre, "manager"), Package: lockString(pre, "package"), Version: lockString(pre, "version")}
	cmd, err := lockStrings(e, "mcp_preinstall_command", true)
	if err != nil {
		return nil, reason.New(reason.MCPNotPreinstalled, "%w", err)
	}
	domains, err := lockStrings(e, "mcp_allowed_domains", false)
	if err != nil {
		return nil, reason.New(reason.EgressDenied, "%w", err)
	}
	return &manifest.MCP{Command: cmd, Install: in, AllowedDomains: domains}, nil
}

// lockStrings reads an array of strings; absent is nil unless required.
func lockStrings(e *lockfile.Value, field string, required bool) ([]string, error) {
	v := e.Get(field)
	if v == nil || v.Kind == lockfile.Null {
		if required {
			return nil, fmt.Errorf("%s is missing", field)
		}
		return nil, nil
	}
	if v.Kind != lockfile.Array {
		return nil, fmt.Errorf("%s is %s, not an array of strings", field, v.Kind)
	}
	out := make([]string, 0, len(v.Arr))
	for _, a := range v.Arr {
		if a.Kind != lockfile.String {
			return nil, fmt.Errorf("%s has %s, not a string", field, a.Kind)
		}
		out = append(out, a.Str)
	}
	return out, nil
}

// hostInterpreterPath is where an interpreter named in an MCP command is
// looked for on the host, in order: system software only, never the
// caller's PATH.
var hostInterpreterPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// resolveMCPInterpreter finds the host path of the plan's interpreter
// (host placement). Not found is mcp_not_preinstalled.
func resolveMCPInterpreter(st *state) error {
	name := st.mcp.Command.Interpreter
	if name == "" {
		return nil
	}
	for _, dir := range hostInterpreterPath {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			st.mcp.HostInterpreter = p
			return nil
		}
	}
	return reason.New(reason.MCPNotPreinstalled, "package %s: interpreter %s is not installed on this host (looked in %v)",
		st.pkg.ID, name, hostInterpreterPath)
}
