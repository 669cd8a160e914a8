package main

import (
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/ratelimit"
)

// GuardPolicy is Guard's effective policy under the current config and
// environment: what `agentnode guard policy` prints. It is built from the
// same settings the pipeline uses.
type GuardPolicy struct {
	// Strict is true when strict mode is on; StrictSource says why
	// ("AGENTNODE_GUARD_STRICT" when the variable is set, else
	// "guard.strict").
	Strict       bool   `json:"strict"`
	StrictSource string `json:"strict_source,omitempty"`
	// Interactive is false when every prompt becomes a deny
	// (policy_prompt).
	Interactive bool `json:"interactive"`
	// Actions is the global verdict per action type, before risk and
	// environment escalation.
	Actions []ActionPolicy `json:"actions"`
	// RiskBands are the bands of the risk score and what each does.
	RiskBands []RiskBand `json:"risk_bands"`
	// ToolOverrides is guard.tool_overrides ("PKG/TOOL" → verdict);
	// OverridesApply is false in strict mode, which ignores them.
	ToolOverrides  map[string]string `json:"tool_overrides"`
	OverridesApply bool              `json:"tool_overrides_apply"`
	// ToolActionOverrides are the guard.tool_overrides entries in the
	// AgentNode SDK's object form ("PKG/TOOL" → action type → verdict);
	// the tool's other action types follow the policy.
	ToolActionOverrides map[string]map[string]string `json:"tool_action_overrides,omitempty"`
	// AgentPreApproved is guard.agent_overrides: agent → the action types
	// pre-approved for the tool calls it makes (not applied in strict
	// mode).
	AgentPreApproved map[string][]string `json:"agent_pre_approved,omitempty"`
	// RateLimits are the effective limits (strict caps applied).
	RateLimits RateLimits `json:"rate_limits"`
	// Inspectors is the inspector chain, in order (deny wins).
	Inspectors []string `json:"inspectors"`
	// MaxPermissions is the permission ceiling (guard.max_permissions,
	// lowered by the AgentNode SDK's permissions.* deny).
	MaxPermissions MaxPermissions `json:"max_permissions"`
	// PromptPermissions are the highest levels that run without asking
	// (the AgentNode SDK's permissions.* prompt and sandboxed); above them
	// an allow becomes prompt.
	PromptPermissions MaxPermissions `json:"prompt_permissions"`
}

// MaxPermissions is the highest permission level a package may declare, per
// kind; an empty (omitted) field is no limit for that kind.
type MaxPermissions struct {
	Network       string `json:"network,omitempty"`
	Filesystem    string `json:"filesystem,omitempty"`
	CodeExecution string `json:"code_execution,omitempty"`
}

// ActionPolicy is the verdict for one action type. Source is "default"
// (AgentNode's default policy), "config" (guard.<action> differs from the
// default) or "strict" (the strict table; the config is ignored).
type ActionPolicy struct {
	Action  string `json:"action"`
	Verdict string `json:"verdict"`
	Source  string `json:"source"`
}

// RiskBand is one band of the risk score: MinScore and up.
type RiskBand struct {
	Band     string `json:"band"`
	MinScore int    `json:"min_score"`
	Effect   string `json:"effect"`
}

// RateLimits are the per-package limits: the built-in limit per package
// type, and the packages listed in guard.rate_limits.
type RateLimits struct {
	Defaults map[string]ratelimit.Limit `json:"defaults"`
	Packages map[string]ratelimit.Limit `json:"packages"`
	// StateFile is where the windows are kept.
	StateFile string `json:"state_file"`
}

// guardPolicy is the effective Guard policy of k's config and
// environment, built from the settings the pipeline decides with
// (dispatch.Kernel.GuardSettings). It runs and records nothing.
func guardPolicy(k *dispatch.Kernel) (*GuardPolicy, error) {
	set, err := k.GuardSettings()
	if err != nil {
		return nil, err
	}
	p := &GuardPolicy{
		Strict:         set.Strict,
		Interactive:    k.Interactive,
		ToolOverrides:  map[string]string{},
		OverridesApply: !set.Strict,
		Inspectors:     set.Inspectors,
		MaxPermissions: MaxPermissions{
			Network:       set.Ceiling.Network,
			Filesystem:    set.Ceiling.Filesystem,
			CodeExecution: set.Ceiling.CodeExecution,
		},
		PromptPermissions: MaxPermissions{
			Network:       set.PromptCeiling.Network,
			Filesystem:    set.PromptCeiling.Filesystem,
			CodeExecution: set.PromptCeiling.CodeExecution,
		},
		RiskBands: []RiskBand{
			{string(policy.Critical), policy.CriticalScore, "deny; nothing lifts it"},
			{string(policy.High), policy.HighScore, "an allow for a high-risk action (delete, write_external, execute, credential_use) becomes prompt"},
			{string(policy.Medium), policy.MediumScore, "the policy decides"},
			{string(policy.Low), 0, "the policy decides"},
		},
		RateLimits: RateLimits{
			Defaults: map[string]ratelimit.Limit{
				"toolpack": ratelimit.Resolve("toolpack", nil, set.Strict),
				"agent":    ratelimit.Resolve("agent", nil, set.Strict),
			},
			Packages:  map[string]ratelimit.Limit{},
			StateFile: home.RateLimitPath(k.HomeDir),
		},
	}
	switch {
	case set.StrictFromEnv:
		p.StrictSource = "AGENTNODE_GUARD_STRICT"
	case set.Strict:
		p.StrictSource = "guard.strict"
	}
	for _, a := range policy.Actions {
		ap := ActionPolicy{Action: string(a)}
		switch {
		case set.Strict:
			ap.Verdict, ap.Source = string(policy.StrictPolicy[a]), "strict"
		default:
			v, ok := set.Global[a]
			if !ok {
				v = policy.DefaultPolicy[a]
			}
			ap.Verdict, ap.Source = string(v), "default"
			if v != policy.DefaultPolicy[a] {
				ap.Source = "config"
			}
		}
		p.Actions = append(p.Actions, ap)
	}
	for tool, v := range set.ToolOverrides {
		p.ToolOverrides[tool] = string(v)
	}
	for tool, m := range set.ToolActionOverrides {
		if p.ToolActionOverrides == nil {
			p.ToolActionOverrides = map[string]map[string]string{}
		}
		p.ToolActionOverrides[tool] = map[string]string{}
		for a, v := range m {
			p.ToolActionOverrides[tool][string(a)] = string(v)
		}
	}
	for agent, as := range set.AgentPreApproved {
		if p.AgentPreApproved == nil {
			p.AgentPreApproved = map[string][]string{}
		}
		for _, a := range policy.SetOf(as).List() {
			p.AgentPreApproved[agent] = append(p.AgentPreApproved[agent], string(a))
		}
	}
	for _, pkg := range set.RateLimited {
		// The package type is not known without the package: shown as a
		// toolpack's (an entry's absent values are its type's built-in
		// ones). The entry "default" sets the defaults of both types.
		if pkg == config.DefaultRateLimit {
			for _, typ := range []string{"toolpack", "agent"} {
				p.RateLimits.Defaults[typ] = set.RateLimit(pkg, typ)
			}
			continue
		}
		p.RateLimits.Packages[pkg] = set.RateLimit(pkg, "toolpack")
	}
	return p, nil
}
