package plan

import (
	"context"
	"encoding/json"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/broker"
)

// LLMCallTool is the tool name of an agent's LLM calls for Guard and the
// audit: the per-tool override key is "AGENT/call_llm".
const LLMCallTool = "call_llm"

// Services is what an executor may ask of the kernel while it runs a plan
// that makes requests of its own (an agent's tool and LLM calls): the
// run's audit log, nested pipeline runs, Guard's decision, the user, the
// LLM broker and what a sealed egress proxy's audit is opened with. The
// kernel keeps every decision; every record is written through its audit
// log (kernel/audit). The executor holds only this handle.
type Services interface {
	// Record is an audit record of the run (its request id, package,
	// version, trust, placement, backend and environment) for event, with
	// verb as its tool; Append writes a record durably (an error: it is
	// not on record).
	Record(event, verb string) *audit.Record
	Append(r *audit.Record) error
	// RunTool runs a tool call the plan's package made through the whole
	// pipeline, with its own decision and outcome records; the package's
	// guard.agent_overrides entry pre-approves action types there.
	RunTool(ctx context.Context, pkg, tool string, input json.RawMessage) (*ToolResult, error)
	// Installed reads an installed package's metadata and manifest (not
	// verified: a nested run verifies what it runs).
	Installed(id string) (*store.Package, error)
	// DecideLLM is Guard's decision on an LLM call of the plan's package:
	// credential_use, pre-approved by the run's opt-in.
	DecideLLM() policy.Decision
	// Ask asks the user a yes/no question until ctx ends; asked is false
	// when nobody can be asked (not interactive). The question is passed
	// as given: the front end's asker escapes it for the terminal.
	Ask(ctx context.Context, question string) (yes, asked bool, err error)
	// Broker is the LLM broker plugin (a coded error when it cannot be
	// had); PrestartBroker starts it ahead of its first call.
	Broker(ctx context.Context) (*broker.Client, error)
	PrestartBroker()
	// EgressAudit is what the audit of a sealed egress proxy for the
	// plan's package is opened with (executor/egress.OpenAudit): the
	// audit log and its options, and the records' fixed part (the run's
	// request id, package, version, trust, placement, backend and
	// environment), taken now. Refused (egress_denied) unless the plan
	// is placed in the sandbox.
	EgressAudit() (*EgressAudit, error)
}

// EgressAudit is what the audit of one sealed egress proxy is opened with
// (specs/egress.md): its own handle of the audit log in AuditDir with
// Audit's options (the anchor included), and Base, the fixed part of each
// record (request id — a fresh one when empty —, package, version,
// trust, placement, backend, env).
type EgressAudit struct {
	AuditDir string
	Audit    audit.Options
	Base     audit.Record
}

// ToolResult is what a nested run (Services.RunTool) tells its caller.
type ToolResult struct {
	RequestID string
	Decision  string
	Code      string
	OK        *bool
	Output    json.RawMessage
	Error     string
}

// AgentSettings are the host's settings an agent run needs
// (agent_sandbox.*, llm.providers).
type AgentSettings struct {
	SandboxEnabled bool
	LLM            config.AgentLLM
	Providers      map[string]config.Provider
}
