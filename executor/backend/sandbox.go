package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path"

	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Sandbox runs a task in a container of the sandbox backend plugin Name
// (Client), from Image, with the package read-only at /pack, no network
// (but the sealed egress socket, when the task has one) and nothing from
// the host environment.
type Sandbox struct {
	Name   string
	Client *sandbox.Client
	Image  plan.Image
	// Warm is the warm pool its runs let the backend keep (zero: none).
	Warm sandbox.WarmPool
	// Runtime is the runtime placement chose (Spec.Runtime).
	Runtime string
}

// Run runs t; the Exit says whether the backend proved the container gone.
func (s *Sandbox) Run(ctx context.Context, t *Task) (*Exit, error) {
	args, err := sandboxArgs(t.Command)
	if err != nil {
		return nil, err
	}
	var stdin io.Reader = bytes.NewReader(t.Stdin)
	if t.StdinStream != nil {
		stdin = t.StdinStream
	}
	var stdoutBuf *toolio.CappedBuffer
	var stdout io.Writer = t.StdoutStream
	if stdout == nil {
		stdoutBuf = &toolio.CappedBuffer{Max: t.MaxStdout}
		stdout = stdoutBuf
	}
	stderr := &toolio.CappedBuffer{Max: t.MaxStderr, Drop: true}
	resp, err := s.Client.Run(ctx, &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID:        t.RunID,
			Image:        s.Image.Ref,
			ImageStore:   s.Image.Store,
			PackageDir:   t.PackageDir,
			Args:         args,
			Limits:       t.Limits,
			Timeout:      t.Timeout,
			Network:      false,
			EgressSocket: t.EgressSocket,
			Workspace:    t.Workspace,
			Warm:         s.Warm,
			Runtime:      s.Runtime,
		},
		Stdin:  stdin,
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
	exit := &Exit{ExitCode: resp.ExitCode, Stderr: stderr.Bytes(), TimedOut: resp.TimedOut,
		OOMKilled: resp.OOMKilled, CleanupVerified: resp.CleanupVerified}
	if stdoutBuf != nil {
		exit.Stdout, exit.StdoutExceeded = stdoutBuf.Bytes(), stdoutBuf.Exceeded
	}
	if err != nil {
		exit.RunErr = plan.SandboxError(s.Name, err)
	}
	return exit, nil
}

// sandboxArgs is the argv of a command in the container, whose package is
// at /pack: the exec entrypoint (after its interpreter), for `runtime:
// python` the image's python3 with the tool shim (python.Command), or the
// container command as it is.
func sandboxArgs(c Command) ([]string, error) {
	switch {
	case c.Python != nil:
		return python.ImageCommand("/pack", c.Python.Entrypoint, c.Python.PackageLevel), nil
	case c.Exec != nil:
		var argv []string
		if c.Exec.Interpreter != "" {
			argv = append(argv, c.Exec.Interpreter)
		}
		argv = append(argv, path.Join("/pack", c.Exec.Entrypoint))
		return append(argv, c.Exec.Args...), nil
	case len(c.Container) > 0:
		return c.Container, nil
	}
	return nil, reason.New(reason.RuntimeUnsupported, "sandbox backend: a task with no command")
}
