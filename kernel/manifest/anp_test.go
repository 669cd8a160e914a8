package manifest

import (
	"strings"
	"testing"
)

// The manifests below are written in the shapes AgentNode's published
// packs use (specs/manifest.md, "AgentNode's manifests"): ANP 0.1 with one
// package-level entrypoint and every registry field spelled out, ANP 0.2
// with per-tool entrypoints and the registry's defaults left out, LLM-only
// agents with max_tool_calls 0, verification sections, replaces and
// dependencies as objects.

// anp01Toolpack is an ANP 0.1 toolpack: package-level entrypoint, a tool
// without one, every optional registry field written out.
const anp01Toolpack = `manifest_version: "0.1"
package_id: "word-tally-pack"
package_type: "toolpack"
name: "Word Tally Pack"
publisher: "example"
version: "1.0.0"
summary: "Count words, lines and characters of a text."
description: |
  Counts words, lines and characters.
  Returns a small report.

runtime: "python"
install_mode: "package"
hosting_type: "agentnode_hosted"
entrypoint: "word_tally_pack.tool"

capabilities:
  tools:
    - name: "tally_words"
      capability_id: "text_statistics"
      description: "Count the words, lines and characters of a text"
      input_schema:
        type: "object"
        properties:
          text:
            type: "string"
            description: "The text to count"
          unique:
            type: "boolean"
            default: false
            description: "Also count distinct words"
        required: ["text"]
      output_schema:
        type: "object"
        properties:
          words:
            type: "integer"
          lines:
            type: "integer"
  resources: []
  prompts: []

tags: ["text", "statistics"]
categories: ["text-processing"]

compatibility:
  frameworks: ["generic"]
  python: ">=3.10"

dependencies: []

permissions:
  network:
    level: "none"
    allowed_domains: []
  filesystem:
    level: "none"
  code_execution:
    level: "none"
  data_access:
    level: "input_only"
  user_approval:
    required: "never"
  external_integrations: []

upgrade_roles: ["text_statistics"]
recommended_for:
  - agent_type: "writing-assistant"
    missing_capability: "text_statistics"
replaces: []
install_strategy: "local"
fallback_behavior: "skip"
policy_requirements:
  min_trust_level: "unverified"
  requires_approval: false

security:
  signature: ""
  provenance:
    source_repo: "https://example.com/word-tally-pack"
    commit: ""
    build_system: "manual"

support:
  homepage: "https://example.com/word-tally-pack"
  issues: "https://example.com/word-tally-pack/issues"

deprecation_policy: "6-months-notice"
`

// anp02Toolpack is an ANP 0.2 toolpack of several tools, each with its own
// entrypoint, no permissions section (ANP's defaults) and a verification
// section with cases.
const anp02Toolpack = `manifest_version: "0.2"
package_id: "ledger-tools-pack"
package_type: "toolpack"
name: "Ledger Tools Pack"
publisher: "example"
version: "2.3.0"
summary: "Summarise and filter ledger entries given as JSON."
runtime: python
description: "Summarise and filter ledger entries given as JSON."
entrypoint: "ledger_tools_pack.tool"

capabilities:
  tools:
    - name: "sum_ledger"
      capability_id: "ledger_analysis"
      entrypoint: "ledger_tools_pack.tool:total"
      description: "Return the total of the entries."
      input_schema:
        type: "object"
        properties:
          entries: {type: "array", description: "Ledger entries"}
        required: ["entries"]

    - name: "filter_ledger"
      capability_id: "ledger_analysis"
      entrypoint: "ledger_tools_pack.tool:only"
      description: "Return the entries of one account."
      input_schema:
        type: "object"
        properties:
          entries: {type: "array", description: "Ledger entries"}
          account: {type: "string", description: "Account name"}
        required: ["entries", "account"]

verification:
  cases:
    - name: "sum_two_entries"
      tool: "sum_ledger"
      input:
        entries: [{amount: 2}, {amount: 3}]
      expected:
        return_type: "dict"
        required_keys: ["total"]

tags: ["ledger", "accounting"]
categories: ["data-analysis"]

compatibility:
  frameworks: ["generic"]
  python: ">=3.10"
  dependencies:
    - "tabulate>=0.9"
`

// llmOnlyAgent is an ANP 0.2 LLM-only agent: max_tool_calls 0, no tools
// allowed, an agent.verification section.
const llmOnlyAgent = `manifest_version: "0.2"
package_id: "haiku-writer-agent"
package_type: "agent"
name: "Haiku Writer Agent"
publisher: "example"
version: "1.4.0"
summary: "Write haiku about a topic, using LLM reasoning only."
description: |
  LLM-only agent (tier: llm_only).

runtime: "python"
install_mode: "package"
hosting_type: "agentnode_hosted"
entrypoint: "haiku_writer_agent.agent"

capabilities:
  tools:
    - name: "haiku_writer"
      capability_id: "haiku_writer"
      description: "Write haiku about a topic."
      entrypoint: "haiku_writer_agent.agent:run"
      input_schema:
        type: "object"
        properties:
          goal:
            type: "string"
            description: "The objective for the agent"
        required: ["goal"]
  resources: []
  prompts: []

agent:
  entrypoint: "haiku_writer_agent.agent:run"
  goal: "Write haiku"
  tier: "llm_only"
  system_prompt: |
    You write haiku. Three lines, five, seven and five syllables.
  llm:
    required: true
  tool_access:
    allowed_packages: []
  limits:
    max_iterations: 4
    max_tool_calls: 0
    max_runtime_seconds: 120
  termination:
    stop_on_final_answer: true
    stop_on_consecutive_errors: 2
  isolation: "thread"
  state:
    persistence: "none"
  verification:
    cases:
      - name: autumn_haiku
        goal: "Write a haiku about falling leaves in autumn"
        expected:
          required_keys: ["haiku", "done"]
          done: true

compatibility:
  frameworks: ["generic"]
  python: ">=3.10"
  dependencies: []

permissions:
  network:
    level: "none"
  filesystem:
    level: "none"
  code_execution:
    level: "none"
  data_access:
    level: "input_only"
  user_approval:
    required: "never"

tags: ["agent", "poetry"]
categories: ["content"]
`

// orchestratorAgent is an ANP 0.1 agent: a tool without its own
// entrypoint, dependencies as objects, replaces.
const orchestratorAgent = `manifest_version: "0.1"
package_id: "digest-agent-pack"
package_type: "agent"
name: "Digest Agent Pack"
publisher: "example"
version: "1.0.0"
summary: "Reference agent that searches, reads and summarises into a digest."
runtime: "python"
install_mode: "package"
hosting_type: "agentnode_hosted"
entrypoint: "digest_agent_pack.tool"

capabilities:
  tools:
    - name: "digest"
      capability_id: "digest_orchestration"
      description: "Search, read and summarise a topic into a digest"
      input_schema:
        type: "object"
        properties:
          topic:
            type: "string"
        required: ["topic"]
  resources: []
  prompts: []

agent:
  entrypoint: "digest_agent_pack.agent:run"
  goal: "Produce a digest of a topic."
  tool_access:
    allowed_packages:
      - "web-lookup-pack"
      - "text-summary-pack"
  limits:
    max_iterations: 3
    max_tool_calls: 10
    max_runtime_seconds: 60
  termination:
    conditions: ["goal_reached", "max_iterations"]

compatibility:
  frameworks: ["generic"]
  python: ">=3.10"

dependencies:
  - package_id: "web-lookup-pack"
    role: "web_lookup"
    is_required: true
  - package_id: "text-summary-pack"
    role: "summary"
    is_required: false
  - "plain-id-pack"

permissions:
  network:
    level: "restricted"
    allowed_domains: ["lookup.example.com"]
  filesystem:
    level: "temp"
  code_execution:
    level: "none"
  data_access:
    level: "input_only"
  user_approval:
    required: "never"
  external_integrations: []

replaces: ["old-digest-pack"]
install_strategy: "local"
fallback_behavior: "error"
`

// fixtureToolpack is an ANP 0.1 toolpack with the registry's legacy
// verification fixtures.
const fixtureToolpack = `manifest_version: "0.1"
package_id: "quote-lookup-pack"
package_type: "toolpack"
name: "Quote Lookup Pack"
publisher: "example"
version: "1.1.0"
summary: "Look up quotations by keyword."
runtime: "python"
entrypoint: "quote_lookup_pack.tool"
capabilities:
  tools:
    - name: "search_quotes"
      capability_id: "quote_search"
      description: "Find quotations containing a keyword"
      input_schema:
        type: "object"
        properties:
          keyword: {type: "string"}
        required: ["keyword"]
permissions:
  network: {level: "restricted", allowed_domains: ["quotes.example.org"]}
  filesystem: {level: "none"}
  code_execution: {level: "none"}
  data_access: {level: "input_only"}
  user_approval: {required: "never"}
verification:
  system_requirements: []
  fixtures:
    - name: "search_time"
      tool: "search_quotes"
      test_input:
        keyword: "time"
      cassette: "fixtures/cassettes/search_time.yaml"
      expected:
        return_type: "dict"
        required_keys: ["quotes"]
env_requirements:
  - name: "QUOTES_API_KEY"
    purpose: "Quote service access"
    required: false
`

func loadText(t *testing.T, text string) *Manifest {
	t.Helper()
	m, err := Load(packageDir(t, text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestANP01PackageLevelEntrypoint(t *testing.T) {
	m := loadText(t, anp01Toolpack)
	if m.Runtime != RuntimePython || m.Entrypoint != "word_tally_pack.tool" {
		t.Fatalf("runtime %q, entrypoint %q", m.Runtime, m.Entrypoint)
	}
	tool, ok := m.Tool("tally_words")
	if !ok || tool.Entrypoint != "word_tally_pack.tool" || !tool.FromPackage {
		t.Fatalf("tool %+v: want the package-level entrypoint, FromPackage", tool)
	}
	if m.Permissions.DataAccess == nil || m.Permissions.UserApproval == nil || m.Permissions.UserApproval.Required != "never" {
		t.Fatalf("permissions %+v", m.Permissions)
	}
}

func TestANP02PerToolEntrypointsAndDefaults(t *testing.T) {
	m := loadText(t, anp02Toolpack)
	for name, ep := range map[string]string{"sum_ledger": "ledger_tools_pack.tool:total", "filter_ledger": "ledger_tools_pack.tool:only"} {
		tool, ok := m.Tool(name)
		if !ok || tool.Entrypoint != ep || tool.FromPackage {
			t.Fatalf("tool %s = %+v, want its own entrypoint %s", name, tool, ep)
		}
	}
	// No permissions section: ANP 0.2's defaults, the lowest levels.
	p := m.Permissions
	if p.Network.Level != "none" || p.Filesystem.Level != "none" || p.CodeExecution.Level != "none" || len(p.Network.AllowedDomains) != 0 {
		t.Fatalf("permissions %+v, want none everywhere", p)
	}

	// Without runtime, a 0.2 manifest is python; a partial permissions
	// section keeps what it says and defaults the rest.
	text := strings.Replace(anp02Toolpack, "runtime: python\n", "", 1) +
		"permissions:\n  network: {level: restricted, allowed_domains: [ledger.example.com]}\n"
	m = loadText(t, text)
	if m.Runtime != RuntimePython || m.Permissions.Network.Level != "restricted" || m.Permissions.Filesystem.Level != "none" ||
		m.Permissions.CodeExecution.Level != "none" {
		t.Fatalf("runtime %q, permissions %+v", m.Runtime, m.Permissions)
	}
}

func TestANPAgentWithoutToolCalls(t *testing.T) {
	m := loadText(t, llmOnlyAgent)
	if m.Limits == nil || m.Limits.MaxToolCalls == nil || *m.Limits.MaxToolCalls != 0 {
		t.Fatalf("limits %+v: want max_tool_calls 0 kept (no tool calls), not dropped", m.Limits)
	}
	if m.ToolAccess == nil || len(m.ToolAccess.AllowedPackages) != 0 || m.AgentEntrypoint != "haiku_writer_agent.agent:run" {
		t.Fatalf("tool_access %+v, agent entrypoint %q", m.ToolAccess, m.AgentEntrypoint)
	}
	for _, n := range []string{"-1", "501"} {
		me := loadErr(t, packageDir(t, strings.Replace(llmOnlyAgent, "max_tool_calls: 0", "max_tool_calls: "+n, 1)))
		wantProblem(t, me, "agent.limits.max_tool_calls", "")
	}
}

func TestANPAgentDependencyObjectsAndReplaces(t *testing.T) {
	m := loadText(t, orchestratorAgent)
	tool, _ := m.Tool("digest")
	if tool == nil || tool.Entrypoint != "digest_agent_pack.tool" || !tool.FromPackage {
		t.Fatalf("tool %+v", tool)
	}
	if m.AgentEntrypoint != "digest_agent_pack.agent:run" || *m.Limits.MaxToolCalls != 10 {
		t.Fatalf("agent %q, limits %+v", m.AgentEntrypoint, m.Limits)
	}
	if !strings.Contains(string(m.Raw), `"replaces":["old-digest-pack"]`) || !strings.Contains(string(m.Raw), `"role":"web_lookup"`) {
		t.Fatalf("replaces or dependencies not kept in Raw: %s", m.Raw)
	}
}

func TestANPVerificationFixtures(t *testing.T) {
	m := loadText(t, fixtureToolpack)
	if len(m.EnvRequirements) != 1 || m.EnvRequirements[0].Name != "QUOTES_API_KEY" {
		t.Fatalf("env_requirements %+v", m.EnvRequirements)
	}
	if tool, _ := m.Tool("search_quotes"); tool == nil || !tool.FromPackage {
		t.Fatalf("tool %+v", tool)
	}
}

// Fields nobody defines are still refused, also inside the sections added
// for AgentNode.
func TestANPUnknownFieldsStillRefused(t *testing.T) {
	cases := []struct {
		text, field, msg string
	}{
		{strings.Replace(orchestratorAgent, "replaces:", "replace:", 1), "replace", "unknown field (did you mean replaces?)"},
		{strings.Replace(anp02Toolpack, "verification:\n  cases:", "verification:\n  cases_list: []\n  cases:", 1),
			"verification.cases_list", "unknown field"},
		{strings.Replace(anp02Toolpack, "verification:", "verifications:", 1), "verifications", "unknown field (did you mean verification?)"},
		{strings.Replace(orchestratorAgent, `    is_required: false`, `    is_required: false
    pinned: "1.0.0"`, 1), "dependencies[1].pinned", "unknown field"},
		{strings.Replace(orchestratorAgent, `  - "plain-id-pack"`, `  - 7`, 1), "dependencies[2]", "must be string or object"},
		{strings.Replace(fixtureToolpack, "    purpose:", "    purposes:", 1), "env_requirements[0].purposes", "unknown field"},
		{strings.Replace(anp01Toolpack, `      capability_id: "text_statistics"`, `      capability_id: "text_statistics"
      function: "run"`, 1), "capabilities.tools[0].function", "unknown field"},
	}
	for _, c := range cases {
		me := loadErr(t, packageDir(t, c.text))
		wantProblem(t, me, c.field, c.msg)
	}
}

func TestANPPythonEntrypoints(t *testing.T) {
	toolEP := func(ep string) string {
		return strings.Replace(anp02Toolpack, `"ledger_tools_pack.tool:total"`, `"`+ep+`"`, 1)
	}
	pkgEP := func(ep string) string {
		return strings.Replace(anp01Toolpack, `entrypoint: "word_tally_pack.tool"`, `entrypoint: "`+ep+`"`, 1)
	}
	good := []string{"ledger_tools_pack.tool", "tool:run", "tool", "_p.T1:_f2", "Pkg.mod:Run"}
	for _, ep := range good {
		if _, err := Load(packageDir(t, toolEP(ep))); err != nil {
			t.Errorf("tool entrypoint %q: %v", ep, err)
		}
		m, err := Load(packageDir(t, pkgEP(ep)))
		if err != nil {
			t.Errorf("package entrypoint %q: %v", ep, err)
		} else if m.Tools[0].Entrypoint != ep {
			t.Errorf("package entrypoint %q: tool got %q", ep, m.Tools[0].Entrypoint)
		}
	}
	const field = "capabilities.tools[0].entrypoint"
	bad := map[string]string{
		"a.b:":          "is not a Python entrypoint",
		"../x":          "not a file path",
		`pkg\\tool`:     "not a file path", // YAML "pkg\\tool" is pkg\tool
		"a..b":          "is not a Python entrypoint",
		".a":            "is not a Python entrypoint",
		"a.b:c:d":       "is not a Python entrypoint",
		"a.b:c.d":       "is not a Python entrypoint",
		"1pkg.tool":     "is not a Python entrypoint",
		"pkg.tool:1run": "is not a Python entrypoint",
		"pkg tool":      "is not a Python entrypoint",
		":run":          "is not a Python entrypoint",
		"pkg.tööl":      "is not a Python entrypoint",
	}
	for ep, msg := range bad {
		me := loadErr(t, packageDir(t, toolEP(ep)))
		wantProblem(t, me, field, msg)
		if !strings.Contains(me.Error(), field+": ") {
			t.Errorf("%q: message does not name the field: %v", ep, me)
		}
		me = loadErr(t, packageDir(t, pkgEP(ep)))
		wantProblem(t, me, "entrypoint", msg)
		if len(me.Problems) != 1 {
			t.Errorf("package entrypoint %q: want one problem (not one per tool), got\n%v", ep, me)
		}
	}
	// An agent entrypoint names its function.
	me := loadErr(t, packageDir(t, strings.Replace(llmOnlyAgent, "agent:\n  entrypoint: \"haiku_writer_agent.agent:run\"", "agent:\n  entrypoint: \"haiku_writer_agent.agent\"", 1)))
	wantProblem(t, me, "agent.entrypoint", "write module.path:function")
}

func TestANPMissingEntrypoints(t *testing.T) {
	// 0.2, several tools: each names its own (ANP 0.2: no silent fallback).
	text := strings.Replace(anp02Toolpack, `      entrypoint: "ledger_tools_pack.tool:only"`+"\n", "", 1)
	me := loadErr(t, packageDir(t, text))
	wantProblem(t, me, "capabilities.tools[1].entrypoint", "names each tool's own entrypoint")
	if len(me.Problems) != 1 {
		t.Fatalf("want only tools[1] refused, got\n%v", me)
	}
	// No entrypoint anywhere.
	text = strings.Replace(anp01Toolpack, `entrypoint: "word_tally_pack.tool"`+"\n", "", 1)
	me = loadErr(t, packageDir(t, text))
	wantProblem(t, me, "capabilities.tools[0].entrypoint", "missing")
	// Runtime exec does not use a package-level entrypoint.
	m := baseManifest()
	m["entrypoint"] = "bin/echo"
	delete(tool0(m), "entrypoint")
	me = loadErr(t, packageDir(t, toYAML(t, m)))
	wantProblem(t, me, "capabilities.tools[0].entrypoint", "missing: runtime exec")
	// Nor does runtime mcp.
	m = mcpManifest()
	delete(tool0(m), "entrypoint")
	m["entrypoint"] = "srv"
	me = loadErr(t, packageDir(t, toYAML(t, m)))
	wantProblem(t, me, "capabilities.tools[0].entrypoint", "missing: runtime mcp")
}

// A 0.1 manifest states its runtime and permissions (as AgentNode's
// validator requires); only 0.2 has defaults.
func TestANP01HasNoDefaults(t *testing.T) {
	for _, c := range []struct{ from, field string }{
		{"runtime: \"python\"\n", "runtime"},
		{"permissions:\n  network:\n    level: \"none\"\n    allowed_domains: []\n", "permissions.network"},
	} {
		text := strings.Replace(anp01Toolpack, c.from, "", 1)
		if c.field == "permissions.network" {
			text = strings.Replace(anp01Toolpack, c.from, "permissions:\n", 1)
		}
		me := loadErr(t, packageDir(t, text))
		wantProblem(t, me, c.field, "missing (manifest_version 0.1 needs")
	}
}
