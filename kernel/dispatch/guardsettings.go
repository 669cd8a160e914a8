package dispatch

import (
	"maps"
	"slices"

	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/ratelimit"
)

// GuardSettings are the Guard settings a run decides with, as the config
// stage loads them from the config and the environment (loadSettings):
// what `agentnode guard policy` (cmd/agentnode) reports, so that report
// shows exactly what the decision uses. Callers must not change the maps.
type GuardSettings struct {
	// Strict is strict mode; StrictFromEnv is true when
	// AGENTNODE_GUARD_STRICT turns it on.
	Strict, StrictFromEnv bool
	// Global is guard.<action> as set in the config (the strict table and
	// AgentNode's default policy are in kernel/policy).
	Global map[policy.Action]policy.Verdict
	// ToolOverrides and ToolActionOverrides are guard.tool_overrides in
	// both forms; AgentPreApproved is guard.agent_overrides.
	ToolOverrides       map[string]policy.Verdict
	ToolActionOverrides map[string]map[policy.Action]policy.Verdict
	AgentPreApproved    map[string][]policy.Action
	// RateLimited are the packages listed in guard.rate_limits, sorted.
	RateLimited []string
	// Inspectors is the inspector chain, in order.
	Inspectors []string
	// Ceiling and PromptCeiling are the permission ceiling and the levels
	// that run without asking ("" = no limit).
	Ceiling, PromptCeiling policy.Permissions

	set *settings
}

// RateLimit is the limit a package of the given ID and type runs under
// (the rate-limit stage's effectiveRateLimit).
func (g *GuardSettings) RateLimit(pkgID, pkgType string) ratelimit.Limit {
	return effectiveRateLimit(g.set, pkgID, pkgType)
}

// GuardSettings loads the config (not_set_up / config_invalid like a run)
// and returns its Guard settings. It runs and records nothing.
func (k *Kernel) GuardSettings() (*GuardSettings, error) {
	set, err := loadSettings(k.configPath(), k.Environ, k.verdicts())
	if err != nil {
		return nil, err
	}
	return &GuardSettings{
		Strict:              set.guardStrict,
		StrictFromEnv:       set.guardStrict && envTrue(k.Environ, "AGENTNODE_GUARD_STRICT"),
		Global:              set.guardGlobal,
		ToolOverrides:       set.overrides,
		ToolActionOverrides: set.actionOverrides,
		AgentPreApproved:    set.agentPreApproved,
		RateLimited:         slices.Sorted(maps.Keys(set.rateLimits)),
		Inspectors:          slices.Clone(set.inspectors),
		Ceiling:             set.ceiling,
		PromptCeiling:       set.promptCeiling,
		set:                 set,
	}, nil
}
