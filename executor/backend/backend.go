// Package backend holds the backends a plan runs on: the host, where a
// trusted tool runs confined (Host, over executor/hostexec: Landlock and
// seccomp), and the sandbox backend plugins (Sandbox, over sdk/sandbox:
// libcontainer, Docker, Podman). Both take the same Task, so an executor
// says what to run and the placement where: the host is one more backend,
// the way Nomad's raw_exec is one more driver.
//
// It also holds that contract (Backend, Task, Command, Exit, OOMError) and
// For, which builds the backend of a plan's placement from what the kernel
// decided (kernel/plan.Plan: Placement, BackendName, Sandbox, Image). The
// kernel says where a plan runs and never builds or calls a backend, so
// the contract sits with the executors that use it (executor/toolpack,
// executor/agent, executor/mcpserver all import this package, which
// imports none of them). What the placement stage must ask the host
// backend before it decides stays in the kernel (kernel/plan.Host; Host
// answers it).
package backend

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// For is the backend of p's placement: the host, or the sandbox backend
// plugin p.BackendName (its client p.Sandbox, checked available by the
// placement stage) running p.Image. A placement it cannot run on is
// sandbox_unavailable: nothing runs.
func For(p *plan.Plan) (Backend, error) {
	switch p.Placement {
	case plan.PlacementHost:
		return Host{}, nil
	case plan.PlacementSandbox:
		if p.Sandbox == nil {
			return nil, reason.New(reason.SandboxUnavailable, "no sandbox backend was placed")
		}
		return &Sandbox{Name: p.BackendName, Client: p.Sandbox, Image: p.Image, Runtime: p.Runtime}, nil
	}
	return nil, reason.New(reason.SandboxUnavailable, "placement %q cannot execute", p.Placement)
}

// Factory builds the backend of a plan: For, or a test's own (an
// executor's zero value uses For).
type Factory func(p *plan.Plan) (Backend, error)

// Build is f(p), or For(p) when f is nil.
func (f Factory) Build(p *plan.Plan) (Backend, error) {
	if f == nil {
		return For(p)
	}
	return f(p)
}

// Backend runs one process of a plan where the placement put it: on the
// host (confined) or in a sandbox backend plugin. Every runtime goes
// through the same interface, so runtime × placement is one matrix: the
// executor says what to run (Task.Command), the backend how.
//
// Run returns an error only when it has no Exit: the process did not start
// (a refused entrypoint or confinement) or the backend gave no answer, so
// there is no proof the run is gone.
type Backend interface {
	Run(ctx context.Context, t *Task) (*Exit, error)
}

// Command is what a task runs, independent of where. Exactly one field is
// set.
type Command struct {
	// Exec runs the package file Entrypoint (relative to the package)
	// with Args.
	Exec *Exec
	// Python runs a `runtime: python` tool's entrypoint through the tool
	// shim (sdk/python).
	Python *Python
	// Container is an argv inside the container, whose package is at
	// /pack (an agent's shim command line). Only a sandbox runs it.
	Container []string
}

// Exec is an executable inside the package, or a script of it run by an
// interpreter.
type Exec struct {
	Entrypoint string
	Args       []string
	// Interpreter, when set, runs the script Entrypoint: in a sandbox
	// the image's program of that name, on the host HostInterpreter (its
	// absolute path, resolved by the caller on a fixed system PATH).
	Interpreter     string
	HostInterpreter string
}

// Python is a `runtime: python` tool.
type Python struct {
	// Entrypoint is the tool's Python entrypoint (module:function).
	Entrypoint string
	// PackageLevel: it is the package-level entrypoint of a tool without
	// its own.
	PackageLevel bool
}

// Task is one process to run.
type Task struct {
	// RunID names the run (the sandbox's container).
	RunID      string
	PackageDir string
	Command    Command
	// Env is the process environment on the host (already filtered); a
	// sandbox gets none.
	Env []string
	// HostNetwork lets a host run open inet sockets (the host has no
	// egress filter); a sandboxed run never has network.
	HostNetwork bool
	// HostConfinement is sandbox.host_confinement (host runs).
	HostConfinement string
	Limits          sandbox.Limits
	Timeout         time.Duration
	// Stdin is written to the process, then closed.
	Stdin []byte
	// MaxStdout bounds what is kept of stdout: past it the process is
	// stopped (Exit.StdoutExceeded). MaxStderr bounds the stderr kept.
	MaxStdout, MaxStderr int
	// StdinStream and StdoutStream, when set, replace Stdin and the kept
	// stdout, for a process that speaks a protocol as it runs (an agent,
	// an MCP server). A failed write to StdoutStream stops the process.
	StdinStream  io.Reader
	StdoutStream io.Writer
	// EgressSocket is the sealed egress proxy's socket to mount into the
	// sandbox ("": loopback only). Never on the host.
	EgressSocket string
	// Workspace is the granted workspace (Plan.Workspace): the process's
	// working directory, readable (and writable when granted so) at its
	// own path, on the host and in a sandbox alike.
	Workspace *sandbox.Workspace
}

// Exit is how a started process ended.
type Exit struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// StdoutExceeded: stdout went past Task.MaxStdout and the process was
	// stopped.
	StdoutExceeded bool
	// TimedOut: the process was stopped at Task.Timeout.
	TimedOut bool
	// OOMKilled: the kernel's OOM killer ended a process of the run.
	OOMKilled bool
	// Confinement is the host backend's note on a run that was less than
	// fully confined.
	Confinement string
	// CleanupVerified: the backend proved nothing of the run is left (the
	// host: its process group killed and reaped; a sandbox: the
	// container removed). A run without that proof is never a success.
	CleanupVerified bool
	// RunErr is the error the run ended with, for the executor to judge
	// (a run the caller stopped, by refusing stdout, ends with one).
	RunErr error
}

// OOMError is the killed_memory error of a sandboxed run the kernel's OOM
// killer ended (the backend's OOMKilled) and that did not succeed: the run
// failed for its memory limit, not because its output was malformed. nil
// otherwise (a run whose child was killed but that still exited 0 keeps
// its own outcome). what names the run ("tool p/t", "agent a").
func OOMError(oomKilled bool, exitCode int, what string, limits sandbox.Limits) error {
	if !oomKilled || exitCode == 0 {
		return nil
	}
	limit := "the sandbox's default memory limit"
	if limits.MemoryBytes > 0 {
		limit = fmt.Sprintf("its memory limit of %d MiB (sandbox.limits.memory)", limits.MemoryBytes>>20)
	}
	return reason.New(reason.KilledMemory, "%s was killed by the kernel for using more than %s (exit %d)",
		what, limit, exitCode)
}
