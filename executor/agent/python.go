package agent

import (
	"encoding/json"
	"path"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
)

// The defaults of AgentNode's SDK (run_agent) for what an agent section
// does not say.
const (
	sdkMaxIterations           = 12
	sdkStopOnConsecutiveErrors = 3
	sdkMaxRetries              = 2
	sdkBackoffBase             = 1.0
	sdkBackoffMax              = 10.0
)

// agentExtras are the keys of the ANP agent section that only the agent
// itself uses (through the Python agent shim's context) or that ask for
// LLM access in AgentNode's words. The manifest keeps them unchecked, so
// each is read on its own: one of the wrong type is as if absent.
type agentExtras struct {
	goal, systemPrompt string
	// llmRequired is agent.llm.required, or agent.tier llm_only: the SDK
	// binds an LLM for such an agent (run_agent's needs_llm).
	llmRequired             bool
	stopOnConsecutiveErrors int
	retry                   python.AgentRetry
}

func agentExtrasOf(m *manifest.Manifest) agentExtras {
	x := agentExtras{
		stopOnConsecutiveErrors: sdkStopOnConsecutiveErrors,
		retry:                   python.AgentRetry{Enabled: true, MaxRetries: sdkMaxRetries, BackoffBase: sdkBackoffBase, BackoffMax: sdkBackoffMax},
	}
	var sec map[string]json.RawMessage
	if json.Unmarshal(m.Agent, &sec) != nil {
		return x
	}
	get := func(key string, v any) bool { return sec[key] != nil && json.Unmarshal(sec[key], v) == nil }
	get("goal", &x.goal)
	get("system_prompt", &x.systemPrompt)
	var tier string
	var llm struct {
		Required bool `json:"required"`
	}
	get("tier", &tier)
	get("llm", &llm)
	x.llmRequired = llm.Required || tier == "llm_only"
	var term struct {
		StopOnConsecutiveErrors *int `json:"stop_on_consecutive_errors"`
	}
	if get("termination", &term) && term.StopOnConsecutiveErrors != nil {
		x.stopOnConsecutiveErrors = *term.StopOnConsecutiveErrors
	}
	var eh struct {
		Retry struct {
			Enabled     *bool    `json:"enabled"`
			MaxRetries  *int     `json:"max_retries"`
			BackoffBase *float64 `json:"backoff_base"`
			BackoffMax  *float64 `json:"backoff_max"`
		} `json:"retry"`
	}
	if get("error_handling", &eh) {
		r := eh.Retry
		if r.Enabled != nil {
			x.retry.Enabled = *r.Enabled
		}
		if r.MaxRetries != nil {
			x.retry.MaxRetries = *r.MaxRetries
		}
		if r.BackoffBase != nil {
			x.retry.BackoffBase = *r.BackoffBase
		}
		if r.BackoffMax != nil {
			x.retry.BackoffMax = *r.BackoffMax
		}
	}
	return x
}

// agentArgs is the agent's argv in the container, whose package is at
// /pack: the exec entrypoint, or for `runtime: python` the image's python3
// with the agent shim, the entrypoint and the context it gives the agent
// (the manifest's goal, prompt and termination settings, and this run's
// effective limits).
func agentArgs(p *plan.Plan, lim agentLimits) ([]string, error) {
	m := p.Package.Manifest
	if m.Runtime != manifest.RuntimePython {
		return []string{path.Join("/pack", m.AgentEntrypoint)}, nil
	}
	x := agentExtrasOf(m)
	ctx := &python.AgentContext{
		Agent:                   m.PackageID,
		RunID:                   p.RequestID,
		Goal:                    x.goal,
		SystemPrompt:            x.systemPrompt,
		AllowedPackages:         append([]string{}, lim.allowedPackages...),
		MaxToolCalls:            lim.maxToolCalls,
		MaxIterations:           sdkMaxIterations,
		StopOnConsecutiveErrors: x.stopOnConsecutiveErrors,
		Retry:                   x.retry,
	}
	if m.Limits != nil && m.Limits.MaxIterations != nil {
		ctx.MaxIterations = *m.Limits.MaxIterations
	}
	if lim.llm.enabled {
		ctx.LLM = python.AgentLLM{Enabled: true, MaxCalls: lim.llm.maxCalls}
		// The model the context's calls name: the first allowed one. With
		// no list on either side there is none, and the agent's call_llm
		// says so (it cannot pick a model for the user).
		if len(lim.llm.models) > 0 {
			ctx.LLM.Model = lim.llm.models[0]
		}
	}
	argv, err := python.AgentCommand(python.Interpreter, python.AgentShimPath, "/pack", m.AgentEntrypoint, ctx)
	if err != nil {
		return nil, reason.New(reason.PolicyDenied, "agent %s: %w", m.PackageID, err)
	}
	return argv, nil
}
