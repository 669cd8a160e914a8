// Package executor wires the executors of agentnode, and the host backend's
// answers to placement, into the kernel (Registry). The kernel
// (kernel/dispatch) decides; the packages under executor/ run what it
// decided (a kernel/plan.Plan), and the kernel never imports them:
// cmd/agentnode registers them. Each executor builds the backend of the
// plan's placement itself (executor/backend.For): the kernel says where,
// never with what.
//
//	executor/toolpack  runs a toolpack's tool over the tool I/O protocol
//	executor/agent     runs an agent in the sandbox over the agent protocol
//	executor/mcpserver runs an mcp_server package's server and makes the
//	                   decided tools/call (Servers keeps them running)
//	executor/egress    starts the sealed egress proxy plugin of a sandbox
//	executor/backend   the backends: the host (confined) and the sandbox
//	                   backend plugins, behind one interface (Backend,
//	                   Task, Exit), and For, which builds one for a plan
//	executor/hostexec  runs a process on the host: confined, bounded,
//	                   cleaned up (the host backend's engine)
//	executor/confine   the host confinement: capabilities, Landlock,
//	                   seccomp
package executor

import (
	"maps"

	"github.com/agentnode/agentnode/executor/agent"
	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/mcpserver"
	"github.com/agentnode/agentnode/executor/toolpack"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Registry is every executor of this build, with the host backend's
// answers to placement. Its mcp_server
// executor starts a server per call; `agentnode mcp serve` replaces it
// with a mcpserver.Servers that keeps them running (WithMCPServers).
func Registry() *plan.Registry {
	return &plan.Registry{
		Executors: map[string]plan.Executor{
			manifest.TypeToolpack:  toolpack.Executor{},
			manifest.TypeAgent:     agent.Executor{},
			manifest.TypeMCPServer: mcpserver.Executor{},
		},
		Host: backend.Host{},
	}
}

// WithWarmPool is a copy of reg whose toolpack executor lets the sandbox
// backend keep warm a pool of prepared sandboxes (`agentnode mcp serve`,
// sandbox.warm_pool); reg itself is not changed.
func WithWarmPool(reg *plan.Registry, warm sandbox.WarmPool) *plan.Registry {
	c := *reg
	c.Executors = maps.Clone(reg.Executors)
	if c.Executors == nil {
		c.Executors = map[string]plan.Executor{}
	}
	c.Executors[manifest.TypeToolpack] = toolpack.Executor{Warm: warm}
	return &c
}

// WithMCPServers is a copy of reg whose mcp_server executor is servers
// (`agentnode mcp serve`); reg itself is not changed.
func WithMCPServers(reg *plan.Registry, servers *mcpserver.Servers) *plan.Registry {
	c := *reg // every field (Host, …), then a copy of the map
	c.Executors = maps.Clone(reg.Executors)
	if c.Executors == nil {
		c.Executors = map[string]plan.Executor{}
	}
	c.Executors[manifest.TypeMCPServer] = servers
	return &c
}
