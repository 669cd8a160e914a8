package backend

import (
	"bytes"
	"context"
	"errors"
	"path"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/toolio"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Sandbox runs a task in a container of the sandbox backend plugin Name
// (Client), from Image, with the package read-only at /pack, no network
// and nothing from the host environment.
type Sandbox struct {
	Name   string
	Client *sandbox.Client
	Image  plan.Image
}

// Run runs t and waits for the backend's proof that the container is gone:
// a run without it is never a success.
func (s *Sandbox) Run(ctx context.Context, t *plan.Task) (*plan.Exit, error) {
	args, err := sandboxArgs(t.Command)
	if err != nil {
		return nil, err
	}
	stdout := &toolio.CappedBuffer{Max: t.MaxStdout}
	stderr := &toolio.CappedBuffer{Max: t.MaxStderr, Drop: true}
	resp, err := s.Client.Run(ctx, &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID:      t.RunID,
			Image:      s.Image.Ref,
			ImageID:    s.Image.ConfigDigest,
			Rootfs:     s.Image.Rootfs,
			PackageDir: t.PackageDir,
			Args:       args,
			Limits:     t.Limits,
			Timeout:    t.Timeout,
			Network:    false,
		},
		Stdin:  bytes.NewReader(t.Stdin),
		Stdout: stdout,
		Stderr: stderr,
	})
	if resp == nil {
		// No answer, so no proof the container is gone: never a success.
		if err == nil {
			err = errors.New("no result")
		}
		return nil, plan.SandboxError(s.Name, err)
	}
	exit := &plan.Exit{ExitCode: resp.ExitCode, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(),
		StdoutExceeded: stdout.Exceeded, TimedOut: resp.TimedOut, OOMKilled: resp.OOMKilled}
	if err != nil && !stdout.Exceeded {
		return exit, plan.SandboxError(s.Name, err)
	}
	if !resp.CleanupVerified {
		return exit, reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the container was removed after the run", s.Name)
	}
	return exit, nil
}

// sandboxArgs is the argv of a command in the container, whose package is
// at /pack: the exec entrypoint, or for `runtime: python` the image's
// python3 with the tool shim (python.Command).
func sandboxArgs(c plan.Command) ([]string, error) {
	switch {
	case c.Python != nil:
		return python.Command(python.Interpreter, python.ShimPath, "/pack", c.Python.Entrypoint, c.Python.PackageLevel), nil
	case c.Exec != nil:
		return append([]string{path.Join("/pack", c.Exec.Entrypoint)}, c.Exec.Args...), nil
	}
	return nil, reason.New(reason.RuntimeUnsupported, "sandbox backend: a task with no command")
}
