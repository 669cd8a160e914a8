// Package mcpserver is the executor of mcp_server packages (specs/mcp.md):
// it runs a kernel/plan.Plan the pipeline decided for a tool of an MCP
// server package. It starts the preinstalled server the plan's checked
// launch names (plan.MCPLaunch) on the placement's backend
// (executor/backend: the confined host or a sandbox backend plugin) with
// no network — but, in the sandbox, a sealed egress proxy for sealed
// mcp_allowed_domains (executor/egress, every connection audited by the
// kernel through plan.Services) — and nothing from the host environment,
// initializes an MCP session over its stdio, and makes the one tools/call
// the pipeline decided through the Guard proxy (executor/mcpproxy): only
// declared tools, only with the decided input.
//
// Executor starts a server for one call and stops it after, its end
// verified; Servers (created by `agentnode mcp serve`,
// cmd/agentnode/mcpserve) keeps one running per package across calls.
// Either way every call is decided by the kernel first: the package sits
// outside the kernel because it runs what was decided and decides nothing.
// Named after the package type (manifest.TypeMCPServer), which also keeps
// it apart from the go-sdk's package mcp.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/mcpproxy"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Executor runs each call on a server started for it and stopped after it
// (`agentnode run`).
type Executor struct {
	// backends builds the backend of a plan's placement (nil: backend.For).
	backends backend.Factory
}

// Execute makes p's decided tools/call on a server started for it.
func (e Executor) Execute(ctx context.Context, p *plan.Plan, out *plan.Outcome) error {
	b, err := e.backends.Build(p)
	if err != nil {
		return err
	}
	return execute(ctx, p, b, out, nil)
}

// decidedKey carries, in a call's context, the one call the pipeline
// decided: the Guard proxy forwards nothing else.
type decidedKey struct{}

type decidedCall struct {
	tool  string
	input []byte // compacted JSON
}

// forwardDecided is the Guard proxy's decision hook for kernel calls: the
// pipeline has decided (policy, rate limit, inspectors, prompt, audit)
// before execute, so the hook only lets through exactly the call it
// decided.
func forwardDecided(ctx context.Context, tool string, args json.RawMessage) error {
	d, ok := ctx.Value(decidedKey{}).(decidedCall)
	if !ok {
		return reason.New(reason.PolicyDenied, "tool %s: no pipeline decision for this call", tool)
	}
	var got bytes.Buffer
	if d.tool != tool || json.Compact(&got, args) != nil || !bytes.Equal(got.Bytes(), d.input) {
		return reason.New(reason.PolicyDenied, "tool %s: the call is not the one the pipeline decided", tool)
	}
	return nil
}

// execute makes the decided tools/call: on a session from pool, or (pool
// nil) on a server started for this call on b and stopped after it (its
// cleanup verified). b is the backend of p's placement, built by the
// caller before anything of the call starts or goes into out: one that
// cannot be built fails the call as it did when the kernel built it; a
// kept server already running uses the backend it was started on. The result's structuredContent (else its text) is
// the tool's result; isError is a failed tool (ok false).
func execute(ctx context.Context, p *plan.Plan, b backend.Backend, out *plan.Outcome, pool *Servers) error {
	start := time.Now()
	okFalse, okTrue := false, true
	out.OK = &okFalse
	defer func() {
		ms := time.Since(start).Milliseconds()
		out.DurationMS = &ms
	}()
	if p.MCP == nil {
		return reason.New(reason.MCPNotPreinstalled, "package %s: no checked MCP launch", p.Package.ID)
	}
	var input bytes.Buffer
	in := p.Input
	if len(bytes.TrimSpace(in)) == 0 {
		in = json.RawMessage(`{}`)
	}
	if err := json.Compact(&input, in); err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	callCtx, cancel := context.WithTimeout(context.WithValue(ctx, decidedKey{}, decidedCall{p.Tool.Name, input.Bytes()}), p.Timeout)
	defer cancel()

	var (
		sess    *session
		release func(broken bool)
		err     error
	)
	if pool != nil {
		sess, release, err = pool.acquire(callCtx, p, b, out)
	} else {
		sess, err = startSession(callCtx, ctx, p, b, out, p.Timeout, nil)
		release = func(bool) {}
	}
	if err != nil {
		return startFailed(out, err)
	}
	out.Ran = true
	var (
		res     *mcp.CallToolResult
		raw     json.RawMessage
		callErr error
	)
	method := plan.MCPReadMethods[p.Tool.Name] != "" // resources and prompts: decided as a read tool of that name
	if method {
		raw, callErr = sess.proxy.Request(callCtx, p.Tool.Name, input.Bytes())
	} else {
		res, callErr = sess.proxy.Call(callCtx, p.Tool.Name, input.Bytes())
	}
	timedOut := callErr != nil && callCtx.Err() != nil && ctx.Err() == nil
	// A refusal of the proxy (a coded error) leaves the server as it was;
	// a failed or timed-out call may have left it broken or busy.
	release(timedOut || (callErr != nil && reason.CodeOf(callErr) == ""))

	if pool == nil {
		// One call per server: stop it and prove it is gone.
		sess.stop()
		out.Stderr = sess.stderr.String()
		code := sess.exitCode
		out.ExitCode = &code
		if err := sess.cleanupErr; err != nil {
			return err
		}
	}
	switch {
	case timedOut:
		return reason.New(reason.Timeout, "tool %s/%s timed out after %s", p.Package.ID, p.Tool.Name, p.Timeout)
	case callErr != nil && reason.CodeOf(callErr) != "":
		return callErr // refused by the proxy: nothing reached the server
	case callErr != nil:
		out.Error = "the MCP server failed during the call: " + callErr.Error()
		return nil
	}
	if method {
		if len(raw) > maxResult {
			out.Error = fmt.Sprintf("the MCP server's %s result exceeded %d bytes", p.Tool.Name, maxResult)
			return nil
		}
		out.OK, out.Output = &okTrue, raw
		passOn(ctx, raw)
		return nil
	}
	// The server's own answer, when it is passed on (mcp serve), bounded
	// like the tool's output: an image or an embedded resource counts with
	// its base64 data.
	if passingOn(ctx) {
		raw, err = json.Marshal(res)
		if err != nil || len(raw) > maxResult {
			out.Error = fmt.Sprintf("tool output exceeded %d bytes", maxResult)
			return nil
		}
	}
	ok, result, msg := mcpproxy.ToolResult(res)
	if len(result) > maxResult {
		out.Error = fmt.Sprintf("tool output exceeded %d bytes", maxResult)
		return nil
	}
	out.OK = &ok
	out.Output, out.Error = result, msg
	if ok && out.ExitCode != nil && *out.ExitCode != 0 && *out.ExitCode != exitKilled {
		out.Error = fmt.Sprintf("the MCP server exited with code %d after the call", *out.ExitCode)
		out.OK = &okFalse
		return nil
	}
	passOn(ctx, raw) // the answer as the server sent it, isError included
	return nil
}

// exitKilled is a server stopped with SIGKILL after it did not exit on
// its own (128+9): not the server's failure.
const exitKilled = 137

// startFailed turns a failed server start into the outcome: a placement
// problem keeps its code; a server that would not start or initialize is
// a failed tool (it ran, the package is broken).
func startFailed(out *plan.Outcome, err error) error {
	var se *startError
	if !errors.As(err, &se) {
		return err
	}
	if se.exitCode != nil && *se.exitCode >= 0 {
		out.Ran = true
		out.ExitCode = se.exitCode
	}
	out.Stderr = se.stderr
	if se.cleanupErr != nil {
		return se.cleanupErr
	}
	if reason.CodeOf(se.err) == reason.Timeout {
		return se.err
	}
	out.Error = "the MCP server did not start: " + se.err.Error()
	return nil
}
