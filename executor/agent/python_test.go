package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/sdk/python"
)

// installToolpack installs an exec toolpack with the named tools into the
// state's home.
func installToolpack(t *testing.T, st *testRun, id string, tools ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("manifest_version: \"0.2\"\npackage_id: " + id + "\npackage_type: toolpack\nname: T\npublisher: acme\n" +
		"version: 1.0.0\nsummary: For the agent tests.\nruntime: exec\ncapabilities:\n  tools:\n")
	for _, name := range tools {
		b.WriteString("    - name: " + name + "\n      description: D.\n      entrypoint: bin/tool\n      input_schema: {type: object}\n")
	}
	b.WriteString("permissions:\n  network: {level: none}\n  filesystem: {level: none}\n  code_execution: {level: none}\n")
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "tool"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := pkginstall.Open(home.PackagesDir(st.dir)).Install(src, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRunToolDefaultTool: a run_tool without a tool (AgentNode's
// run_tool(slug)) calls the package's only tool, as a nested run of that
// tool; a package with several tools and no package-level one is refused
// and audited, before any pipeline starts.
func TestRunToolDefaultTool(t *testing.T) {
	if _, err := parseAgentLine([]byte(`{"id":1,"type":"run_tool","package":"p","input":{}}`)); err != nil {
		t.Fatalf("run_tool without tool: %v", err)
	}
	m := testAgentManifest()
	m.ToolAccess.AllowedPackages = []string{"one-tool", "two-tools", "not-there"}
	m.Limits.MaxToolCalls = intp(5)
	st := agentState(t, m, nil)
	installToolpack(t, st, "one-tool", "count")
	installToolpack(t, st, "two-tools", "count", "keywords")
	a := startSession(t, st)

	a.send(`{"id":1,"type":"run_tool","package":"one-tool","input":{}}`)
	nested := records(t, st, "decision")
	links := records(t, st, "agent_tool_call")
	if len(nested) != 1 || nested[0].Package != "one-tool" || nested[0].Tool != "count" ||
		len(links) != 1 || !strings.Contains(links[0].Reason, "run_tool one-tool/count (call 1 of 5)") {
		t.Fatalf("nested %+v links %+v", nested, links)
	}

	rep := a.send(`{"id":2,"type":"run_tool","package":"two-tools","input":{}}`)
	if rep["ok"] != false || rep["code"] != "policy_denied" ||
		rep["error"] != "run_tool two-tools: package two-tools has 2 tools (count, keywords) and the request names none" {
		t.Fatalf("two tools: %v", rep)
	}
	rep = a.send(`{"id":3,"type":"run_tool","package":"not-there","input":{}}`)
	if rep["ok"] != false || rep["code"] != "artifact_mismatch" {
		t.Fatalf("not installed: %v", rep)
	}
	links = records(t, st, "agent_tool_call")
	if len(links) != 3 || links[1].Decision != "deny" || links[1].Code != "policy_denied" || links[2].Code != "artifact_mismatch" {
		t.Fatalf("links %+v", links)
	}
	if n := len(records(t, st, "decision")); n != 1 {
		t.Fatalf("a refused default tool reached a pipeline (%d decision records)", n)
	}
	// Refusals are not calls: the next one is call 2.
	a.send(`{"id":4,"type":"run_tool","package":"one-tool","tool":"count","input":{}}`)
	links = records(t, st, "agent_tool_call")
	if !strings.Contains(links[3].Reason, "(call 2 of 5)") {
		t.Fatalf("link %+v", links[3])
	}
}

// TestAgentArgsPython: a runtime python agent runs the agent shim of the
// Python image with the context the manifest and the run's effective
// limits give; AgentNode's agent.llm.required asks for LLM access like
// llm_access.enabled (the host's switch still decides).
func TestAgentArgsPython(t *testing.T) {
	m := testAgentManifest()
	m.Runtime = manifest.RuntimePython
	m.AgentEntrypoint = "digest_agent.agent:run"
	m.LLMAccess = nil
	m.Limits = &manifest.Limits{MaxToolCalls: intp(4), MaxIterations: intp(6)}
	m.Agent = json.RawMessage(`{"entrypoint":"digest_agent.agent:run","goal":"Digest.","system_prompt":"Be brief.",` +
		`"tier":"llm_plus_tools","llm":{"required":true},"termination":{"stop_on_consecutive_errors":2},` +
		`"error_handling":{"retry":{"enabled":false}},"isolation":"thread"}`)
	st := agentState(t, m, func(c *config.Config) {
		c.AgentSandbox.LLM.Enabled = true
		c.AgentSandbox.LLM.AllowedModels = []string{"m1", "m2"}
	})
	lim := agentLimitsFor(st.p)
	argv, err := agentArgs(st.p, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 8 || argv[0] != python.Interpreter || argv[4] != python.AgentShimPath || argv[5] != "/pack" || argv[6] != "digest_agent.agent:run" {
		t.Fatalf("argv %q", argv)
	}
	var ctx python.AgentContext
	if err := json.Unmarshal([]byte(argv[7]), &ctx); err != nil {
		t.Fatal(err)
	}
	want := python.AgentContext{Agent: "test-agent", RunID: st.p.RequestID, Goal: "Digest.", SystemPrompt: "Be brief.",
		AllowedPackages: []string{"allowed-tools"}, MaxToolCalls: 4, MaxIterations: 6, StopOnConsecutiveErrors: 2,
		Retry: python.AgentRetry{Enabled: false, MaxRetries: 2, BackoffBase: 1, BackoffMax: 10},
		LLM:   python.AgentLLM{Enabled: true, Model: "m1", MaxCalls: 20}}
	if g, w := jsonOf(t, ctx), jsonOf(t, want); g != w {
		t.Fatalf("context\n%s\nwant\n%s", g, w)
	}

	// Without agent.llm.required (and no llm_access) there is no LLM; a
	// host that has LLM calls off says no whatever the agent asks; the
	// section's keys of the wrong type are as if absent.
	m.Agent = json.RawMessage(`{"entrypoint":"digest_agent.agent:run","goal":7,"termination":"soon"}`)
	if c := llmCeilingFor(st.p.Agent.LLM, st.p.Package); c.enabled {
		t.Fatalf("LLM access without asking: %+v", c)
	}
	argv, err = agentArgs(st.p, agentLimitsFor(st.p))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(argv[7], `"goal":"",`) || !strings.Contains(argv[7], `"stop_on_consecutive_errors":3,`) ||
		!strings.Contains(argv[7], `"llm":{"enabled":false,"max_calls":0}`) {
		t.Fatalf("context %s", argv[7])
	}
	m.Agent = json.RawMessage(`{"tier":"llm_only"}`)
	st.p.Agent.LLM.Enabled = false
	if c := llmCeilingFor(st.p.Agent.LLM, st.p.Package); c.enabled || !strings.Contains(c.why, "agent_sandbox.llm.enabled is false") {
		t.Fatalf("host off: %+v", c)
	}
	st.p.Agent.LLM.Enabled = true
	if c := llmCeilingFor(st.p.Agent.LLM, st.p.Package); !c.enabled {
		t.Fatalf("tier llm_only: %+v", c)
	}

	// An exec agent keeps its entrypoint path.
	m.Runtime = manifest.RuntimeExec
	m.AgentEntrypoint = "bin/agent"
	if argv, _ := agentArgs(st.p, lim); strings.Join(argv, " ") != "/pack/bin/agent" {
		t.Fatalf("exec argv %q", argv)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
