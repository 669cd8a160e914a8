package dispatch

import (
	"strings"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/ratelimit"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/verdict"
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
	image               string
	pythonImage         string // sandbox.python_image ("" = not configured)
	limits              sandbox.Limits
	timeout             time.Duration
	guardStrict         bool
	guardGlobal         map[policy.Action]policy.Verdict
	overrides           map[string]policy.Verdict
	rateLimits          map[string]ratelimit.Limit
	inspectors          []string
	ceiling             policy.Permissions // guard.max_permissions ("" = no limit)
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
func loadSettings(path string, environ []string, verdicts *verdict.Cache) (*settings, error) {
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
		image:               c.Sandbox.Image,
		pythonImage:         c.Sandbox.PythonImage,
		timeout:             time.Duration(c.Sandbox.Limits.TimeoutSeconds) * time.Second,
		guardStrict:         c.Guard.Strict || envTrue(environ, "AGENTNODE_GUARD_STRICT"),
		guardGlobal:         map[policy.Action]policy.Verdict{},
		overrides:           map[string]policy.Verdict{},
		rateLimits:          rateLimitsFrom(c.Guard.RateLimits),
		inspectors:          c.Guard.Inspectors,
		ceiling:             policy.Permissions(c.Guard.MaxPermissions),
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
	for action, v := range c.Guard.Policy() {
		verdict, err := policy.ParseVerdict(v)
		if err != nil {
			return nil, reason.New(reason.ConfigInvalid, "%s: guard.%s: %w", path, action, err)
		}
		s.guardGlobal[policy.Action(action)] = verdict
	}
	for tool, v := range c.Guard.ToolOverrides {
		verdict, err := policy.ParseVerdict(v)
		if err != nil {
			return nil, reason.New(reason.ConfigInvalid, "%s: guard.tool_overrides.%s: %w", path, tool, err)
		}
		s.overrides[tool] = verdict
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
