// Package toolpack is the executor of toolpack packages: it runs the
// decided tool once on the backend of the plan's placement, speaking the
// tool I/O protocol (executor/toolio), and fills the outcome. A tool that ran and failed is
// not an error: it sets OK false and a non-zero exit code.
package toolpack

import (
	"context"
	"fmt"
	"time"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/hostexec"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Executor runs toolpack plans.
type Executor struct {
	// backends builds the backend of a plan's placement (nil: backend.For).
	backends backend.Factory
	// Warm is the warm pool its sandboxed runs let the backend keep
	// (sandbox.Spec.Warm): `agentnode mcp serve` sets it; zero for a
	// one-shot run, which prepares nothing.
	Warm sandbox.WarmPool
}

// Execute runs p's tool with p's input where p's placement put it, on the
// backend it builds for that placement: one it cannot build (a sandbox
// placement without a checked backend) runs nothing and fills no outcome.
func (e Executor) Execute(ctx context.Context, p *plan.Plan, out *plan.Outcome) error {
	b, err := e.backends.Build(p)
	if err != nil {
		return err
	}
	if s, ok := b.(*backend.Sandbox); ok {
		s.Warm = e.Warm
	}
	stdin, err := toolio.EncodeRequest(p.Tool.Name, p.Input)
	if err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	start := time.Now()
	exit, err := runTool(ctx, p, b, stdin)
	ms := time.Since(start).Milliseconds()
	out.DurationMS = &ms
	okFalse := false
	if exit != nil {
		out.Ran = true
		out.Stderr = string(exit.Stderr)
		code := exit.ExitCode
		out.ExitCode = &code
		out.Confinement = exit.Confinement
	}
	if err != nil {
		out.OK = &okFalse
		return err
	}
	if exit.StdoutExceeded {
		out.OK = &okFalse
		out.Error = fmt.Sprintf("tool output exceeded %d bytes; the tool was stopped", toolio.MaxOutput)
		return nil
	}
	resp, err := toolio.DecodeResponse(exit.Stdout)
	if err != nil {
		out.OK = &okFalse
		out.Error = "tool output violates the tool I/O protocol: " + err.Error()
		return nil
	}
	ok := resp.OK && exit.ExitCode == 0
	out.OK = &ok
	if resp.OK {
		out.Output = resp.Result
	} else {
		out.Error = resp.Error
	}
	if resp.OK && exit.ExitCode != 0 {
		out.Error = "tool reported ok but exited non-zero"
	}
	return nil
}

// runTool runs the tool process on b, the plan's backend: the same task
// whatever the placement (the host backend gives it the filtered caller
// environment and, for a network permission, inet sockets; the sandbox
// neither).
func runTool(ctx context.Context, p *plan.Plan, b backend.Backend, stdin []byte) (*backend.Exit, error) {
	m := p.Package.Manifest
	cmd := backend.Command{Exec: &backend.Exec{Entrypoint: p.Tool.Entrypoint}}
	if m.Runtime == manifest.RuntimePython {
		cmd = backend.Command{Python: &backend.Python{Entrypoint: p.Tool.Entrypoint, PackageLevel: p.Tool.FromPackage}}
	}
	t := &backend.Task{
		RunID:      "an-" + p.RequestID,
		PackageDir: p.Package.Dir,
		Command:    cmd,
		Stdin:      stdin,
		Limits:     p.Limits,
		Timeout:    p.Timeout,
		MaxStdout:  toolio.MaxOutput,
		MaxStderr:  toolio.MaxStderr,
		Workspace:  p.Workspace,
	}
	if p.Placement == plan.PlacementHost {
		net := m.Permissions.Network.Level
		t.Env = hostexec.AllowedEnv(p.Environ)
		// restricted and unrestricted both get inet sockets: the host has
		// no egress filter (allowed_domains is the sandbox's).
		t.HostNetwork = net == manifest.NetworkRestricted || net == manifest.NetworkUnrestricted
		t.HostConfinement = p.HostConfinement
	}
	exit, err := b.Run(ctx, t)
	if exit == nil {
		return nil, err
	}
	if exit.RunErr != nil && !exit.StdoutExceeded {
		return exit, exit.RunErr
	}
	if !exit.CleanupVerified {
		return exit, reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the container was removed after the run", p.BackendName)
	}
	what := "tool " + p.Package.ID + "/" + p.Tool.Name
	if exit.TimedOut {
		return exit, reason.New(reason.Timeout, "tool %s/%s timed out after %s", p.Package.ID, p.Tool.Name, p.Timeout)
	}
	if err := backend.OOMError(exit.OOMKilled, exit.ExitCode, what, p.Limits); err != nil {
		return exit, err
	}
	return exit, nil
}
