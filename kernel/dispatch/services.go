package dispatch

import (
	"context"
	"encoding/json"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/broker"
)

// brokerPlugin is the LLM broker plugin agents' calls go through
// (agentnode-broker-llm).
const brokerPlugin = "llm"

// LLMCallTool is the tool name of an agent's LLM calls for Guard: the
// per-tool override key is "AGENT/call_llm".
const LLMCallTool = plan.LLMCallTool

// services is the kernel's side of a run whose executor makes requests of
// its own (plan.Services: an agent's tool and LLM calls). It reads the
// run's state while the execute stage runs, which nothing else writes
// then (runStage waits for a stage before anything reads its state).
type services struct{ st *state }

var _ plan.Services = (*services)(nil)

func (s *services) Record(event, verb string) *audit.Record {
	r := s.st.k.baseRecord(s.st, event)
	r.Tool = verb
	r.GuardChain = nil
	r.Action = ""
	return r
}

func (s *services) Append(r *audit.Record) error { return s.st.log.Append(r) }

// RunTool is a full nested pipeline run (*Kernel).Run of its own, with its
// own decision and outcome records, trust, placement and Guard; the
// calling agent's guard.agent_overrides entry pre-approves action types
// there.
func (s *services) RunTool(ctx context.Context, pkg, tool string, input json.RawMessage) (*plan.ToolResult, error) {
	res, err := nestedRun(s.st.k, ctx, &Request{Package: pkg, Tool: tool, Input: input, Workspace: s.st.req.Workspace, viaAgent: s.st.pkg.ID})
	return &plan.ToolResult{RequestID: res.RequestID, Decision: res.Decision, Code: res.Code, OK: res.OK,
		Output: res.Output, Error: res.Error}, err
}

// nestedRun is (*Kernel).Run, set in init: a direct reference would make
// executeStage's initialisation depend on itself.
var nestedRun func(k *Kernel, ctx context.Context, req *Request) (*Result, error)

func init() { nestedRun = (*Kernel).Run }

func (s *services) Installed(id string) (*store.Package, error) { return s.st.k.store().Get(id) }

func (s *services) DecideLLM() policy.Decision { return llmDecision(s.st) }

func (s *services) Ask(ctx context.Context, q string) (bool, bool, error) {
	k := s.st.k
	if !k.Interactive || k.Ask == nil {
		return false, false, nil
	}
	yes, err := k.ask(ctx, q)
	return yes, true, err
}

func (s *services) Broker(ctx context.Context) (*broker.Client, error) {
	if s.st.k.Plugins == nil {
		return nil, reason.New(reason.PluginUnavailable, "no plugin host: the LLM broker cannot be started")
	}
	return s.st.k.Plugins.Broker(ctx, brokerPlugin)
}

func (s *services) PrestartBroker() { s.st.k.prestartPlugins("", nil, "", brokerPlugin) }

// llmDecision applies Guard's policy engine to an agent's LLM call: the
// action is credential_use, pre-approved by the run's opt-in (the host's
// agent_sandbox.enabled and agent_sandbox.llm.enabled together with the
// manifest's llm_access.enabled; callLLM checks those first). A
// pre-approval lifts the global policy's prompt, never a deny, and strict
// mode ignores it; the per-tool override "AGENT/call_llm" applies, and the
// environment escalation (root, high risk band) can still turn the allow
// into a prompt.
func llmDecision(st *state) policy.Decision {
	return policy.Decide(policy.Input{
		Package:         st.pkg.ID,
		Tool:            LLMCallTool,
		Actions:         []policy.Action{policy.CredentialUse},
		TrustLevel:      st.res.Trust,
		Env:             st.env,
		Strict:          st.set.guardStrict,
		Global:          st.set.guardGlobal,
		Overrides:       st.set.overrides,
		ActionOverrides: st.set.actionOverrides,
		PreApproved:     []policy.Action{policy.CredentialUse},
	})
}
