package backend

import (
	"context"
	"errors"

	"github.com/agentnode/agentnode/executor/hostexec"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
)

// Host runs a task on this machine, confined (executor/hostexec,
// executor/confine): sandbox.host_confinement decides what a kernel without
// enough Landlock gets, a refusal is sandbox_unavailable, and a run that
// was not fully confined says so in Exit.Confinement. It is also the
// kernel's kernel/plan.Host: the checks placement makes before it decides
// are the ones Run makes again.
type Host struct{}

// Confinement is hostexec.CheckConfinement's answer for mode (the probe of
// executor/confine, cached per process): the note on a run that will be
// less than fully confined, or the refusal Run would make.
func (Host) Confinement(mode string) (string, error) {
	a, err := hostexec.CheckConfinement(mode)
	return a.Note, err
}

// Python is hostexec.CheckPython: the host has the interpreter of
// `runtime: python` tools, or runtime_unsupported.
func (Host) Python() error { return hostexec.CheckPython() }

// Run runs t with hostexec. A `runtime: python` command runs the host's
// python3 with the tool shim (sdk/python), confined exactly as an exec
// one. hostexec returns after the process group is killed and the process
// reaped, so every started run's cleanup is verified.
func (Host) Run(ctx context.Context, t *Task) (*Exit, error) {
	if t.EgressSocket != "" {
		return nil, reason.New(reason.EgressDenied, "sealed egress exists only in the sandbox, not on the host")
	}
	req := &hostexec.Request{
		PackageDir:   t.PackageDir,
		Stdin:        t.Stdin,
		StdinStream:  t.StdinStream,
		StdoutStream: t.StdoutStream,
		Env:          t.Env,
		Timeout:      t.Timeout,
		MaxStdout:    t.MaxStdout,
		MaxStderr:    t.MaxStderr,
		Confine:      &hostexec.Confinement{Mode: t.HostConfinement, Network: t.HostNetwork},
	}
	if t.Workspace != nil {
		req.Workspace = &hostexec.Workspace{Path: t.Workspace.Path, Writable: t.Workspace.Writable}
	}
	switch c := t.Command; {
	case c.Python != nil:
		req.Entrypoint = c.Python.Entrypoint
		req.Python = &hostexec.Python{Interpreter: python.Interpreter, PackageLevel: c.Python.PackageLevel}
	case c.Exec != nil:
		req.Entrypoint, req.Args = c.Exec.Entrypoint, c.Exec.Args
		if c.Exec.Interpreter != "" {
			if c.Exec.HostInterpreter == "" {
				return nil, reason.New(reason.MCPNotPreinstalled, "interpreter %s is not resolved on this host", c.Exec.Interpreter)
			}
			req.Interpreter = c.Exec.HostInterpreter
		}
	default:
		return nil, reason.New(reason.RuntimeUnsupported, "the host backend runs no container command")
	}
	out, err := hostexec.Run(ctx, req)
	if out == nil {
		return nil, err
	}
	exit := &Exit{ExitCode: out.ExitCode, Stdout: out.Stdout, Stderr: out.Stderr,
		StdoutExceeded: out.StdoutTruncated, Confinement: out.Confinement, CleanupVerified: true}
	switch {
	case err == nil:
	case errors.Is(err, reason.ErrTimeout):
		exit.TimedOut = true
	case errors.Is(err, toolio.ErrOutputTooLarge):
		exit.StdoutExceeded = true
	default:
		exit.RunErr = err
	}
	return exit, nil
}
