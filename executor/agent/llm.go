package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

// LLMCallTool is the tool name of an agent's LLM calls for Guard: the
// per-tool override key is "AGENT/call_llm".
const LLMCallTool = plan.LLMCallTool

// brokerName names the broker plugin in errors (agentnode-broker-llm).
const brokerName = "broker-llm"

// llmCeiling is one agent run's effective LLM access: the minimum of the
// manifest's llm_access and the host's agent_sandbox.llm, the allowed
// models their intersection.
type llmCeiling struct {
	enabled                                 bool
	why                                     string // why not enabled
	maxCalls, maxInputChars, maxOutputChars int64
	// models are the allowed models; nil means any.
	models []string
}

func llmCeilingFor(host config.AgentLLM, pkg *store.Package) llmCeiling {
	m := pkg.Manifest.LLMAccess
	if m == nil && agentExtrasOf(pkg.Manifest).llmRequired {
		// AgentNode's way of asking for a model (agent.llm.required, or
		// tier llm_only): LLM access without ceilings of the manifest's own.
		m = &manifest.LLMAccess{Enabled: true}
	}
	c := llmCeiling{maxCalls: host.MaxCalls, maxInputChars: host.MaxInputChars, maxOutputChars: host.MaxOutputChars}
	switch {
	case m == nil || !m.Enabled:
		c.why = fmt.Sprintf("agent %s does not ask for LLM access (llm_access.enabled is not true, and agent.llm.required is not set)", pkg.ID)
		return c
	case !host.Enabled:
		c.why = "LLM calls of agents are off on this host (agent_sandbox.llm.enabled is false)"
		return c
	}
	c.enabled = true
	lower := func(v *int, cur int64) int64 {
		if v != nil && int64(*v) < cur {
			return int64(*v)
		}
		return cur
	}
	c.maxCalls = lower(m.MaxCalls, c.maxCalls)
	c.maxInputChars = lower(m.MaxInputChars, c.maxInputChars)
	c.maxOutputChars = lower(m.MaxOutputChars, c.maxOutputChars)
	switch {
	case len(host.AllowedModels) == 0 && len(m.AllowedModels) == 0:
	case len(host.AllowedModels) == 0:
		c.models = slices.Clone(m.AllowedModels)
	case len(m.AllowedModels) == 0:
		c.models = slices.Clone(host.AllowedModels)
	default:
		c.models = []string{}
		for _, x := range m.AllowedModels {
			if slices.Contains(host.AllowedModels, x) {
				c.models = append(c.models, x)
			}
		}
	}
	return c
}

// callLLM answers a call_llm request: the run's LLM access and budget, the
// provider, model and input size, Guard (credential_use), an audit record
// (event llm_call, durable before the credential is used), the broker
// plugin, and a second record with the usage (event llm_usage). Records
// never hold messages, replies or credentials.
func (s *agentSession) callLLM(ctx context.Context, msg *agentMsg) agentReply {
	c := &s.lim.llm
	if !c.enabled {
		return s.refuseLLM(msg, reason.PolicyDenied, c.why, nil)
	}
	if s.llmCalls >= c.maxCalls {
		return s.refuseLLM(msg, reason.RateLimited, fmt.Sprintf("agent %s used its %d LLM calls (max_calls: the lower of llm_access.max_calls and agent_sandbox.llm.max_calls)",
			s.p.Package.ID, c.maxCalls), nil)
	}
	ep, err := s.provider(msg.Provider)
	if err != nil {
		return s.refuseLLM(msg, reason.PolicyDenied, err.Error(), nil)
	}
	if c.models != nil && !slices.Contains(c.models, msg.Model) {
		why := fmt.Sprintf("model %q is not allowed for agent %s (allowed: %s)", msg.Model, s.p.Package.ID, strings.Join(c.models, ", "))
		if len(c.models) == 0 {
			why = fmt.Sprintf("no model is allowed for agent %s: llm_access.allowed_models and agent_sandbox.llm.allowed_models have none in common", s.p.Package.ID)
		}
		return s.refuseLLM(msg, reason.PolicyDenied, why, nil)
	}
	var inChars int64
	msgs := make([]broker.Message, len(msg.Messages))
	for i, m := range msg.Messages {
		switch m.Role {
		case broker.RoleSystem, broker.RoleUser, broker.RoleAssistant:
		default:
			return s.refuseLLM(msg, reason.InputDenied, fmt.Sprintf("messages[%d].role: %q is not system, user or assistant", i, m.Role), nil)
		}
		inChars += int64(utf8.RuneCountInString(m.Content))
		msgs[i] = broker.Message{Role: m.Role, Content: m.Content}
	}
	if inChars > c.maxInputChars {
		return s.refuseLLM(msg, reason.InputDenied, fmt.Sprintf("the messages have %d characters, max_input_chars is %d", inChars, c.maxInputChars), nil)
	}
	if c.maxOutputChars <= 0 {
		return s.refuseLLM(msg, reason.PolicyDenied, "max_output_chars is 0: no reply could be returned", nil)
	}

	d := s.p.Services.DecideLLM()
	chain := []string{"policy:" + string(d.Verdict)}
	switch d.Verdict {
	case policy.Deny:
		return s.refuseLLM(msg, reason.PolicyDenied, d.Reason(), chain)
	case policy.Prompt:
		yes, code, why := s.askLLM(ctx, ep.Name, d.Reason())
		if !yes {
			return s.refuseLLM(msg, code, why, append(chain, "prompt:no"))
		}
		chain = append(chain, "prompt:yes")
	}

	s.llmCalls++
	rec := s.record("llm_call", LLMCallTool)
	rec.Action = string(policy.CredentialUse)
	rec.Decision, rec.GuardChain = string(policy.Allow), chain
	rec.Reason = truncate(fmt.Sprintf("provider %s, model %s, call %d of %d, %d input chars", ep.Name, msg.Model, s.llmCalls, c.maxCalls, inChars), 512)
	if err := s.append(rec); err != nil {
		return agentReply{Code: string(reason.AuditUnavailable), Error: "the agent's audit record could not be written"}
	}

	start := time.Now()
	resp, err := s.chat(ctx, &broker.ChatRequest{
		Provider:       ep.Name,
		API:            ep.API,
		BaseURL:        ep.BaseURL,
		Model:          msg.Model,
		Messages:       msgs,
		MaxInputChars:  c.maxInputChars,
		MaxOutputChars: c.maxOutputChars,
		AllowedModels:  c.models,
	})
	ms := time.Since(start).Milliseconds()
	use := s.record("llm_usage", LLMCallTool)
	use.Action = string(policy.CredentialUse)
	use.Decision, use.GuardChain, use.DurationMS = string(policy.Allow), chain, &ms
	if err != nil {
		use.Code = string(reason.CodeOf(err))
		use.Reason = truncate(fmt.Sprintf("provider %s, model %s: %v", ep.Name, msg.Model, err), 512)
	} else {
		u := resp.Usage
		use.Reason = fmt.Sprintf("provider %s, model %s: %d input chars, %d output chars, %d input tokens, %d output tokens",
			ep.Name, msg.Model, u.InputChars, u.OutputChars, u.InputTokens, u.OutputTokens)
	}
	if aerr := s.append(use); aerr != nil {
		return agentReply{Code: string(reason.AuditUnavailable), Error: "the agent's audit record could not be written"}
	}
	if err != nil {
		return agentReply{Code: string(reason.CodeOf(err)), Error: err.Error()}
	}
	out, err := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{resp.Message.Role, resp.Message.Content})
	if err != nil {
		return agentReply{Code: string(reason.PluginUnavailable), Error: "encode the reply: " + err.Error()}
	}
	return agentReply{OK: true, Result: out}
}

// askLLM asks the user once per run whether the agent may use the
// provider's credential; non-interactive runs refuse (policy_prompt).
func (s *agentSession) askLLM(ctx context.Context, providerName, why string) (bool, reason.Code, string) {
	if s.llmAnswer == nil {
		q := fmt.Sprintf("Allow agent %s to make LLM calls with the credential of %s for this run (%s)? [y/N] ",
			s.p.Package.ID, providerName, why)
		yes, asked, err := s.p.Services.Ask(ctx, q)
		if !asked {
			return false, reason.PolicyPrompt, fmt.Sprintf("approval required (%s) but agentnode is not interactive", why)
		}
		if err != nil {
			return false, reason.PolicyPrompt, "prompt failed: " + err.Error()
		}
		s.llmAnswer = &yes
	}
	if !*s.llmAnswer {
		return false, reason.PolicyDenied, fmt.Sprintf("declined at the prompt (%s)", why)
	}
	return true, "", ""
}

// refuseLLM audits and answers a refused call_llm (one llm_call record
// with decision deny).
func (s *agentSession) refuseLLM(msg *agentMsg, code reason.Code, why string, chain []string) agentReply {
	rec := s.record("llm_call", LLMCallTool)
	rec.Action = string(policy.CredentialUse)
	rec.Decision, rec.Code, rec.GuardChain = string(policy.Deny), string(code), chain
	rec.Reason = truncate(fmt.Sprintf("call_llm (model %q): %s", msg.Model, why), 512)
	if err := s.append(rec); err != nil {
		return agentReply{Code: string(reason.AuditUnavailable), Error: "the agent's audit record could not be written"}
	}
	return s.refuse(code, why)
}

// provider resolves the provider an agent names: an llm.providers entry or
// a well-known provider (openai, anthropic). Without a name, the only
// llm.providers entry.
func (s *agentSession) provider(name string) (provider.Endpoint, error) {
	ps := s.p.Agent.Providers
	if name == "" {
		if len(ps) != 1 {
			names := make([]string, 0, len(ps))
			for n := range ps {
				names = append(names, n)
			}
			sort.Strings(names)
			return provider.Endpoint{}, fmt.Errorf("call_llm names no provider and llm.providers has %d entries (%s): name one",
				len(ps), strings.Join(names, ", "))
		}
		for n := range ps {
			name = n
		}
	}
	if p, ok := ps[name]; ok {
		return provider.Resolve(name, p.API, p.BaseURL)
	}
	if slices.Contains(provider.WellKnown, name) {
		return provider.Resolve(name, "", "")
	}
	if !provider.ValidName(name) {
		return provider.Endpoint{}, fmt.Errorf("provider: not a valid provider name (want %s)", provider.NamePattern)
	}
	return provider.Endpoint{}, fmt.Errorf("provider %q is not configured (llm.providers) and not a well-known provider", name)
}

// chat calls the broker plugin and maps its errors to reason codes. The
// broker's errors never carry the credential or the provider's text.
func (s *agentSession) chat(ctx context.Context, req *broker.ChatRequest) (*broker.ChatResponse, error) {
	client, err := s.p.Services.Broker(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := client.Chat(ctx, req)
	if err == nil {
		return resp, nil
	}
	var code reason.Code
	switch {
	case errors.Is(err, broker.ErrCredentialsMissing), errors.Is(err, broker.ErrCredentialsRejected):
		code = reason.CredentialsMissing
	case errors.Is(err, broker.ErrModelNotAllowed), errors.Is(err, broker.ErrOutputTooLong):
		code = reason.PolicyDenied
	case errors.Is(err, broker.ErrInputTooLong), errors.Is(err, broker.ErrInvalidRequest):
		code = reason.InputDenied
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		code = reason.Timeout
	default:
		return nil, pluginhost.CallError(brokerName, err)
	}
	return nil, reason.Wrap(code, err, brokerName)
}
