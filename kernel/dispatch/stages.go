package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/trust"
)

// stageConfig loads and validates the config. Missing → not_set_up,
// invalid → config_invalid; never defaulted.
func stageConfig(_ context.Context, st *state) error {
	set, err := loadSettings(st.k.configPath(), st.k.Environ, st.k.verdicts())
	if err != nil {
		return err
	}
	st.set = set
	st.env = policy.EnvFrom(st.k.Environ)
	st.env.Interactive = st.k.Interactive
	st.env.Root = st.k.Root
	return nil
}

// stageArtifact loads the installed package, resolves the request against
// it (resolveRequest) and recomputes the package's content hash (with
// Seals, only when the tree changed since it was last verified). The
// request is resolved before the hash so that the input check and its
// schema validation overlap the hashing and the plugin starts.
func stageArtifact(_ context.Context, st *state) error {
	pkg, err := st.loadPackage()
	if err != nil {
		return err
	}
	if err := st.resolveRequest(); err != nil {
		return err
	}
	return st.k.Seals.Verify(pkg.Dir, pkg.ArtifactHash+" "+pkg.DepsHash, func() error { return st.k.store().Verify(pkg) })
}

// loadPackage reads the installed package's metadata and manifest (the
// lockfile stage may have read them already; the content is hashed again
// by the artifact stage either way).
func (st *state) loadPackage() (*store.Package, error) {
	pkg, err := st.loaded, error(nil)
	if pkg == nil || pkg.ID != st.req.Package {
		pkg, err = st.k.store().Get(st.req.Package)
	}
	if err != nil {
		if errors.Is(err, store.ErrNotInstalled) {
			return nil, reason.New(reason.ArtifactMismatch, "%w", err)
		}
		return nil, err
	}
	st.pkg = pkg
	st.res.Version = pkg.Version
	return pkg, nil
}

// resolveRequest finds the requested tool, bounds its input before
// anything reads it, classifies the call's action types and, for the
// inspectors, starts validating the input against the tool's schema.
func (st *state) resolveRequest() error {
	tool, ok := st.pkg.Manifest.Tool(st.req.Tool)
	if schema := plan.MCPReadMethods[st.req.Tool]; !ok && schema != "" && st.pkg.Manifest.PackageType == manifest.TypeMCPServer {
		tool, ok = &manifest.Tool{Name: st.req.Tool, ActionType: "read", InputSchema: json.RawMessage(schema)}, true
	}
	if !ok {
		return reason.New(reason.PolicyDenied, "package %s has no tool %q", st.pkg.ID, st.req.Tool)
	}
	st.tool = tool
	// Before anything reads the input (the schema check, the inspectors):
	// its size, encoding and nesting are bounded.
	if err := checkInput(st.pkg, st.req.Input); err != nil {
		return err
	}
	st.actions = classify(st.pkg.Manifest, tool)
	for _, a := range st.actions {
		st.res.Actions = append(st.res.Actions, string(a))
	}
	if len(st.set.inspectors) > 0 {
		// For the inspectors; it overlaps the hash and the plugin starts.
		st.input = startInputCheck(tool.InputSchema, st.req.Input)
	}
	return nil
}

// classify is the call's action types (kernel/policy) from what the
// manifest declares for the tool and the package.
func classify(m *manifest.Manifest, tool *manifest.Tool) []policy.Action {
	return policy.Classify(policy.ClassifyInput{
		ToolName:           tool.Name,
		DeclaredAction:     tool.ActionType,
		NetworkLevel:       m.Permissions.Network.Level,
		FilesystemLevel:    m.Permissions.Filesystem.Level,
		CodeExecutionLevel: m.Permissions.CodeExecution.Level,
		Connector:          m.Connector != nil,
	})
}

// checkInput refuses, before the decision, an input the tool could not be
// given (plan.CheckInput: not one JSON object in valid UTF-8, or too
// large or too deep): such a request is denied (input_denied), never allowed and then
// failed. An mcp_server call with no input is called with {} (executor/mcpserver).
func checkInput(pkg *store.Package, input json.RawMessage) error {
	if pkg.Manifest.PackageType == manifest.TypeMCPServer && len(bytes.TrimSpace(input)) == 0 {
		return nil
	}
	if err := plan.CheckInput(input); err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	return nil
}

// stageTrust asks the configured trust plugin for the package's tier.
func stageTrust(ctx context.Context, st *state) error {
	name := st.set.trustPlugin
	client, err := st.k.Plugins.Trust(ctx, name)
	if err != nil {
		return err
	}
	resp, err := client.Evaluate(ctx, &trust.EvaluateRequest{
		PackageID:    st.pkg.ID,
		Version:      st.pkg.Version,
		ArtifactHash: st.pkg.ArtifactHash,
		Publisher:    st.pkg.Manifest.Publisher,
		Attestations: st.pkg.Attestations,
		Keys:         st.set.trustKeys,
		NowUnix:      st.k.now().Unix(),
	})
	if err != nil {
		return pluginCallError("trust-"+name, err)
	}
	st.res.Trust = resp.Level
	st.lowerTrustToLockfile()
	if resp.Level == trust.LevelUnknown && resp.Reason != "" {
		st.k.warn(st, "trust is unknown: "+resp.Reason)
	}
	return nil
}

func stageMinimumTrust(_ context.Context, st *state) error {
	if trust.Rank(st.res.Trust) < trust.Rank(st.set.minTrust) {
		return reason.New(reason.TrustBelowMinimum, "package %s@%s has trust %s, below the minimum %s",
			st.pkg.ID, st.pkg.Version, st.res.Trust, st.set.minTrust)
	}
	return nil
}

// stagePlacement decides host or sandbox. Community tiers and unknown trust
// always go to the sandbox; trusted/curated follow sandbox.host_trust_policy;
// agents never run on the host. A host placement needs the confinement
// sandbox.host_confinement asks for (checkHostConfinement); a sandbox one
// a backend that is available now (checkSandbox). An mcp_server package
// must be preinstalled and pinned first (checkMCPLaunch).
func stagePlacement(ctx context.Context, st *state) error {
	m := st.pkg.Manifest
	if m.PackageType == manifest.TypeMCPServer {
		// Preinstalled and pinned, from the sealed lockfile entry when
		// there is one (mcp.go); then placed like a toolpack.
		if err := checkMCPLaunch(st); err != nil {
			return err
		}
	} else if err := checkRuntime(m); err != nil {
		return err
	}
	// The tier is the trust plugin's answer (stageTrust), lowered by the
	// lockfile: placement reads no attestation itself.
	placement := PlacementSandbox
	if hostEligible(st.res.Trust, st.set.hostTrustPolicy) {
		placement = PlacementHost
	}
	st.rememberPlacement()
	if st.mcp != nil && len(st.mcp.Domains) > 0 {
		// Sealed egress exists only in the sandbox (mcp.go).
		placement = PlacementSandbox
	}
	if m.PackageType == "agent" {
		if !st.set.agentSandboxEnabled {
			if placement == PlacementHost {
				// Its tier would put it on the host, where an agent's own
				// entrypoint never runs (AgentNode's refusal).
				return reason.New(reason.HostAgentExecutionUnsupported,
					"agent %s (trust %s) would run on the host, and agents never do; agent_sandbox.enabled runs it in the agent sandbox",
					m.PackageID, st.res.Trust)
			}
			return reason.New(reason.AgentSandboxDisabled, "agent %s runs only in the agent sandbox, and agent_sandbox.enabled is false", m.PackageID)
		}
		placement = PlacementSandbox
	}
	st.res.Placement = placement
	if placement == PlacementHost {
		if st.mcp != nil {
			if err := resolveMCPInterpreter(st); err != nil {
				return err
			}
		}
		if m.Runtime == manifest.RuntimePython {
			if err := checkHostPython(st); err != nil {
				return err
			}
		}
		// Refuse here, before any decision record says allow, what the
		// host backend would refuse (it checks again when it runs).
		return checkHostConfinement(st)
	}
	st.res.Backend = st.set.backend
	return checkSandbox(ctx, st)
}

// checkSandbox confirms the configured backend can run the package now: the
// pinned image resolves (digest checked), the backend plugin is pinned and
// up, and it reports itself available. Any failure refuses — never another
// backend, never the host.
func checkSandbox(ctx context.Context, st *state) error {
	st.res.Runtime = sandbox.RuntimeFor(st.res.Trust, st.set.sandboxRuntime, st.set.runtimeByTrust)
	ref, err := sandboxImage(st)
	if err != nil {
		return err
	}
	img, err := image.ResolveSealed(st.k.HomeDir, ref, st.k.Seals)
	if err != nil {
		return err
	}
	client, err := st.k.Plugins.Sandbox(ctx, st.set.backend)
	if err != nil {
		return plan.SandboxError(st.set.backend, err)
	}
	resp, err := client.Availability(ctx, &sandbox.AvailabilityRequest{Image: img.Ref, ImageStore: img.Store, Runtime: st.res.Runtime})
	if err != nil {
		return plan.SandboxError(st.set.backend, err)
	}
	if code := reason.SandboxUnavailable; !resp.Available {
		if resp.Reason == sandbox.ReasonRuntimeMissing { // never another runtime
			code = reason.SandboxRuntimeUnavailable
		}
		return reason.New(code, "sandbox backend %s is unavailable for runtime %s: %s (%s)",
			st.set.backend, st.res.Runtime, resp.Reason, resp.Detail)
	}
	st.img, st.sandbox = img, client
	return nil
}

// checkRuntime refuses a package whose runtime this version does not run
// for its package type (runtime_unsupported: no policy decided it): exec
// and python for toolpacks and agents (a python agent runs the agent shim
// in the Python image, agent.go). mcp_server packages are checked by
// checkMCPLaunch.
func checkRuntime(m *manifest.Manifest) error {
	switch {
	case m.Runtime == manifest.RuntimeExec:
		return nil
	case m.Runtime == manifest.RuntimePython:
		return nil
	}
	return reason.New(reason.RuntimeUnsupported, "%s %s: runtime %q is %w", m.PackageType, m.PackageID, m.Runtime, errStageUnavailable)
}

// sandboxImage is the image reference a sandboxed run uses: sandbox.image,
// for a `runtime: python` package and a `[python3, /pack/FILE]` MCP server
// sandbox.python_image, for a `[node, /pack/FILE]` one sandbox.node_image,
// which must be set (sandbox_unavailable otherwise: never the host, never
// the default image, which has neither Python nor Node).
func sandboxImage(st *state) (string, error) {
	ref, key, title := st.set.image, "", ""
	switch {
	case st.pkg.Manifest.Runtime == manifest.RuntimePython:
		ref, key, title = st.set.pythonImage, "python", "Python"
	case st.mcp != nil && st.mcp.Command.Interpreter == "node":
		ref, key, title = st.set.nodeImage, "node", "Node"
	case st.mcp != nil && st.mcp.Command.Interpreter != "": // python3, python
		ref, key, title = st.set.pythonImage, "python", "Python"
	}
	if ref == "" {
		return "", reason.New(reason.SandboxUnavailable,
			"%s runs with runtime %s and no %s runtime image is configured (sandbox.%s_image): "+
				"build and pin it with `agentnode sandbox build --%s`", toolName(st), key, title, key, key)
	}
	return ref, nil
}

// stagePolicy applies Guard's policy engine, with guard.max_permissions as
// the permission ceiling: a package declaring more is denied. A tool call an
// agent made (run_tool) gets the agent's pre-approved action types
// (guard.agent_overrides).
func stagePolicy(_ context.Context, st *state) error {
	d := policy.Decide(policy.Input{
		Package:         st.pkg.ID,
		Tool:            st.tool.Name,
		Actions:         st.actions,
		TrustLevel:      st.res.Trust,
		Env:             st.env,
		Strict:          st.set.guardStrict,
		Global:          st.set.guardGlobal,
		Overrides:       st.set.overrides,
		ActionOverrides: st.set.actionOverrides,
		PreApproved:     st.set.agentPreApproved[st.req.viaAgent],
		Permissions: policy.Permissions{
			Network:       st.pkg.Manifest.Permissions.Network.Level,
			Filesystem:    st.pkg.Manifest.Permissions.Filesystem.Level,
			CodeExecution: st.pkg.Manifest.Permissions.CodeExecution.Level,
		},
		Ceiling:       st.set.ceiling,
		PromptCeiling: st.set.promptCeiling,
	})
	st.res.Risk, st.res.RiskBand = d.Score, string(d.Band)
	st.res.GuardChain = append(st.res.GuardChain, "policy:"+string(d.Verdict))
	if d.Rule == policy.RulePreApproved {
		// The audit record shows whose pre-approval allowed the call.
		st.res.GuardChain = append(st.res.GuardChain, "pre_approved:"+st.req.viaAgent)
	}
	if d.Verdict == policy.Deny {
		if d.Rule == policy.RulePermission {
			keys := st.set.ceilingKeys[d.PermissionKind()]
			if keys == "" {
				keys = "guard.max_permissions"
			}
			return reason.New(reason.PolicyDenied, "%s (%s)", d.Reason(), keys)
		}
		return reason.New(reason.PolicyDenied, "%s", d.Reason())
	}
	st.merge(d.Verdict, reason.PolicyDenied, d.Reason())
	return nil
}

// stageInspectors runs the inspector chain in order; deny beats prompt beats
// allow; any plugin failure or malformed answer denies.
func stageInspectors(ctx context.Context, st *state) error {
	if len(st.set.inspectors) == 0 {
		return nil
	}
	if st.input == nil {
		st.input = startInputCheck(st.tool.InputSchema, st.req.Input)
	}
	// The host's validation of the input against the input schema, which
	// every inspector gets (sdk/guard/schemacheck).
	check, err := st.input.wait(ctx)
	if err != nil {
		return err
	}
	for _, name := range st.set.inspectors {
		client, err := st.k.Plugins.Guard(ctx, name)
		if err != nil {
			return err
		}
		resp, err := client.Inspect(ctx, &guard.InspectRequest{
			PackageID:       st.pkg.ID,
			Version:         st.pkg.Version,
			Tool:            st.tool.Name,
			ActionTypes:     st.res.Actions,
			Permissions:     guardPermissions(st),
			InputJSON:       st.req.Input,
			InputSchemaJSON: st.tool.InputSchema,
			Env: guard.Env{CI: st.env.CI, Interactive: st.env.Interactive,
				SecretsPresent: st.env.SecretsPresent, Root: st.env.Root},
			TrustLevel:  st.res.Trust,
			SchemaCheck: check,
			Workspace:   st.grantedWorkspacePath(),
		})
		if err != nil {
			return pluginCallError("guard-"+name, err)
		}
		st.res.GuardChain = append(st.res.GuardChain, name+":"+string(resp.Verdict))
		why := name + ": " + strings.Join(resp.Reasons, "; ")
		switch resp.Verdict {
		case guard.VerdictDeny:
			return reason.New(reason.InputDenied, "inspector %s", why)
		case guard.VerdictPrompt:
			st.merge(policy.Prompt, reason.InputDenied, "inspector "+why)
		case guard.VerdictAllow, guard.VerdictAbstain:
		default:
			return reason.New(reason.PluginUnavailable, "inspector %s answered %q", name, resp.Verdict)
		}
	}
	return nil
}

func guardPermissions(st *state) guard.Permissions {
	p := st.pkg.Manifest.Permissions
	return guard.Permissions{
		NetworkLevel:       p.Network.Level,
		AllowedDomains:     p.Network.AllowedDomains,
		FilesystemLevel:    p.Filesystem.Level,
		CodeExecutionLevel: p.CodeExecution.Level,
	}
}

// merge folds a verdict into the running Guard verdict.
func (st *state) merge(v policy.Verdict, code reason.Code, why string) {
	if policy.Stronger(v, st.verdict) != st.verdict || st.denyWhy == "" {
		st.denyCode, st.denyWhy = code, why
	}
	st.verdict = policy.Stronger(v, st.verdict)
}

// stagePrompt turns a prompt verdict into allow or deny: non-interactive →
// deny (policy_prompt); otherwise ask on the TTY, EOF or anything but yes is
// no. The answer goes into the audit record via the guard chain.
func stagePrompt(ctx context.Context, st *state) error {
	if st.verdict != policy.Prompt {
		return nil
	}
	if st.req.DryRun {
		st.res.GuardChain = append(st.res.GuardChain, "prompt:skipped(dry-run)")
		return nil
	}
	if !st.k.Interactive || st.k.Ask == nil {
		return reason.New(reason.PolicyPrompt, "approval required (%s) but agentnode is not interactive", st.denyWhy)
	}
	q := fmt.Sprintf("Allow %s/%s (%s, trust %s, %s)? [y/N] ", st.pkg.ID, st.tool.Name,
		joinActions(st.actions), st.res.Trust, st.denyWhy)
	yes, err := st.k.ask(ctx, q)
	if err != nil {
		return reason.New(reason.PolicyPrompt, "prompt failed: %w", err)
	}
	if !yes {
		st.res.GuardChain = append(st.res.GuardChain, "prompt:no")
		return reason.New(reason.PolicyDenied, "declined at the prompt (%s)", st.denyWhy)
	}
	st.res.GuardChain = append(st.res.GuardChain, "prompt:yes")
	return nil
}

// pluginCallError turns a failed plugin call into plugin_unavailable.
func pluginCallError(name string, err error) error {
	if reason.CodeOf(err) != "" {
		return err
	}
	return pluginhost.CallError(name, err)
}
