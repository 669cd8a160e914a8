// Package plan is the contract between the decision and the execution of a
// tool call. kernel/dispatch runs the decision stages and, only once the
// decision record is durable, hands an executor a Plan: what was decided
// (the package, the tool, the input, where it runs: the placement, the
// sandbox backend and image it checked; the limits) and nothing it could
// use to change the decision. The executor builds the backend of that
// placement and runs the plan on it (executor/backend: the contract
// between an executor and a backend is the executors' own) and fills an
// Outcome; the kernel writes the outcome record.
//
// It belongs in the trusted core because it is the kernel's side of that
// boundary: the kernel imports this package and never an executor, and the
// executors (executor/…) import it and never kernel/dispatch.
// cmd/agentnode wires executors into the kernel (Registry), with Host: what
// the placement stage asks the host backend before it decides.
//
// It is in the trusted core because it is all that the decision hands over.
package plan

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Placements.
const (
	PlacementHost    = "host"
	PlacementSandbox = "sandbox"
	PlacementNone    = "none"
)

// Plan is one allowed tool call, decided. Executors read it; they never
// change it.
type Plan struct {
	// RequestID names the run in the audit records and the sandbox.
	RequestID string
	// Package is the installed package whose artifact hash the decision
	// verified, Tool its requested tool, Input the checked input.
	Package *store.Package
	Tool    *manifest.Tool
	Input   json.RawMessage
	// Placement is PlacementHost or PlacementSandbox: where the
	// executor runs the plan's processes, on the backend it builds for
	// it (executor/backend.For). BackendName is the sandbox backend's
	// name ("" on the host) and Sandbox its client, which the placement
	// stage found available (nil on the host).
	Placement   string
	BackendName string
	Runtime     string // the sandbox runtime placement chose and the backend confirmed (native | gvisor)
	Sandbox     *sandbox.Client
	// Limits and Timeout are the sandbox limits and the tool timeout.
	Limits  sandbox.Limits
	Timeout time.Duration
	// Environ is the caller's environment; only a host run gets any of
	// it, filtered (executor/hostexec.AllowedEnv).
	Environ []string
	// HostConfinement is sandbox.host_confinement (host placement).
	HostConfinement string
	// Trust is the package's tier as the decision found it.
	Trust string
	// Workspace is the user's workspace directory as the decision granted
	// it from the manifest's permissions.filesystem.level (read-only or
	// read-write); nil when none was named or none was granted.
	Workspace *sandbox.Workspace
	// Agent are the host's agent settings (agent plans).
	Agent AgentSettings
	// Services is the kernel's side of a run that makes requests of its
	// own (agent plans) or whose sealed egress the kernel audits
	// (mcp_server plans).
	Services Services
	// MCP is the checked launch of an mcp_server package (mcp_server
	// plans; nil otherwise).
	MCP *MCPLaunch
	// Image is the sandbox image the placement checked (sandbox
	// placement; zero on the host).
	Image Image
	// Plugins is the run's plugin host: it runs the sandbox backend, and
	// starts a sealed egress proxy (mcp_server plans).
	Plugins *pluginhost.Host
}

// MCPReadMethods are the MCP requests of an mcp_server package's resources,
// prompts and completions, decided like a call of a read tool of that name (a tool name
// has no "/"), with their params' JSON Schema as its input schema (specs/mcp.md).
var MCPReadMethods = map[string]string{"resources/list": `{"type":"object"}`, "resources/templates/list": `{"type":"object"}`,
	"resources/read": uriParams, "resources/subscribe": uriParams, "resources/unsubscribe": uriParams,
	"prompts/list": `{"type":"object"}`, "prompts/get": `{"type":"object","required":["name"]}`, "completion/complete": completeParams}

const uriParams = `{"type":"object","properties":{"uri":{"type":"string","format":"uri"}},"required":["uri"]}`
const completeParams = `{"type":"object","required":["ref","argument"],"properties":{"ref":{"type":"object","properties":{"uri":{"type":"string","format":"uri-template"}}},"argument":{"type":"object","properties":{"value":{"type":"string"}}},"context":{"type":"object","properties":{"arguments":{"type":"object","additionalProperties":{"type":"string"}}}}}}`

// MCPLaunch is how the decision found an mcp_server package's server may
// be started: preinstalled and pinned (from the sealed lockfile entry when
// there is one), its sealed egress domains and its declared tools.
type MCPLaunch struct {
	// Command is the checked mcp_server.command.
	Command *manifest.MCPCommand
	// HostInterpreter is the host path of Command.Interpreter (host
	// placement), resolved on a fixed system PATH.
	HostInterpreter string
	// Domains are the sealed mcp_allowed_domains (sandbox placement
	// only): the server gets a sealed egress proxy allowing them.
	Domains []string
	// Declared maps each declared tool to its name on the server (the
	// tool's entrypoint): nothing else is exposed or called.
	Declared map[string]string
}

// Outcome is what an execution produced, filled as far as it got.
type Outcome struct {
	// Ran: a process was started.
	Ran        bool
	ExitCode   *int
	OK         *bool
	Output     json.RawMessage
	Error      string
	Stderr     string
	DurationMS *int64
	// Confinement is the host backend's note when a host run was less
	// than fully confined ("unconfined: landlock unavailable"), "" else.
	Confinement string
	// Warnings are the executor's warnings for the caller (an MCP server
	// that does not offer a declared tool).
	Warnings []string
}

// Executor runs plans of one package type (toolpack, agent, mcp_server).
// A tool that ran and failed is an Outcome with OK false, not an error;
// the error is a run that could not be completed, with its reason code.
type Executor interface {
	Execute(ctx context.Context, p *Plan, out *Outcome) error
}

// Registry is what cmd/agentnode wires into the kernel: an executor per
// package type, and the host backend's answers to placement.
type Registry struct {
	Executors map[string]Executor
	// Host answers the placement stage's questions about the host
	// backend. nil places nothing on the host (sandbox_unavailable).
	Host Host
}

// Host is what the decision must know of the host backend before it
// places a run there, so that no decision record says allow for a run the
// host backend would refuse: the same checks, by the same code, that the
// host backend makes again when it runs (executor/backend.Host).
type Host interface {
	// Confinement assesses sandbox.host_confinement mode on this machine
	// without running anything: an error with reason code
	// sandbox_unavailable when a host run would be refused (the host
	// backend's own message), else the note for the audit records on a
	// run that will be less than fully confined ("" when fully).
	Confinement(mode string) (note string, err error)
	// Python checks the host's interpreter of `runtime: python` tools:
	// nil, or the coded error (runtime_unsupported) a host run would
	// fail with.
	Python() error
}

// Image is the resolved sandbox image a sandboxed plan runs in.
type Image struct {
	Ref   string // name@sha256:...
	Store string // the image store the kernel verified Ref in; the backend resolves Ref there
	// ConfigDigest is the image's config digest (what a kept MCP server
	// was started from).
	ConfigDigest string
}
