package dispatch

import (
	"strings"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/ratelimit"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/validcache"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/trust"
)

// settings is what the pipeline takes from the config, converted once.
type settings struct {
	minTrust            string
	trustKeys           []trust.Key
	trustPlugin         string
	hostTrustPolicy     string
	hostConfinement     string // sandbox.host_confinement
	backend             string
	sandboxRuntime      string            // sandbox.runtime
	runtimeByTrust      map[string]string // sandbox.runtime_by_trust
	image               string
	pythonImage         string // sandbox.python_image ("" = not configured)
	nodeImage           string // sandbox.node_image ("" = not configured)
	limits              sandbox.Limits
	timeout             time.Duration
	guardStrict         bool
	guardGlobal         map[policy.Action]policy.Verdict
	overrides           map[string]policy.Verdict
	actionOverrides     map[string]map[policy.Action]policy.Verdict // guard.tool_overrides in the SDK's object form
	agentPreApproved    map[string][]policy.Action                  // guard.agent_overrides: agent id → pre-approved action types
	rateLimits          map[string]ratelimit.Limit                  // 0 fields: the type's built-in value
	inspectors          []string
	ceiling             policy.Permissions // guard.max_permissions and the SDK's permissions.* deny ("" = no limit)
	ceilingKeys         map[string]string  // permission kind → the config keys that set its ceiling
	promptCeiling       policy.Permissions // the SDK's permissions.* prompt/sandboxed
	lockfileStrict      bool
	agentSandboxEnabled bool
	auditOpts           audit.Options
	// agentLLM and llmProviders are agent_sandbox.llm and llm.providers
	// (agent runs' LLM calls, agent_llm.go).
	agentLLM     config.AgentLLM
	llmProviders map[string]config.Provider
}

// loadSettings loads the config (not_set_up / config_invalid on failure)
// and converts it. AGENTNODE_GUARD_STRICT=1 turns strict mode on.
func loadSettings(path string, environ []string, verdicts *validcache.Cache) (*settings, error) {
	c, err := config.LoadCached(path, verdicts)
	if err != nil {
		return nil, err
	}
	s := &settings{
		minTrust:            c.Trust.MinimumTrustLevel,
		trustPlugin:         c.Trust.Plugin,
		hostTrustPolicy:     c.Sandbox.HostTrustPolicy,
		hostConfinement:     c.Sandbox.HostConfinement,
		backend:             c.Sandbox.Backend,
		sandboxRuntime:      c.Sandbox.Runtime,
		runtimeByTrust:      c.Sandbox.RuntimeByTrust,
		image:               c.Sandbox.Image,
		pythonImage:         c.Sandbox.PythonImage,
		nodeImage:           c.Sandbox.NodeImage,
		timeout:             time.Duration(c.Sandbox.Limits.TimeoutSeconds) * time.Second,
		guardStrict:         c.Guard.Strict || envTrue(environ, "AGENTNODE_GUARD_STRICT"),
		guardGlobal:         map[policy.Action]policy.Verdict{},
		overrides:           map[string]policy.Verdict{},
		actionOverrides:     map[string]map[policy.Action]policy.Verdict{},
		agentPreApproved:    map[string][]policy.Action{},
		rateLimits:          rateLimitsFrom(c.Guard.RateLimits),
		inspectors:          c.Guard.Inspectors,
		ceilingKeys:         c.CeilingSources(),
		lockfileStrict:      c.Lockfile.Strict,
		agentSandboxEnabled: c.AgentSandbox.Enabled,
		agentLLM:            c.AgentSandbox.LLM,
		llmProviders:        c.LLM.Providers,
		auditOpts: audit.Options{
			MaxSizeBytes: c.Audit.MaxSizeMB << 20,
			MaxFiles:     int(c.Audit.MaxFiles),
		},
	}
	for _, k := range c.Trust.Keys {
		s.trustKeys = append(s.trustKeys, trust.Key{ID: k.ID, PublicKey: k.PublicKey})
	}
	// The AgentNode SDK's permissions.* (specs/config.md): deny lowers the
	// ceiling, prompt and sandboxed set the prompt ceiling.
	sdkDeny, sdkPrompt := c.SDKCeilings()
	s.ceiling = policy.Permissions(config.LowerCeiling(c.Guard.MaxPermissions, sdkDeny))
	s.promptCeiling = policy.Permissions(sdkPrompt)
	for action, v := range c.Guard.Policy() {
		verdict, err := policy.ParseVerdict(v)
		if err != nil {
			return nil, reason.New(reason.ConfigInvalid, "%s: guard.%s: %w", path, action, err)
		}
		s.guardGlobal[policy.Action(action)] = verdict
	}
	// The SDK's risk_policies.external_write_capable: prompt or deny is a
	// floor for write_external.
	if floor := c.WriteExternalFloor(); floor != "" {
		a := policy.Action("write_external")
		s.guardGlobal[a] = policy.Stronger(s.guardGlobal[a], policy.Verdict(floor))
	}
	for tool, o := range c.Guard.ToolOverrides {
		if o.Actions == nil {
			verdict, err := policy.ParseVerdict(o.Decision)
			if err != nil {
				return nil, reason.New(reason.ConfigInvalid, "%s: guard.tool_overrides.%s: %w", path, tool, err)
			}
			s.overrides[tool] = verdict
			continue
		}
		// The AgentNode SDK's object form: a verdict per action type. An
		// empty object decides nothing.
		for action, v := range o.Actions {
			if policy.SetOf([]policy.Action{policy.Action(action)}).Invalid() {
				return nil, reason.New(reason.ConfigInvalid, "%s: guard.tool_overrides.%s: %q is not an action type", path, tool, action)
			}
			verdict, err := policy.ParseVerdict(v)
			if err != nil {
				return nil, reason.New(reason.ConfigInvalid, "%s: guard.tool_overrides.%s.%s: %w", path, tool, action, err)
			}
			if s.actionOverrides[tool] == nil {
				s.actionOverrides[tool] = map[policy.Action]policy.Verdict{}
			}
			s.actionOverrides[tool][policy.Action(action)] = verdict
		}
	}
	for agent, o := range c.Guard.AgentOverrides {
		for _, a := range o.PreApprovedActions {
			if policy.SetOf([]policy.Action{policy.Action(a)}).Invalid() {
				return nil, reason.New(reason.ConfigInvalid, "%s: guard.agent_overrides.%s.pre_approved_actions: %q is not an action type", path, agent, a)
			}
			s.agentPreApproved[agent] = append(s.agentPreApproved[agent], policy.Action(a))
		}
	}
	mem, err := c.Sandbox.Limits.MemoryBytes()
	if err != nil {
		return nil, reason.New(reason.ConfigInvalid, "%s: sandbox.limits.memory: %w", path, err)
	}
	tmp, err := c.Sandbox.Limits.TmpSizeBytes()
	if err != nil {
		return nil, reason.New(reason.ConfigInvalid, "%s: sandbox.limits.tmp_size: %w", path, err)
	}
	s.limits = sandbox.Limits{MemoryBytes: mem, Pids: c.Sandbox.Limits.Pids, CPUs: c.Sandbox.Limits.CPUs, TmpBytes: tmp}
	// What the backends' profile refuses is refused here, before the
	// decision: a run is never allowed and then failed for its limits.
	if err := profile.CheckLimits(s.limits); err != nil {
		return nil, reason.New(reason.ConfigInvalid, "%s: sandbox.limits: %w", path, err)
	}
	if s.timeout <= 0 {
		return nil, reason.New(reason.ConfigInvalid, "%s: sandbox.limits.timeout_seconds must be positive", path)
	}
	return s, nil
}

func envTrue(environ []string, key string) bool {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			switch strings.ToLower(v) {
			case "1", "true", "yes":
				return true
			}
		}
	}
	return false
}
