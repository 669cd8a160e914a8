package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

func intp(n int) *int { return &n }

// testAgentManifest is an agent that may call e2e-tools, 2 tool calls,
// LLM access on.
func testAgentManifest() *manifest.Manifest {
	return &manifest.Manifest{
		PackageID: "test-agent", PackageType: manifest.TypeAgent, Runtime: manifest.RuntimeExec,
		AgentEntrypoint: "bin/agent",
		ToolAccess:      &manifest.ToolAccess{AllowedPackages: []string{"allowed-tools"}},
		LLMAccess:       &manifest.LLMAccess{Enabled: true},
		Limits:          &manifest.Limits{MaxToolCalls: intp(2)},
	}
}

// testRun is an agent run at its execute stage on a real home (config,
// audit log) after the decision record: its plan, and the kernel's side
// (testServices) made of real parts — the audit log, nested runs of the
// real pipeline (kernel/dispatch), the store, Guard's policy engine.
type testRun struct {
	p       *plan.Plan
	dir     string // AGENTNODE_HOME
	cfg     *config.Config
	log     *audit.Log
	plugins *pluginhost.Host
}

func agentState(t testing.TB, m *manifest.Manifest, edit func(*config.Config)) *testRun {
	t.Helper()
	dir := t.TempDir()
	path := home.ConfigPath(dir)
	if _, _, err := configedit.Setup(path); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c)
		if err := configedit.Save(path, c); err != nil {
			t.Fatal(err)
		}
	}
	// As the kernel opens it: the nested runs append to the same log.
	log, err := audit.Open(home.AuditDir(dir), audit.Options{Anchor: audit.HomeAnchor(home.AuditAnchorPath(dir))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	st := &testRun{dir: dir, cfg: c, log: log}
	st.p = &plan.Plan{
		RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()),
		Package:   &store.Package{ID: m.PackageID, Version: "0.1.0", Manifest: m},
		Tool:      &manifest.Tool{Name: "act"},
		Placement: plan.PlacementSandbox, BackendName: "libcontainer", Trust: "unknown",
		Timeout: time.Duration(c.Sandbox.Limits.TimeoutSeconds) * time.Second,
		Agent:   plan.AgentSettings{SandboxEnabled: c.AgentSandbox.Enabled, LLM: c.AgentSandbox.LLM, Providers: c.LLM.Providers},
	}
	st.p.Services = &testServices{st}
	return st
}

// testServices is plan.Services of a testRun.
type testServices struct{ st *testRun }

func (s *testServices) Record(event, verb string) *audit.Record {
	p := s.st.p
	return &audit.Record{Event: event, RequestID: p.RequestID, Package: p.Package.ID, Version: p.Package.Version,
		Tool: verb, Trust: p.Trust, Placement: p.Placement, Backend: p.BackendName, Decision: "allow"}
}

func (s *testServices) Append(r *audit.Record) error { return s.st.log.Append(r) }

func (s *testServices) RunTool(ctx context.Context, pkg, tool string, input json.RawMessage) (*plan.ToolResult, error) {
	k := &dispatch.Kernel{HomeDir: s.st.dir, StageTimeout: 5 * time.Second}
	res, err := k.Run(ctx, &dispatch.Request{Package: pkg, Tool: tool, Input: input})
	return &plan.ToolResult{RequestID: res.RequestID, Decision: res.Decision, Code: res.Code, OK: res.OK,
		Output: res.Output, Error: res.Error}, err
}

func (s *testServices) Installed(id string) (*store.Package, error) {
	return store.Open(home.PackagesDir(s.st.dir)).Get(id)
}

// DecideLLM is Guard's policy engine on the config's guard settings (the
// kernel's own mapping of the config is tested in kernel/dispatch).
func (s *testServices) DecideLLM() policy.Decision {
	c := s.st.cfg
	global := map[policy.Action]policy.Verdict{}
	for a, v := range c.Guard.Policy() {
		global[policy.Action(a)], _ = policy.ParseVerdict(v)
	}
	overrides := map[string]policy.Verdict{}
	for tool, o := range c.Guard.ToolOverrides {
		overrides[tool], _ = policy.ParseVerdict(o.Decision)
	}
	return policy.Decide(policy.Input{
		Package: s.st.p.Package.ID, Tool: LLMCallTool, Actions: []policy.Action{policy.CredentialUse},
		TrustLevel: s.st.p.Trust, Strict: c.Guard.Strict, Global: global, Overrides: overrides,
		PreApproved: []policy.Action{policy.CredentialUse},
	})
}

func (s *testServices) Ask(context.Context, string) (bool, bool, error) { return false, false, nil }

func (s *testServices) Broker(ctx context.Context) (*broker.Client, error) {
	if s.st.plugins == nil {
		return nil, reason.New(reason.PluginUnavailable, "no plugin host: the LLM broker cannot be started")
	}
	return s.st.plugins.Broker(ctx, "llm")
}

func (s *testServices) PrestartBroker() {}

// EgressAudit: an agent never has sealed egress.
func (s *testServices) EgressAudit() (*plan.EgressAudit, error) {
	return nil, reason.New(reason.EgressDenied, "agents have no sealed egress")
}

// fakeAgent is the agent's side of a session: the test writes raw lines as
// the agent would (the attacker's side) and reads the host's replies.
type fakeAgent struct {
	t       testing.TB
	out     *io.PipeWriter // the agent's stdout
	in      *bufio.Reader  // the agent's stdin
	done    chan struct{}
	stopErr error
	s       *agentSession
}

func startSession(t testing.TB, st *testRun) *fakeAgent {
	t.Helper()
	s := &agentSession{p: st.p, lim: agentLimitsFor(st.p)}
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	a := &fakeAgent{t: t, out: outW, in: bufio.NewReader(inR), done: make(chan struct{}), s: s}
	stop := func(err error) {
		a.stopErr = err
		_ = outR.CloseWithError(err)
		_ = inW.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(a.done)
		s.serve(ctx, outR, inW, []byte(`{"tool":"act","input":{}}`+"\n"), stop)
	}()
	t.Cleanup(func() {
		cancel()
		_ = outW.Close()
		_ = inR.Close()
		<-a.done
	})
	if l, err := a.in.ReadString('\n'); err != nil || l != `{"tool":"act","input":{}}`+"\n" {
		t.Fatalf("first line %q %v", l, err)
	}
	return a
}

// send writes one line and returns the reply (nil once the host has
// closed the agent's stdin).
func (a *fakeAgent) send(line string) map[string]any {
	a.t.Helper()
	if _, err := io.WriteString(a.out, line+"\n"); err != nil {
		return nil
	}
	l, err := a.in.ReadString('\n')
	if err != nil {
		return nil
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(l), &rep); err != nil {
		a.t.Fatalf("reply %q: %v", l, err)
	}
	return rep
}

// wait waits for the session to end. A session that never ends is caught
// by go test's -timeout, which dumps every goroutine, rather than by a
// wall-clock bound here that a loaded machine could exceed.
func (a *fakeAgent) wait() {
	a.t.Helper()
	<-a.done
}

func records(t testing.TB, st *testRun, event string) []audit.Record {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(st.dir), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, r := range recs {
		if r.Event == event {
			out = append(out, r)
		}
	}
	return out
}

func TestParseAgentLine(t *testing.T) {
	ok := []string{
		`{"id":"a","type":"run_tool","package":"p","tool":"t","input":{}}`,
		`{"id":7,"type":"call_llm","model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"id":"b","type":"call_llm","provider":"local","model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"type":"result","ok":true,"result":[1,2]}`,
		`{"type":"result","ok":false,"error":"no"}`,
		`{"id":"c","type":"result","ok":true}`,
	}
	for _, l := range ok {
		if _, err := parseAgentLine([]byte(l)); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	bad := map[string]string{
		`{"id":"a","type":"run_tool","package":"p","tool":"t"}`:                        "input: missing",
		`{"id":"a","type":"run_tool","package":"p","tool":"t","input":[]}`:             "input: must be a JSON object",
		`{"id":"a","type":"run_tool","package":"p","tool":"t","input":{},"model":"m"}`: "model: not allowed in a run_tool message",
		`{"id":"a","type":"run_tool","package":"p","tool":"t","input":{},"env":{}}`:    `unknown field "env"`,
		`{"type":"run_tool","package":"p","tool":"t","input":{}}`:                      "id: missing",
		`{"id":"","type":"run_tool","package":"p","tool":"t","input":{}}`:              "id: empty string",
		`{"id":{"x":1},"type":"run_tool","package":"p","tool":"t","input":{}}`:         "id: must be a string or an integer",
		`{"id":"` + strings.Repeat("x", 200) + `","type":"result","ok":true}`:          "id: longer than 128 bytes",
		`{"id":"a","type":"call_llm","model":"m","messages":[]}`:                       "messages: must not be empty",
		`{"id":"a","type":"call_llm","messages":[{"role":"user","content":"x"}]}`:      "model: missing",
		`{"id":"a","type":"shell","cmd":"id"}`:                                         `unknown field "cmd"`,
		`{"id":"a","type":"shell"}`:                                                    `type: "shell" is not one of`,
		`{"id":"a"}`:                                                                   "type: missing",
		`{"type":"result","ok":true,"error":"x"}`:                                      "error: not allowed when ok is true",
		`{"type":"result","ok":false}`:                                                 "error: missing when ok is false",
		`{"type":"result"}`:                                                            "ok: missing",
		`{"type":"result","ok":true} {"type":"result","ok":true}`:                      "more than one JSON value",
		`[1]`: "not one JSON object",
		"{\"id\":\"a\",\"type\":\"result\",\"ok\":false,\"error\":\"\xff\"}":                             "not valid UTF-8",
		`{"id":"a","type":"call_llm","model":"m","messages":[{"role":"user","content":"x","name":"n"}]}`: `unknown field "name"`,
	}
	for l, want := range bad {
		_, err := parseAgentLine([]byte(l))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: error %v, want %q", l, err, want)
		}
	}
}

func TestReadAgentLine(t *testing.T) {
	const max = 10
	cases := []struct {
		in    string
		lines []string
		err   string
	}{
		{"abc\ndef\n", []string{"abc", "def"}, "EOF"},
		{strings.Repeat("x", max) + "\n", []string{strings.Repeat("x", max)}, "EOF"},
		{strings.Repeat("x", max+1) + "\n", nil, "longer than 10 bytes"},
		{strings.Repeat("x", 100), nil, "longer than 10 bytes"},
		{"abc", nil, "the last line has no newline"},
		{"", nil, "EOF"},
	}
	for _, c := range cases {
		// A tiny buffer makes lines span several ReadSlice fragments.
		r := bufio.NewReaderSize(strings.NewReader(c.in), 16)
		var got []string
		var err error
		for {
			var l []byte
			if l, err = readAgentLine(r, max); err != nil {
				break
			}
			got = append(got, string(l))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.lines) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: lines %q err %v, want %q %q", c.in, got, err, c.lines, c.err)
		}
		if c.err != "EOF" && !errors.Is(err, errAgentProtocol) {
			t.Errorf("%q: %v is not a protocol violation", c.in, err)
		}
	}
}

type ceilingCase struct {
	name      string
	host      config.AgentLLM
	m         *manifest.LLMAccess
	enabled   bool
	calls, in int64
	models    []string // nil: any model
}

func TestLLMCeiling(t *testing.T) {
	host := config.AgentLLM{Enabled: true, MaxCalls: 20, MaxInputChars: 24000, MaxOutputChars: 24000}
	withModels := host
	withModels.AllowedModels = []string{"b", "c"}
	cases := []ceilingCase{
		{"host off", config.AgentLLM{MaxCalls: 20}, &manifest.LLMAccess{Enabled: true}, false, 20, 0, nil},
		{"manifest off", host, &manifest.LLMAccess{}, false, 20, 24000, nil},
		{"no llm_access", host, nil, false, 20, 24000, nil},
		{"host defaults", host, &manifest.LLMAccess{Enabled: true}, true, 20, 24000, nil},
		{"manifest lower", host, &manifest.LLMAccess{Enabled: true, MaxCalls: intp(3), MaxInputChars: intp(100)}, true, 3, 100, nil},
		{"manifest cannot raise", host, &manifest.LLMAccess{Enabled: true, MaxCalls: intp(500)}, true, 20, 24000, nil},
		{"manifest models", host, &manifest.LLMAccess{Enabled: true, AllowedModels: []string{"a", "b"}}, true, 20, 24000, []string{"a", "b"}},
		{"intersection", withModels, &manifest.LLMAccess{Enabled: true, AllowedModels: []string{"a", "b"}}, true, 20, 24000, []string{"b"}},
		{"disjoint", withModels, &manifest.LLMAccess{Enabled: true, AllowedModels: []string{"a"}}, true, 20, 24000, []string{}},
		{"host models only", withModels, &manifest.LLMAccess{Enabled: true}, true, 20, 24000, []string{"b", "c"}},
	}
	for _, c := range cases {
		m := testAgentManifest()
		m.LLMAccess = c.m
		got := llmCeilingFor(c.host, &store.Package{ID: "a", Manifest: m})
		if got.enabled != c.enabled || got.maxCalls != c.calls || (c.enabled && got.maxInputChars != c.in) {
			t.Errorf("%s: %+v", c.name, got)
		}
		if (c.models == nil) != (got.models == nil) || fmt.Sprint(got.models) != fmt.Sprint(c.models) {
			t.Errorf("%s: models %q, want %q", c.name, got.models, c.models)
		}
		if !got.enabled && got.why == "" {
			t.Errorf("%s: disabled without a reason", c.name)
		}
	}
}

// TestRunToolRefusedHostSide: a package outside allowed_packages is
// refused, answered, audited, and its pipeline never starts (the package
// does not even exist: no nested record appears).
func TestRunToolRefusedHostSide(t *testing.T) {
	for _, allowed := range [][]string{{"allowed-tools"}, nil} {
		m := testAgentManifest()
		m.ToolAccess.AllowedPackages = allowed
		st := agentState(t, m, nil)
		a := startSession(t, st)
		rep := a.send(`{"id":"x1","type":"run_tool","package":"other-tools","tool":"t","input":{}}`)
		if rep["id"] != "x1" || rep["ok"] != false || rep["code"] != "policy_denied" || !strings.Contains(rep["error"].(string), "tool_access.allowed_packages") {
			t.Fatalf("allowed %v: reply %v", allowed, rep)
		}
		recs := records(t, st, "agent_tool_call")
		if len(recs) != 1 || recs[0].Decision != "deny" || recs[0].Code != "policy_denied" || recs[0].RequestID != st.p.RequestID ||
			recs[0].Package != "test-agent" || recs[0].Tool != "run_tool" {
			t.Fatalf("audit %+v", recs)
		}
		if n := len(records(t, st, "decision")); n != 0 {
			t.Fatalf("a refused run_tool reached a pipeline: %d decision records", n)
		}
	}
}

// TestRunToolNestedPipeline: an allowed call is a full nested Run: here
// the target is not installed, so the real pipeline refuses it with its
// own decision record, linked by the agent's agent_tool_call record.
// max_tool_calls (2) then refuses the third call host-side.
func TestRunToolNestedPipeline(t *testing.T) {
	st := agentState(t, testAgentManifest(), nil)
	a := startSession(t, st)
	for i := 1; i <= 2; i++ {
		rep := a.send(fmt.Sprintf(`{"id":%d,"type":"run_tool","package":"allowed-tools","tool":"t","input":{}}`, i))
		if rep["id"] != float64(i) || rep["ok"] != false || rep["code"] != "artifact_mismatch" {
			t.Fatalf("call %d: reply %v", i, rep)
		}
	}
	nested := records(t, st, "decision")
	links := records(t, st, "agent_tool_call")
	if len(nested) != 2 || nested[0].Package != "allowed-tools" || nested[0].Code != "artifact_mismatch" {
		t.Fatalf("nested records %+v", nested)
	}
	if len(links) != 2 || !strings.Contains(links[1].Reason, "request "+nested[1].RequestID) || links[1].Code != "artifact_mismatch" ||
		!strings.Contains(links[1].Reason, "(call 2 of 2)") {
		t.Fatalf("link records %+v", links)
	}
	rep := a.send(`{"id":3,"type":"run_tool","package":"allowed-tools","tool":"t","input":{}}`)
	if rep["code"] != "rate_limited" || !strings.Contains(rep["error"].(string), "limits.max_tool_calls") {
		t.Fatalf("third call: %v", rep)
	}
	if n := len(records(t, st, "decision")); n != 2 {
		t.Fatalf("the call over max_tool_calls reached a pipeline (%d decision records)", n)
	}
}

// TestRunToolMaxToolCallsZero: max_tool_calls 0 (AgentNode's LLM-only
// agents) allows no tool call at all: the first is refused host-side and
// reaches no pipeline.
func TestRunToolMaxToolCallsZero(t *testing.T) {
	m := testAgentManifest()
	m.Limits.MaxToolCalls = intp(0)
	st := agentState(t, m, nil)
	a := startSession(t, st)
	rep := a.send(`{"id":1,"type":"run_tool","package":"allowed-tools","tool":"t","input":{}}`)
	if rep["ok"] != false || rep["code"] != "rate_limited" || !strings.Contains(rep["error"].(string), "limits.max_tool_calls") {
		t.Fatalf("first call: %v", rep)
	}
	if n := len(records(t, st, "decision")); n != 0 {
		t.Fatalf("a call under max_tool_calls 0 reached a pipeline (%d decision records)", n)
	}
}

// TestCallLLMRefusedHostSide covers the refusals before the broker: none
// needs a plugin, and each is one llm_call deny record without content.
func TestCallLLMRefusedHostSide(t *testing.T) {
	msg := `{"id":"l","type":"call_llm","model":"m","messages":[{"role":"user","content":"secret prompt text"}]}`
	local := func(c *config.Config) {
		c.AgentSandbox.LLM.Enabled = true
		c.LLM.Providers = map[string]config.Provider{"local": {API: "openai", BaseURL: "http://127.0.0.1:9/v1"}}
	}
	cases := []struct {
		name string
		edit func(*config.Config)
		line string
		code reason.Code
		want string
	}{
		{"host off", nil, msg, reason.PolicyDenied, "agent_sandbox.llm.enabled is false"},
		{"no budget", func(c *config.Config) { local(c); c.AgentSandbox.LLM.MaxCalls = 0 }, msg, reason.RateLimited, "used its 0 LLM calls"},
		{"model", func(c *config.Config) { local(c); c.AgentSandbox.LLM.AllowedModels = []string{"other"} }, msg, reason.PolicyDenied, `model "m" is not allowed`},
		{"input size", func(c *config.Config) { local(c); c.AgentSandbox.LLM.MaxInputChars = 5 }, msg, reason.InputDenied, "max_input_chars is 5"},
		{"role", local, `{"id":"l","type":"call_llm","model":"m","messages":[{"role":"tool","content":"x"}]}`, reason.InputDenied, `messages[0].role: "tool"`},
		{"provider unknown", local, `{"id":"l","type":"call_llm","provider":"nope","model":"m","messages":[{"role":"user","content":"x"}]}`, reason.PolicyDenied, `provider "nope" is not configured`},
		{"provider ambiguous", func(c *config.Config) {
			local(c)
			c.LLM.Providers["second"] = config.Provider{API: "openai", BaseURL: "http://127.0.0.1:9/v1"}
		}, msg, reason.PolicyDenied, "llm.providers has 2 entries (local, second)"},
		{"guard deny", func(c *config.Config) { local(c); c.Guard.CredentialUse = config.Deny }, msg, reason.PolicyDenied, "credential_use"},
		// Non-interactive, a prompt (strict mode) is a refusal.
		{"guard prompt", func(c *config.Config) { local(c); c.Guard.Strict = true }, msg, reason.PolicyPrompt, "not interactive"},
	}
	for _, c := range cases {
		st := agentState(t, testAgentManifest(), c.edit)
		a := startSession(t, st)
		rep := a.send(c.line)
		if rep["ok"] != false || rep["code"] != string(c.code) || !strings.Contains(fmt.Sprint(rep["error"]), c.want) {
			t.Errorf("%s: reply %v, want %s %q", c.name, rep, c.code, c.want)
			continue
		}
		recs := records(t, st, "llm_call")
		if len(recs) != 1 || recs[0].Decision != "deny" || recs[0].Code != string(c.code) || recs[0].Action != "credential_use" {
			t.Errorf("%s: audit %+v", c.name, recs)
		}
		if len(records(t, st, "llm_usage")) != 0 {
			t.Errorf("%s: a refused call has a usage record", c.name)
		}
		all, _ := auditverify.Tail(home.AuditDir(st.dir), 100)
		for _, r := range all {
			if strings.Contains(r.Reason, "secret prompt") {
				t.Errorf("%s: the audit holds message content: %q", c.name, r.Reason)
			}
		}
	}
}

// TestRefusalFloodEndsSession: an agent that keeps making refused requests
// is stopped after AgentMaxRefusals, so it cannot flood the audit log.
func TestRefusalFloodEndsSession(t *testing.T) {
	st := agentState(t, testAgentManifest(), nil)
	a := startSession(t, st)
	for i := 0; i < AgentMaxRefusals; i++ {
		if rep := a.send(`{"id":1,"type":"run_tool","package":"nope","tool":"t","input":{}}`); rep == nil || rep["ok"] != false {
			t.Fatalf("refusal %d: %v", i, rep)
		}
	}
	if rep := a.send(`{"id":1,"type":"run_tool","package":"nope","tool":"t","input":{}}`); rep != nil {
		t.Fatalf("request after %d refusals answered: %v", AgentMaxRefusals, rep)
	}
	a.wait()
	if !errors.Is(a.s.protoErr, errAgentProtocol) || !strings.Contains(a.s.protoErr.Error(), "refused requests") || a.stopErr == nil {
		t.Fatalf("protoErr %v stop %v", a.s.protoErr, a.stopErr)
	}
	if n := len(records(t, st, "agent_tool_call")); n != AgentMaxRefusals {
		t.Fatalf("%d records, want %d", n, AgentMaxRefusals)
	}
}

// TestProtocolViolationStopsAgent: a malformed line ends the session: the
// host stops reading (the backend stops the agent on its next write) and
// closes the agent's stdin.
func TestProtocolViolationStopsAgent(t *testing.T) {
	for _, line := range []string{`not json`, `{"id":1,"type":"exec","cmd":"sh"}`, strings.Repeat("x", AgentMaxLine+1)} {
		st := agentState(t, testAgentManifest(), nil)
		a := startSession(t, st)
		if rep := a.send(line); rep != nil {
			t.Fatalf("%.30s: answered %v", line, rep)
		}
		a.wait()
		if !errors.Is(a.s.protoErr, errAgentProtocol) || !strings.Contains(a.s.protoErr.Error(), "line 1") || !errors.Is(a.stopErr, errAgentStopped) {
			t.Fatalf("%.30s: protoErr %v stop %v", line, a.s.protoErr, a.stopErr)
		}
		if _, err := io.WriteString(a.out, "{}\n"); err == nil {
			t.Fatalf("%.30s: the host still reads the agent's output", line)
		}
	}
}

// TestResultEndsSession: the result line ends the session; the agent's
// stdin is closed.
func TestResultEndsSession(t *testing.T) {
	st := agentState(t, testAgentManifest(), nil)
	a := startSession(t, st)
	if _, err := io.WriteString(a.out, `{"type":"result","ok":true,"result":{"answer":42}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.in.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("stdin not closed after the result: %v", err)
	}
	_ = a.out.Close() // the agent exits
	a.wait()
	if a.s.result == nil || string(a.s.result.Result) != `{"answer":42}` || a.s.protoErr != nil {
		t.Fatalf("result %+v protoErr %v", a.s.result, a.s.protoErr)
	}
}

// TestAgentNeverOnHost: the executor refuses an agent that is not placed
// in the sandbox (defense in depth behind the placement stage), one
// without a sandbox backend (the backend it builds for the placement
// cannot be built: sandbox_unavailable, as when the kernel built it), one
// whose backend factory gives none, and one started from inside another
// agent's run.
func TestAgentNeverOnHost(t *testing.T) {
	st := agentState(t, testAgentManifest(), func(c *config.Config) { c.AgentSandbox.Enabled = true })
	st.p.Placement, st.p.Sandbox = plan.PlacementHost, nil
	if err := (Executor{}).Execute(context.Background(), st.p, &plan.Outcome{}); !errors.Is(err, reason.ErrHostAgentExecutionUnsupported) {
		t.Fatalf("host placement: %v", err)
	}
	st.p.Placement = plan.PlacementSandbox
	if err := (Executor{}).Execute(context.Background(), st.p, &plan.Outcome{}); !errors.Is(err, reason.ErrSandboxUnavailable) ||
		!strings.Contains(err.Error(), "no sandbox backend was placed") {
		t.Fatalf("no sandbox checked: %v", err)
	}
	none := Executor{backends: func(*plan.Plan) (backend.Backend, error) { return nil, nil }}
	if err := none.Execute(context.Background(), st.p, &plan.Outcome{}); !errors.Is(err, reason.ErrHostAgentExecutionUnsupported) {
		t.Fatalf("no backend: %v", err)
	}
	st.p.Sandbox = &sandbox.Client{}
	ctx := context.WithValue(context.Background(), agentParentKey{}, "outer-agent")
	if err := (Executor{}).Execute(ctx, st.p, &plan.Outcome{}); !errors.Is(err, reason.ErrPolicyDenied) {
		t.Fatalf("agent from an agent: %v", err)
	}
}
