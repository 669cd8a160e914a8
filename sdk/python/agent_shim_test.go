package python

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// agentFiles writes both shims into one directory, as the image has them.
func agentFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string][]byte{"agentnode_tool.py": Shim, "agentnode_agent.py": AgentShim} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agentnode_agent.py")
}

// hostMsg is one line the agent writes, decoded as strictly as the host's
// parser (kernel/dispatch): unknown keys are an error.
type hostMsg struct {
	ID       json.RawMessage   `json:"id"`
	Type     string            `json:"type"`
	Package  string            `json:"package"`
	Tool     *string           `json:"tool"`
	Input    json.RawMessage   `json:"input"`
	Provider string            `json:"provider"`
	Model    string            `json:"model"`
	Messages []json.RawMessage `json:"messages"`
	OK       *bool             `json:"ok"`
	Result   json.RawMessage   `json:"result"`
	Error    string            `json:"error"`
}

// hostReply answers one request: ok with result, or not ok with error
// and an optional reason code.
type hostReply struct {
	OK     bool
	Result string
	Error  string
	Code   string
}

// agentRun is what the harness saw: the requests in order (compact JSON
// without the id), the result line, stderr, the exit status.
type agentRun struct {
	requests []string
	result   hostMsg
	line     string
	stderr   string
	exit     int
}

// runAgent runs the agent shim as the sandbox does and plays the host's
// side of the agent protocol (specs/agent.md): the tool request first,
// then one reply per request, in order, from answer.
func runAgent(t *testing.T, shim, pack, entrypoint string, ctx *AgentContext, input string, answer func(m *hostMsg) hostReply) agentRun {
	t.Helper()
	argv, err := AgentCommand(hostPython, shim, pack, entrypoint, ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var run agentRun
	if _, err := io.WriteString(stdin, request(t, "notes_digest", input)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the agent ended without a result (%v); stderr:\n%s", err, stderr.String())
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var m hostMsg
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m.Type == "result" {
			run.result, run.line = m, line
			break
		}
		id := m.ID
		var all map[string]any
		if err := json.Unmarshal([]byte(line), &all); err != nil {
			t.Fatal(err)
		}
		delete(all, "id")
		b, _ := json.Marshal(all) // keys sorted
		run.requests = append(run.requests, string(b))
		a := answer(&m)
		rep := map[string]any{"id": id, "ok": a.OK}
		if a.OK {
			rep["result"] = json.RawMessage(a.Result)
		} else {
			rep["error"] = a.Error
			if a.Code != "" {
				rep["code"] = a.Code
			}
		}
		b, _ = json.Marshal(rep)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	// As the host does after the result: close stdin, read to EOF.
	stdin.Close()
	rest, _ := io.ReadAll(r)
	if len(rest) > 0 {
		t.Errorf("the agent wrote after its result: %q", rest)
	}
	err = cmd.Wait()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	run.exit, run.stderr = cmd.ProcessState.ExitCode(), stderr.String()
	return run
}

func digestContext() *AgentContext {
	return &AgentContext{
		Agent: "notes-digest-agent", RunID: "req-1", Goal: "Digest a text into one line.",
		SystemPrompt:    "You write one-line digests.\n",
		AllowedPackages: []string{"e2e-word-count", "e2e-keywords"}, MaxToolCalls: 5, MaxIterations: 4,
		StopOnConsecutiveErrors: 3,
		Retry:                   AgentRetry{Enabled: false, MaxRetries: 2, BackoffBase: 1, BackoffMax: 10},
		LLM:                     AgentLLM{Enabled: true, Model: "e2e-model", MaxCalls: 3},
	}
}

// textTools is the host side of the digest agent's tools and model.
func textTools(m *hostMsg) hostReply {
	switch {
	case m.Type == "run_tool" && m.Package == "e2e-word-count" && m.Tool == nil:
		return hostReply{OK: true, Result: `{"words":4,"chars":19}`}
	case m.Type == "run_tool" && *m.Tool == "count":
		return hostReply{OK: true, Result: `1`}
	case m.Type == "run_tool" && m.Package == "e2e-keywords" && *m.Tool == "keywords":
		return hostReply{OK: true, Result: `{"keywords":["alpha","beta"]}`}
	case m.Type == "call_llm":
		return hostReply{OK: true, Result: `{"role":"assistant","content":"one line"}`}
	}
	return hostReply{Error: "unexpected request", Code: "policy_denied"}
}

// TestAgentShimDigest runs the test agent (shaped like AgentNode's agent
// starter packs) against the harness: its two tool calls and its model
// call are protocol requests in order, its kwargs and goal are the SDK's,
// what it prints is on stderr, and its return value is the result line.
func TestAgentShimDigest(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := agentFiles(t)
	pack := filepath.Join(dir, "notes-digest-agent")
	run := runAgent(t, shim, pack, "notes_digest_agent.agent:run", digestContext(),
		`{"goal":"digest my note","text":"alpha beta alpha gamma","timeout":5,"llm":"mine"}`, textTools)
	if run.exit != 0 {
		t.Fatalf("exit %d; stderr:\n%s", run.exit, run.stderr)
	}
	want := []string{
		`{"input":{"text":"alpha beta alpha gamma"},"package":"e2e-word-count","type":"run_tool"}`,
		`{"input":{"text":"alpha beta alpha gamma","top":2},"package":"e2e-keywords","tool":"keywords","type":"run_tool"}`,
		`{"messages":[{"content":"You write one-line digests.\n","role":"system"},` +
			`{"content":"Digest in one line: alpha beta alpha gamma\nKeywords: alpha, beta","role":"user"}],"model":"e2e-model","type":"call_llm"}`,
	}
	if strings.Join(run.requests, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(run.requests, "\n"), strings.Join(want, "\n"))
	}
	wantLine := `{"type": "result", "ok": true, "result": {"digest": "one line", "stats": {"words": 4, "chars": 19}, ` +
		`"keywords": ["alpha", "beta"], "tool_calls": 2, "llm_calls": 1, "iterations": 3, "done": true}}` + "\n"
	if run.line != wantLine {
		t.Fatalf("result line\n%s\nwant\n%s", run.line, wantLine)
	}
	if !strings.Contains(run.stderr, "digesting 22 characters for: digest my note\n") {
		t.Errorf("the agent's print is not on stderr:\n%s", run.stderr)
	}
}

// TestAgentShimOutcomes: what the agent raises, overruns or misuses, as
// the SDK answers it, in a result line the host accepts; nothing is sent
// that the SDK would have refused itself.
func TestAgentShimOutcomes(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := agentFiles(t)
	pack := filepath.Join(dir, "notes-digest-agent")
	refuseAll := func(m *hostMsg) hostReply {
		if m.Type == "call_llm" {
			return hostReply{Error: "approval required", Code: "policy_prompt"}
		}
		return hostReply{Error: "the tool failed: boom"}
	}
	noLLM := digestContext()
	noLLM.LLM = AgentLLM{}
	cases := []struct {
		name, entrypoint string
		ctx              *AgentContext
		answer           func(*hostMsg) hostReply
		requests         int
		line             string
	}{
		{"raises", "notes_digest_agent.probes:raises", digestContext(), textTools, 0,
			`{"type": "result", "ok": false, "error": "LookupError: no notes for digest my note"}`},
		{"max_iterations", "notes_digest_agent.probes:loops", digestContext(), textTools, 0,
			`{"type": "result", "ok": false, "error": "AgentLimitExceeded: Agent 'notes-digest-agent' exceeded max_iterations (4)"}`},
		{"not allowed", "notes_digest_agent.probes:forbidden", digestContext(), textTools, 0,
			`{"type": "result", "ok": false, "error": "PermissionError: Agent 'notes-digest-agent' is not allowed to use package 'not-allowed-pack'. Allowed: ['e2e-word-count', 'e2e-keywords']"}`},
		{"max_tool_calls", "notes_digest_agent.probes:overrun", digestContext(), textTools, 5,
			`{"type": "result", "ok": false, "error": "AgentLimitExceeded: Agent 'notes-digest-agent' exceeded max_tool_calls (5)"}`},
		{"no LLM access", "notes_digest_agent.probes:no_llm", noLLM, textTools, 0,
			`{"type": "result", "ok": false, "error": "RuntimeError: Agent 'notes-digest-agent' requires an LLM but none is bound. Ensure the runtime provides an LLM when starting this agent."}`},
		{"failures and refusals", "notes_digest_agent.probes:refusals", digestContext(), refuseAll, 2,
			`{"type": "result", "ok": true, "result": {"tool": [false, "agentnode", "the tool failed: boom"], "llm": ["LLMCallError", "[policy_prompt] approval required", "policy_prompt"]}}`},
		{"not JSON", "notes_digest_agent.probes:odd_result", digestContext(), textTools, 0,
			`{"type": "result", "ok": true, "result": {"__agentnode_fallback_repr__": true, "repr": "{'when': {1, 2}}"}}`},
		{"no such function", "notes_digest_agent.agent:nope", digestContext(), textTools, 0,
			`{"type": "result", "ok": false, "error": "ImportError: Function 'nope' not found in module 'notes_digest_agent.agent'"}`},
		{"not module:function", "notes_digest_agent.agent", digestContext(), textTools, 0,
			`{"type": "result", "ok": false, "error": "ValueError: invalid agent entrypoint 'notes_digest_agent.agent': want module.path:function"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := runAgent(t, shim, pack, tc.entrypoint, tc.ctx, `{"goal":"digest my note"}`, tc.answer)
			if run.exit != 0 {
				t.Fatalf("exit %d; stderr:\n%s", run.exit, run.stderr)
			}
			if len(run.requests) != tc.requests {
				t.Errorf("%d requests, want %d: %q", len(run.requests), tc.requests, run.requests)
			}
			if run.line != tc.line+"\n" {
				t.Fatalf("result line\n%s\nwant\n%s\nstderr:\n%s", run.line, tc.line, run.stderr)
			}
			if ok := *run.result.OK; ok == (run.result.Error != "") {
				t.Fatalf("not a valid result line: %s", run.line)
			}
		})
	}
}

// TestAgentShimStreams: the agent's prints go to stderr and its reads of
// stdin get nothing, so it cannot write into or read from the protocol by
// accident; kwargs are the input without the runner's keys.
func TestAgentShimStreams(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := agentFiles(t)
	pack := filepath.Join(dir, "notes-digest-agent")
	run := runAgent(t, shim, pack, "notes_digest_agent.probes:streams", digestContext(), `{"a":1,"timeout":3}`, textTools)
	want := `{"type": "result", "ok": true, "result": {"stdin": "", "fd0": "", "kwargs": {"a": 1}, "goal": "Digest a text into one line."}}` + "\n"
	if run.line != want || len(run.requests) != 0 {
		t.Fatalf("result %s want %s (requests %q)", run.line, want, run.requests)
	}
	for _, s := range []string{"to stdout\n", "sys.stdout\n", "fd 1\n"} {
		if !strings.Contains(run.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, run.stderr)
		}
	}
}

// TestAgentCommand pins the argv and the context bound.
func TestAgentCommand(t *testing.T) {
	argv, err := AgentCommand(Interpreter, AgentShimPath, "/pack", "m.agent:run", &AgentContext{Agent: "a", MaxToolCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%q", []string{"/usr/bin/python3", "-I", "-S", "-B", "/usr/lib/agentnode/agentnode_agent.py", "/pack", "m.agent:run",
		`{"agent":"a","run_id":"","goal":"","allowed_packages":null,"max_tool_calls":2,"max_iterations":0,"stop_on_consecutive_errors":0,` +
			`"retry":{"enabled":false,"max_retries":0,"backoff_base":0,"backoff_max":0},"llm":{"enabled":false,"max_calls":0}}`})
	if got := fmt.Sprintf("%q", argv); got != want {
		t.Fatalf("AgentCommand = %s\nwant %s", got, want)
	}
	if _, err := AgentCommand(Interpreter, AgentShimPath, "/pack", "m:f", &AgentContext{Goal: strings.Repeat("g", MaxAgentContext)}); err == nil {
		t.Fatal("a context above MaxAgentContext was accepted")
	}
}
