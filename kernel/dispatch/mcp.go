package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/mcpproxy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// MCP server packages (specs/mcp.md). Placement checks the launch
// (checkMCPLaunch): the server must be preinstalled in the package and
// pinned — from the sealed lockfile entry when the package has a verified
// one, which must agree with the installed manifest — else the run is
// refused (mcp_not_preinstalled, mcp_unpinned) before the decision record.
// Then it is placed like a toolpack. Execution (executeMCP) starts the
// server on that placement with no network (but the sealed egress proxy of
// egress.go for sealed mcp_allowed_domains) and nothing from the host
// environment, initializes an MCP session over its stdio, and makes the one
// tools/call the pipeline decided, through the Guard proxy
// (kernel/mcpproxy): only declared tools, only with the decided input.

// errUnsealedDomains is the refusal of mcp_allowed_domains that no verified
// lockfile entry seals (egress_denied).
const errUnsealedDomains = "mcp_allowed_domains must be sealed in agentnode.lock"

// mcpPlan is the checked launch of an mcp_server package.
type mcpPlan struct {
	cmd     *manifest.MCPCommand
	install manifest.MCPInstall
	domains []string
	// declared maps each declared tool to its name on the server (the
	// tool's entrypoint for runtime mcp).
	declared map[string]string
	// interpreter is the host path of cmd.Interpreter (host placement).
	interpreter string
}

// mcpEgress starts the egress proxy for a server whose sealed
// mcp_allowed_domains are not empty: the socket to hand to the sandbox, a
// function that stops the proxy, returning an error unless it verified the
// teardown, and a channel closed when the proxy failed while serving
// (egress.go). nil: egress is not available, and such servers are refused
// with egress_denied at placement.
var mcpEgress = startMCPEgress

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
		if mcpEgress == nil {
			return reason.New(reason.EgressDenied,
				"package %s: MCP server egress to mcp_allowed_domains is not available in this build of agentnode; servers run with network none", m.PackageID)
		}
		if err := egress.ValidateDomains(launch.AllowedDomains); err != nil {
			return reason.New(reason.EgressDenied, "package %s: sealed mcp_allowed_domains: %w", m.PackageID, err)
		}
	}
	plan := &mcpPlan{cmd: cmd, install: *launch.Install, domains: launch.AllowedDomains, declared: map[string]string{}}
	for _, t := range m.Tools {
		plan.declared[t.Name] = t.Entrypoint
	}
	st.mcp = plan
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
	name := st.mcp.cmd.Interpreter
	if name == "" {
		return nil
	}
	for _, dir := range hostInterpreterPath {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			st.mcp.interpreter = p
			return nil
		}
	}
	return reason.New(reason.MCPNotPreinstalled, "package %s: interpreter %s is not installed on this host (looked in %v)",
		st.pkg.ID, name, hostInterpreterPath)
}

// decidedKey carries, in a call's context, the one call the pipeline
// decided: the Guard proxy forwards nothing else.
type decidedKey struct{}

type decidedCall struct {
	tool  string
	input []byte // compacted JSON
}

// forwardDecided is the Guard proxy's decision hook for kernel calls: the
// pipeline has decided (policy, rate limit, inspectors, prompt, audit)
// before execute, so the hook only lets through exactly the call it
// decided.
func forwardDecided(ctx context.Context, tool string, args json.RawMessage) error {
	d, ok := ctx.Value(decidedKey{}).(decidedCall)
	if !ok {
		return reason.New(reason.PolicyDenied, "tool %s: no pipeline decision for this call", tool)
	}
	var got bytes.Buffer
	if d.tool != tool || json.Compact(&got, args) != nil || !bytes.Equal(got.Bytes(), d.input) {
		return reason.New(reason.PolicyDenied, "tool %s: the call is not the one the pipeline decided", tool)
	}
	return nil
}

// executeMCP makes the decided tools/call: on a session from
// Kernel.MCPServers, or on a server started for this call and stopped
// after it (its cleanup verified). The result's structuredContent (else
// its text) is the tool's result; isError is a failed tool (ok false).
func executeMCP(ctx context.Context, st *state) error {
	start := time.Now()
	okFalse := false
	st.res.OK = &okFalse
	defer func() {
		ms := time.Since(start).Milliseconds()
		st.res.DurationMS = &ms
	}()
	if st.mcp == nil {
		return reason.New(reason.MCPNotPreinstalled, "package %s: no checked MCP launch", st.pkg.ID)
	}
	var input bytes.Buffer
	in := st.req.Input
	if len(bytes.TrimSpace(in)) == 0 {
		in = json.RawMessage(`{}`)
	}
	if err := json.Compact(&input, in); err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	callCtx, cancel := context.WithTimeout(context.WithValue(ctx, decidedKey{}, decidedCall{st.tool.Name, input.Bytes()}), st.set.timeout)
	defer cancel()

	var (
		sess    *mcpSession
		release func(broken bool)
		err     error
	)
	if pool := st.k.MCPServers; pool != nil {
		sess, release, err = pool.acquire(callCtx, st)
	} else {
		sess, err = startMCPSession(callCtx, ctx, st, st.set.timeout)
		release = func(bool) {}
	}
	if err != nil {
		return mcpStartFailed(st, err)
	}
	st.res.Ran = true
	res, callErr := sess.proxy.Call(callCtx, st.tool.Name, input.Bytes())
	timedOut := callErr != nil && callCtx.Err() != nil && ctx.Err() == nil
	// A refusal of the proxy (a coded error) leaves the server as it was;
	// a failed or timed-out call may have left it broken or busy.
	release(timedOut || (callErr != nil && reason.CodeOf(callErr) == ""))

	if st.k.MCPServers == nil {
		// One call per server: stop it and prove it is gone.
		sess.stop()
		st.res.Stderr = sess.stderr.String()
		code := sess.exitCode
		st.res.ExitCode = &code
		if err := sess.cleanupErr; err != nil {
			return err
		}
	}
	switch {
	case timedOut:
		return reason.New(reason.Timeout, "tool %s/%s timed out after %s", st.pkg.ID, st.tool.Name, st.set.timeout)
	case callErr != nil && reason.CodeOf(callErr) != "":
		return callErr // refused by the proxy: nothing reached the server
	case callErr != nil:
		st.res.Error = "the MCP server failed during the call: " + callErr.Error()
		return nil
	}
	ok, out, msg := mcpproxy.ToolResult(res)
	if len(out) > maxMCPResult {
		st.res.Error = fmt.Sprintf("tool output exceeded %d bytes", maxMCPResult)
		return nil
	}
	st.res.OK = &ok
	st.res.Output, st.res.Error = out, msg
	if ok && st.res.ExitCode != nil && *st.res.ExitCode != 0 && *st.res.ExitCode != exitKilled {
		st.res.Error = fmt.Sprintf("the MCP server exited with code %d after the call", *st.res.ExitCode)
		st.res.OK = &okFalse
	}
	return nil
}

// exitKilled is a server stopped with SIGKILL after it did not exit on
// its own (128+9): not the server's failure.
const exitKilled = 137

// mcpStartFailed turns a failed server start into the outcome: a
// placement problem keeps its code; a server that would not start or
// initialize is a failed tool (it ran, the package is broken).
func mcpStartFailed(st *state, err error) error {
	var se *mcpStartError
	if !errors.As(err, &se) {
		return err
	}
	if se.exitCode != nil && *se.exitCode >= 0 {
		st.res.Ran = true
		st.res.ExitCode = se.exitCode
	}
	st.res.Stderr = se.stderr
	if se.cleanupErr != nil {
		return se.cleanupErr
	}
	if reason.CodeOf(se.err) == reason.Timeout {
		return se.err
	}
	st.res.Error = "the MCP server did not start: " + se.err.Error()
	return nil
}
