// Package executor wires the executors and backends of agentnode into the
// kernel (Registry). The kernel (kernel/dispatch) decides; the packages
// under executor/ run what it decided (a kernel/plan.Plan), and the kernel
// never imports them: cmd/agentnode registers them.
//
//	executor/toolpack  runs a toolpack's tool over the tool I/O protocol
//	executor/agent     runs an agent in the sandbox over the agent protocol
//	executor/backend   the backends: the host (confined) and the sandbox
//	                   backend plugins, behind one interface
//	executor/hostexec  runs a process on the host: confined, bounded,
//	                   cleaned up (the host backend's engine)
//	executor/confine   the host confinement: capabilities, Landlock,
//	                   seccomp
package executor

import (
	"github.com/agentnode/agentnode/executor/agent"
	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/toolpack"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
)

// Registry is every executor and backend of this build.
func Registry() *plan.Registry {
	return &plan.Registry{
		Executors: map[string]plan.Executor{
			manifest.TypeToolpack: toolpack.Executor{},
			manifest.TypeAgent:    agent.Executor{},
		},
		Backend: backend.For,
		Host:    backend.Host{},
	}
}
