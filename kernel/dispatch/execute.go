package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/agentnode/agentnode/kernel/hostexec"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/toolio"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// toolRun is what a finished tool process left, wherever it ran.
type toolRun struct {
	exitCode int
	stdout   []byte
	stderr   []byte
	flooded  bool // stdout exceeded toolio.MaxOutput and the tool was stopped
}

// stageExecute runs the tool where placement said, speaking the tool I/O
// protocol, and fills the outcome. A tool that ran and failed is not an
// error of the pipeline: it sets OK=false and a non-zero exit code.
func stageExecute(ctx context.Context, st *state) error {
	switch st.pkg.Manifest.PackageType {
	case manifest.TypeAgent:
		return executeAgent(ctx, st) // agent.go: the agent protocol
	case manifest.TypeMCPServer:
		return executeMCP(ctx, st) // mcp.go: one guarded tools/call
	}
	stdin, err := toolio.EncodeRequest(st.tool.Name, st.req.Input)
	if err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	start := time.Now()
	var run *toolRun
	switch st.res.Placement {
	case PlacementHost:
		run, err = runOnHost(ctx, st, stdin)
	case PlacementSandbox:
		run, err = runInSandbox(ctx, st, stdin)
	default:
		err = reason.New(reason.SandboxUnavailable, "placement %q cannot execute", st.res.Placement)
	}
	ms := time.Since(start).Milliseconds()
	st.res.DurationMS = &ms
	okFalse := false
	if run != nil {
		st.res.Ran = true
		st.res.Stderr = string(run.stderr)
		code := run.exitCode
		st.res.ExitCode = &code
	}
	if err != nil {
		st.res.OK = &okFalse
		return err
	}
	if run.flooded {
		st.res.OK = &okFalse
		st.res.Error = fmt.Sprintf("tool output exceeded %d bytes; the tool was stopped", toolio.MaxOutput)
		return nil
	}
	resp, err := toolio.DecodeResponse(run.stdout)
	if err != nil {
		st.res.OK = &okFalse
		st.res.Error = "tool output violates the tool I/O protocol: " + err.Error()
		return nil
	}
	ok := resp.OK && run.exitCode == 0
	st.res.OK = &ok
	if resp.OK {
		st.res.Output = resp.Result
	} else {
		st.res.Error = resp.Error
	}
	if resp.OK && run.exitCode != 0 {
		st.res.Error = "tool reported ok but exited non-zero"
	}
	return nil
}

// runOnHost runs a trusted tool on the host, confined (kernel/confine):
// sandbox.host_confinement decides what a kernel without enough Landlock
// gets; a refusal is sandbox_unavailable (placement refuses the same before
// the decision, checkHostConfinement: this is the second line), and a run
// that was not fully confined carries a note ("unconfined: landlock
// unavailable") into the outcome record's reason and the warnings.
func runOnHost(ctx context.Context, st *state, stdin []byte) (*toolRun, error) {
	net := st.pkg.Manifest.Permissions.Network.Level
	var py *hostexec.Python
	if st.pkg.Manifest.Runtime == manifest.RuntimePython {
		// The host's python3 with the tool shim (sdk/python), confined
		// exactly as an exec tool.
		py = &hostexec.Python{Interpreter: python.Interpreter, PackageLevel: st.tool.FromPackage}
	}
	out, err := hostexec.Run(ctx, &hostexec.Request{
		Python:     py,
		PackageDir: st.pkg.Dir,
		Entrypoint: st.tool.Entrypoint,
		Stdin:      stdin,
		Env:        hostexec.AllowedEnv(st.k.Environ),
		Timeout:    st.set.timeout,
		MaxStdout:  toolio.MaxOutput,
		MaxStderr:  toolio.MaxStderr,
		Confine: &hostexec.Confinement{
			Mode: st.set.hostConfinement,
			// restricted and unrestricted both get inet sockets: the
			// host has no egress filter (allowed_domains is the
			// sandbox's).
			Network: net == manifest.NetworkRestricted || net == manifest.NetworkUnrestricted,
		},
	})
	var run *toolRun
	if out != nil {
		run = &toolRun{exitCode: out.ExitCode, stdout: out.Stdout, stderr: out.Stderr, flooded: out.StdoutTruncated}
		// Placement said how the run would be confined (and warned); the
		// executor checked again and says how it was: its word goes into
		// the outcome record.
		if out.Confinement != st.confineNote {
			st.confineNote = out.Confinement
			if out.Confinement != "" {
				st.k.warn(st, "host tool "+st.pkg.ID+"/"+st.tool.Name+": "+out.Confinement)
			}
		}
		if out.Confinement != "" && st.res.Reason == "" {
			st.res.Reason = out.Confinement
		}
	}
	switch {
	case err == nil:
		return run, nil
	case errors.Is(err, reason.ErrTimeout):
		return run, reason.New(reason.Timeout, "tool %s/%s timed out after %s", st.pkg.ID, st.tool.Name, st.set.timeout)
	case errors.Is(err, toolio.ErrOutputTooLarge):
		run.flooded = true
		return run, nil
	}
	return run, err
}

// runInSandbox runs the tool through the backend that placement checked.
// The container gets nothing from the host environment.
func runInSandbox(ctx context.Context, st *state, stdin []byte) (*toolRun, error) {
	stdout := &cappedBuffer{max: toolio.MaxOutput}
	stderr := &cappedBuffer{max: toolio.MaxStderr, drop: true}
	resp, err := st.sandbox.Run(ctx, &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID:      "an-" + st.res.RequestID,
			Image:      st.img.Ref,
			ImageStore: st.img.Store,
			PackageDir: st.pkg.Dir,
			Args:       sandboxArgs(st),
			Limits:     st.set.limits,
			Timeout:    st.set.timeout,
			Network:    false,
		},
		Stdin:  bytes.NewReader(stdin),
		Stdout: stdout,
		Stderr: stderr,
	})
	if resp == nil {
		// No answer, so no proof the container is gone: never a success.
		if err == nil {
			err = errors.New("no result")
		}
		return nil, sandboxError(st.set.backend, pluginCallError("sandbox-"+st.set.backend, err))
	}
	run := &toolRun{exitCode: resp.ExitCode, stdout: stdout.Bytes(), stderr: stderr.Bytes(), flooded: stdout.exceeded}
	if err != nil && !stdout.exceeded {
		return run, sandboxError(st.set.backend, pluginCallError("sandbox-"+st.set.backend, err))
	}
	if !resp.CleanupVerified {
		return run, reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the container was removed after the run", st.set.backend)
	}
	if resp.TimedOut {
		return run, reason.New(reason.Timeout, "tool %s/%s timed out after %s", st.pkg.ID, st.tool.Name, st.set.timeout)
	}
	if err := oomError(resp, "tool "+st.pkg.ID+"/"+st.tool.Name, st.set.limits); err != nil {
		return run, err
	}
	return run, nil
}

// sandboxArgs is the argv of a tool in the container, whose package is at
// /pack: the exec entrypoint, or for `runtime: python` the image's python3
// with the tool shim (python.Command).
func sandboxArgs(st *state) []string {
	if st.pkg.Manifest.Runtime == manifest.RuntimePython {
		return python.Command(python.Interpreter, python.ShimPath, "/pack", st.tool.Entrypoint, st.tool.FromPackage)
	}
	return []string{path.Join("/pack", st.tool.Entrypoint)}
}

// oomError is the killed_memory error of a sandboxed run the kernel's OOM
// killer ended (the backend's OOMKilled) and that did not succeed: the run
// failed for its memory limit, not because its output was malformed. nil
// otherwise (a run whose child was killed but that still exited 0 keeps its
// own outcome).
func oomError(resp *sandbox.RunResponse, what string, limits sandbox.Limits) error {
	if !resp.OOMKilled || resp.ExitCode == 0 {
		return nil
	}
	limit := "the sandbox's default memory limit"
	if limits.MemoryBytes > 0 {
		limit = fmt.Sprintf("its memory limit of %d MiB (sandbox.limits.memory)", limits.MemoryBytes>>20)
	}
	return reason.New(reason.KilledMemory, "%s was killed by the kernel for using more than %s (exit %d)",
		what, limit, resp.ExitCode)
}

// errOutputLimit stops a backend's stdout stream at the protocol limit.
var errOutputLimit = errors.New("tool output limit reached")

// cappedBuffer keeps at most max bytes. Past the limit it either fails the
// write (stdout: the backend must stop the tool) or drops silently (stderr).
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int
	drop     bool
	exceeded bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.exceeded = true
	if c.drop {
		return len(p), nil
	}
	return 0, errOutputLimit
}

func (c *cappedBuffer) Bytes() []byte { return c.buf.Bytes() }
