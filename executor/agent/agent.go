// Package agent is the executor of agent packages (specs/agent.md): it
// runs an agent's entrypoint in the sandbox — agents never run on the host
// — and serves its requests over the agent protocol: each run_tool a full
// nested pipeline run and each call_llm decided by Guard, both audited,
// through the kernel's Services (kernel/plan). The decisions and the audit
// stay the kernel's; this package runs the protocol.
package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// The agent protocol (specs/agent.md): the host writes the tool request
// as the first line of the agent's stdin, then one reply line per request
// the agent writes to its stdout, until the agent writes its result.
const (
	// AgentMaxLine bounds one line the agent writes (the tool output
	// limit: the result line is the agent's output).
	AgentMaxLine = toolio.MaxOutput
	// AgentMaxRefusals is how many refused requests one agent run may
	// make; the next request ends the run as a protocol violation, so a
	// refused agent cannot flood the audit log until its wall clock.
	AgentMaxRefusals = 16
	// DefaultAgentMaxToolCalls is limits.max_tool_calls when the manifest
	// sets none.
	DefaultAgentMaxToolCalls = 50
	// agentMaxIDBytes bounds a request id.
	agentMaxIDBytes = 128
	// agentDrainAfterResult bounds what the host still reads (and drops)
	// after the agent's result before it stops the agent.
	agentDrainAfterResult = 64 << 10
)

// Request types an agent writes.
const (
	agentRunTool = "run_tool"
	agentCallLLM = "call_llm"
	agentResult  = "result"
)

// errAgentProtocol marks a protocol violation: the run ends, the agent is
// stopped, the outcome is a failed run (exit 1), not a refusal.
var errAgentProtocol = errors.New("agent broke the agent protocol")

// errAgentStopped is what the backend's next write of agent output gets
// once the host has stopped reading: it makes the backend stop the agent.
var errAgentStopped = errors.New("the host stopped reading the agent's output")

// agentParentKey marks a context inside an agent run: an agent cannot start
// another agent (run_tool into an agent package is refused).
type agentParentKey struct{}

func agentParent(ctx context.Context) string {
	s, _ := ctx.Value(agentParentKey{}).(string)
	return s
}

// agentLimits are one agent run's effective limits.
type agentLimits struct {
	allowedPackages []string
	maxToolCalls    int
	// wallClock is limits.max_runtime_seconds, at most the sandbox
	// timeout; source says which one it is.
	wallClock time.Duration
	source    string
	llm       llmCeiling
}

func agentLimitsFor(p *plan.Plan) agentLimits {
	m := p.Package.Manifest
	l := agentLimits{maxToolCalls: DefaultAgentMaxToolCalls, wallClock: p.Timeout,
		source: "sandbox.limits.timeout_seconds"}
	if m.ToolAccess != nil {
		l.allowedPackages = m.ToolAccess.AllowedPackages
	}
	if m.Limits != nil {
		if m.Limits.MaxToolCalls != nil {
			l.maxToolCalls = *m.Limits.MaxToolCalls
		}
		if m.Limits.MaxRuntimeSeconds != nil {
			if d := time.Duration(*m.Limits.MaxRuntimeSeconds) * time.Second; d < l.wallClock {
				l.wallClock, l.source = d, "limits.max_runtime_seconds"
			}
		}
	}
	l.llm = llmCeilingFor(p.Agent.LLM, p.Package)
	return l
}

// agentMsg is one line from the agent. Which fields may be set depends on
// Type; check enforces that.
type agentMsg struct {
	ID       json.RawMessage `json:"id"`
	Type     string          `json:"type"`
	Package  string          `json:"package"`
	Tool     string          `json:"tool"`
	Input    json.RawMessage `json:"input"`
	Provider string          `json:"provider"`
	Model    string          `json:"model"`
	Messages []llmMessage    `json:"messages"`
	OK       *bool           `json:"ok"`
	Result   json.RawMessage `json:"result"`
	Error    string          `json:"error"`
}

type llmMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// agentReply is one line to the agent.
type agentReply struct {
	ID     json.RawMessage `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// parseAgentLine decodes and checks one line; every problem is a protocol
// violation naming the field.
func parseAgentLine(line []byte) (*agentMsg, error) {
	if !utf8.Valid(line) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var m agentMsg
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not one JSON object of the protocol: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *agentMsg) check() error {
	if m.Type != agentResult || len(m.ID) > 0 {
		if err := checkID(m.ID); err != nil {
			return err
		}
	}
	type field struct {
		name string
		set  bool
	}
	fields := []field{
		{"package", m.Package != ""}, {"tool", m.Tool != ""}, {"input", len(m.Input) > 0},
		{"provider", m.Provider != ""}, {"model", m.Model != ""}, {"messages", m.Messages != nil},
		{"ok", m.OK != nil}, {"result", len(m.Result) > 0}, {"error", m.Error != ""},
	}
	var allowed, required []string
	switch m.Type {
	case agentRunTool:
		// Without tool: the package's default tool (defaultTool).
		allowed, required = []string{"package", "tool", "input"}, []string{"package", "input"}
	case agentCallLLM:
		allowed, required = []string{"provider", "model", "messages"}, []string{"model", "messages"}
	case agentResult:
		allowed, required = []string{"ok", "result", "error"}, []string{"ok"}
	case "":
		return errors.New("type: missing (want run_tool, call_llm or result)")
	default:
		return fmt.Errorf("type: %q is not one of run_tool, call_llm, result", m.Type)
	}
	for _, f := range fields {
		if f.set && !slices.Contains(allowed, f.name) {
			return fmt.Errorf("%s: not allowed in a %s message", f.name, m.Type)
		}
		if !f.set && slices.Contains(required, f.name) {
			return fmt.Errorf("%s: missing in a %s message", f.name, m.Type)
		}
	}
	switch m.Type {
	case agentRunTool:
		if b := bytes.TrimLeft(m.Input, " \t\r\n"); len(b) == 0 || b[0] != '{' {
			return errors.New("input: must be a JSON object")
		}
	case agentCallLLM:
		if len(m.Messages) == 0 {
			return errors.New("messages: must not be empty")
		}
	case agentResult:
		if *m.OK && m.Error != "" {
			return errors.New("error: not allowed when ok is true")
		}
		if !*m.OK && m.Error == "" {
			return errors.New("error: missing when ok is false")
		}
	}
	return nil
}

// checkID accepts a string or an integer of at most agentMaxIDBytes.
func checkID(id json.RawMessage) error {
	if len(id) == 0 || string(id) == "null" {
		return errors.New("id: missing")
	}
	if len(id) > agentMaxIDBytes {
		return fmt.Errorf("id: longer than %d bytes", agentMaxIDBytes)
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		if s == "" {
			return errors.New("id: empty string")
		}
		return nil
	}
	var n int64
	if json.Unmarshal(id, &n) == nil {
		return nil
	}
	return errors.New("id: must be a string or an integer")
}

// readAgentLine reads one '\n'-terminated line of at most max bytes
// (without the newline). A final line without a newline is a protocol
// violation; io.EOF means the agent closed its stdout between lines.
func readAgentLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max+1 || (len(line)+len(frag) > max && !bytes.HasSuffix(frag, []byte{'\n'})) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", errAgentProtocol, max)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("%w: the last line has no newline", errAgentProtocol)
		}
		return nil, err
	}
}

// agentSession is the host side of one agent run: it reads the agent's
// requests line by line, answers each before reading the next, and keeps
// the run's counters. Its methods run on one goroutine.
type agentSession struct {
	p         *plan.Plan
	lim       agentLimits
	toolCalls int
	llmCalls  int64
	refusals  int
	// llmAnswer is the prompt's answer for call_llm, asked at most once per
	// run (nil: not asked).
	llmAnswer *bool

	// Set by serve.
	result   *agentMsg // the agent's result, nil if none
	protoErr error     // a protocol violation, nil if none
	fatalErr error     // a host failure that ended the session (audit)
}

// serve runs the session: the first line (the tool request) to the agent,
// then requests and replies until the result, EOF, a violation or ctx's
// end. stop is called (once) when the host stops reading the agent's
// output; after it returns, the agent's stdin is closed.
func (s *agentSession) serve(ctx context.Context, agentOut io.Reader, agentIn io.WriteCloser, first []byte, stop func(error)) {
	defer agentIn.Close()
	if _, err := agentIn.Write(first); err != nil {
		return // the agent is already gone; the run's end says why
	}
	r := bufio.NewReaderSize(agentOut, 64<<10)
	for n := 1; ; n++ {
		line, err := readAgentLine(r, AgentMaxLine)
		if err != nil {
			if errors.Is(err, errAgentProtocol) {
				s.protoErr = fmt.Errorf("line %d: %w", n, err)
				stop(errAgentStopped)
			}
			return // EOF: the agent closed its stdout or ended
		}
		msg, err := parseAgentLine(line)
		if err != nil {
			s.protoErr = fmt.Errorf("%w: line %d: %w", errAgentProtocol, n, err)
			stop(errAgentStopped)
			return
		}
		if msg.Type == agentResult {
			s.result = msg
			_ = agentIn.Close()
			// The agent should exit now; what it still writes is dropped,
			// up to a bound, then it is stopped.
			_, _ = io.CopyN(io.Discard, r, agentDrainAfterResult)
			stop(errAgentStopped)
			return
		}
		if s.refusals >= AgentMaxRefusals {
			s.protoErr = fmt.Errorf("%w: line %d: more than %d refused requests", errAgentProtocol, n, AgentMaxRefusals)
			stop(errAgentStopped)
			return
		}
		var rep agentReply
		switch msg.Type {
		case agentRunTool:
			rep = s.runTool(ctx, msg)
		case agentCallLLM:
			rep = s.callLLM(ctx, msg)
		}
		if s.fatalErr != nil {
			stop(errAgentStopped)
			return
		}
		rep.ID = msg.ID
		if rep.OK && rep.Result == nil {
			rep.Result = json.RawMessage("null")
		}
		b, err := json.Marshal(rep)
		if err != nil {
			s.fatalErr = reason.New(reason.PluginUnavailable, "encode the reply to the agent: %w", err)
			stop(errAgentStopped)
			return
		}
		if _, err := agentIn.Write(append(b, '\n')); err != nil {
			return // the agent is gone
		}
	}
}

// refuse answers a request with a refusal and counts it.
func (s *agentSession) refuse(code reason.Code, msg string) agentReply {
	s.refusals++
	return agentReply{OK: false, Code: string(code), Error: msg}
}

// Executor runs agent plans.
type Executor struct {
	// backends builds the backend of a plan's placement (nil: backend.For).
	backends backend.Factory
}

// Execute runs an agent package's entrypoint in the sandbox and serves its
// requests (specs/agent.md). Agents never run on the host. A backend it
// cannot build for the placement fails the run before anything else.
func (e Executor) Execute(ctx context.Context, p *plan.Plan, out *plan.Outcome) error {
	b, err := e.backends.Build(p)
	if err != nil {
		return err
	}
	m := p.Package.Manifest
	if p.Placement != plan.PlacementSandbox || b == nil {
		return reason.New(reason.HostAgentExecutionUnsupported,
			"agent %s runs only in the agent sandbox, never with placement %q", m.PackageID, p.Placement)
	}
	if !p.Agent.SandboxEnabled {
		return reason.New(reason.AgentSandboxDisabled, "agent %s runs only in the agent sandbox, and agent_sandbox.enabled is false", m.PackageID)
	}
	if parent := agentParent(ctx); parent != "" {
		return reason.New(reason.PolicyDenied, "agent %s cannot be started by agent %s: agents call tools, not agents", m.PackageID, parent)
	}
	if (m.Runtime != manifest.RuntimeExec && m.Runtime != manifest.RuntimePython) || m.AgentEntrypoint == "" {
		return reason.New(reason.RuntimeUnsupported, "agent %s: runtime %q is %w", m.PackageID, m.Runtime, errUnavailable)
	}
	first, err := toolio.EncodeRequest(p.Tool.Name, p.Input)
	if err != nil {
		return reason.New(reason.InputDenied, "tool input: %w", err)
	}
	s := &agentSession{p: p, lim: agentLimitsFor(p)}
	args, err := agentArgs(p, s.lim)
	if err != nil {
		return err
	}
	if s.lim.llm.enabled {
		p.Services.PrestartBroker()
	}

	// The session's context ends when the agent's run does (nested tool
	// runs and LLM calls in flight are cancelled), and at the latest a
	// little after the wall clock.
	sctx, cancel := context.WithTimeout(context.WithValue(ctx, agentParentKey{}, m.PackageID), s.lim.wallClock+10*time.Second)
	defer cancel()
	inR, inW := io.Pipe()   // host → agent stdin
	outR, outW := io.Pipe() // agent stdout → host
	stopped := false
	stop := func(err error) {
		stopped = true
		_ = outR.CloseWithError(err)
		_ = inW.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve(sctx, outR, inW, first, stop)
	}()

	start := time.Now()
	exit, runErr := b.Run(ctx, &backend.Task{
		RunID:        "an-" + p.RequestID,
		PackageDir:   p.Package.Dir,
		Command:      backend.Command{Container: args},
		Limits:       p.Limits,
		Timeout:      s.lim.wallClock,
		MaxStderr:    toolio.MaxStderr,
		StdinStream:  inR,
		StdoutStream: outW,
	})
	// The agent is gone: the session reads EOF, its writes fail, and what
	// it still has in flight is cancelled.
	_ = outW.Close()
	_ = inR.CloseWithError(errors.New("the agent's run ended"))
	cancel()
	<-done

	ms := time.Since(start).Milliseconds()
	out.DurationMS = &ms
	okFalse := false
	out.OK = &okFalse
	if exit == nil {
		return runErr
	}
	out.Ran = true
	out.Stderr = string(exit.Stderr)
	code := exit.ExitCode
	out.ExitCode = &code
	if exit.RunErr != nil && !stopped {
		return exit.RunErr
	}
	if !exit.CleanupVerified {
		return reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the agent's container was removed after the run", p.BackendName)
	}
	if s.fatalErr != nil {
		return s.fatalErr
	}
	if exit.TimedOut {
		return reason.New(reason.Timeout, "agent %s was stopped at its wall clock of %s (%s)",
			m.PackageID, s.lim.wallClock, s.lim.source)
	}
	if err := backend.OOMError(exit.OOMKilled, exit.ExitCode, "agent "+m.PackageID, p.Limits); err != nil {
		return err
	}
	switch {
	case s.protoErr != nil:
		out.Error = s.protoErr.Error()
	case s.result == nil:
		out.Error = fmt.Sprintf("agent exited with code %d without a result", exit.ExitCode)
	case *s.result.OK:
		out.Output = s.result.Result
		if exit.ExitCode != 0 {
			out.Error = fmt.Sprintf("agent reported ok but exited with code %d", exit.ExitCode)
		} else {
			okTrue := true
			out.OK = &okTrue
		}
	default:
		out.Error = s.result.Error
	}
	return nil
}

// errUnavailable marks what arrives in a later version; such a run is
// refused.
var errUnavailable = errors.New("not available in this version of agentnode")

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
