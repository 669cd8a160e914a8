package python

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// AgentShim is the source of agentnode_agent.py, the program through which
// a `runtime: python` agent runs in the agent sandbox: it speaks the agent
// protocol (specs/agent.md) and calls the agent's entrypoint as
// func(context, **kwargs) with a context that has the interface of
// AgentNode's AgentContext. It loads agentnode_tool.py from its own
// directory (the import, path and encoding rules are the tool shim's).
//
//go:embed agentnode_agent.py
var AgentShim []byte

// AgentShimPath is where the Python runtime image holds the agent shim,
// beside the tool shim.
const AgentShimPath = "/usr/lib/agentnode/agentnode_agent.py"

// AgentContext is what the host tells the agent shim (its CONTEXT_JSON
// argument): the agent's manifest settings and the run's effective
// limits. The host enforces the limits again on every request; the shim
// uses them to answer as AgentNode's SDK does (PermissionError,
// AgentLimitExceeded) before it sends what the host would refuse.
type AgentContext struct {
	Agent           string   `json:"agent"`
	RunID           string   `json:"run_id"`
	Goal            string   `json:"goal"`
	SystemPrompt    string   `json:"system_prompt,omitempty"`
	AllowedPackages []string `json:"allowed_packages"`
	MaxToolCalls    int      `json:"max_tool_calls"`
	MaxIterations   int      `json:"max_iterations"`
	// StopOnConsecutiveErrors is termination.stop_on_consecutive_errors.
	StopOnConsecutiveErrors int        `json:"stop_on_consecutive_errors"`
	Retry                   AgentRetry `json:"retry"`
	LLM                     AgentLLM   `json:"llm"`
}

// AgentRetry is error_handling.retry of the agent section (the SDK's
// transparent retry of failed tool calls).
type AgentRetry struct {
	Enabled     bool    `json:"enabled"`
	MaxRetries  int     `json:"max_retries"`
	BackoffBase float64 `json:"backoff_base"`
	BackoffMax  float64 `json:"backoff_max"`
}

// AgentLLM is the run's LLM access: whether call_llm may be used at all,
// the provider and model the shim names (empty provider: the host's only
// one), and the call budget.
type AgentLLM struct {
	Enabled  bool   `json:"enabled"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	MaxCalls int64  `json:"max_calls"`
}

// MaxAgentContext bounds the CONTEXT_JSON argument (Linux refuses one
// argument above 128 KiB).
const MaxAgentContext = 96 << 10

// AgentCommand is the argv that runs the agent whose entrypoint is
// entrypoint ("module.path:function") in the package at packDir, with
// interpreter python and the agent shim at shim; -I -S -B as for tools
// (Command).
func AgentCommand(python, shim, packDir, entrypoint string, ctx *AgentContext) ([]string, error) {
	b, err := json.Marshal(ctx)
	if err != nil {
		return nil, fmt.Errorf("encode the agent context: %w", err)
	}
	if len(b) > MaxAgentContext {
		return nil, fmt.Errorf("the agent context is %d bytes (goal and system_prompt), more than %d", len(b), MaxAgentContext)
	}
	return []string{python, "-I", "-S", "-B", shim, packDir, entrypoint, string(b)}, nil
}
