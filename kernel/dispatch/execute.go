package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentnode/agentnode/kernel/hostexec"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/toolio"
)

// stageExecute runs the tool where placement said, speaking the tool I/O
// protocol, and fills the outcome. A tool that ran and failed is not an
// error of the pipeline: it sets OK=false and a non-zero exit code.
func stageExecute(ctx context.Context, st *state) error {
	if st.res.Placement != PlacementHost {
		// Placement refuses sandboxed runs before the decision record; this
		// is the last line of defence.
		return reason.New(reason.SandboxUnavailable, "placement %q cannot execute in this version", st.res.Placement)
	}
	stdin, err := toolio.EncodeRequest(st.tool.Name, st.req.Input)
	if err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	start := time.Now()
	out, runErr := hostexec.Run(ctx, &hostexec.Request{
		PackageDir: st.pkg.Dir,
		Entrypoint: st.tool.Entrypoint,
		Stdin:      stdin,
		Env:        hostexec.AllowedEnv(st.k.Environ),
		Timeout:    st.set.timeout,
		MaxStdout:  toolio.MaxOutput,
		MaxStderr:  toolio.MaxStderr,
	})
	ms := time.Since(start).Milliseconds()
	st.res.DurationMS = &ms
	st.res.Ran = true
	if out != nil {
		st.res.Stderr = string(out.Stderr)
		code := out.ExitCode
		st.res.ExitCode = &code
	}
	okFalse := false
	if runErr != nil {
		st.res.OK = &okFalse
		switch {
		case errors.Is(runErr, reason.ErrTimeout):
			return reason.New(reason.Timeout, "tool %s/%s timed out after %s", st.pkg.ID, st.tool.Name, st.set.timeout)
		case errors.Is(runErr, toolio.ErrOutputTooLarge):
			// The tool ran and failed: it was stopped at the output limit.
			st.res.Error = fmt.Sprintf("tool output exceeded %d bytes; the tool was stopped", toolio.MaxOutput)
			return nil
		}
		return runErr
	}
	resp, err := toolio.DecodeResponse(out.Stdout)
	if err != nil {
		st.res.OK = &okFalse
		st.res.Error = "tool output violates the tool I/O protocol: " + err.Error()
		return nil
	}
	ok := resp.OK && out.ExitCode == 0
	st.res.OK = &ok
	if resp.OK {
		st.res.Output = resp.Result
	} else {
		st.res.Error = resp.Error
	}
	if resp.OK && out.ExitCode != 0 {
		st.res.Error = "tool reported ok but exited non-zero"
	}
	return nil
}
