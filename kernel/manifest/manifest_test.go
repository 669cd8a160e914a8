package manifest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/agentnode/agentnode/specs"
)

// baseManifest is a valid exec toolpack; tests mutate copies of it.
func baseManifest() map[string]any {
	return map[string]any{
		"manifest_version": "0.2",
		"package_id":       "echo-pack",
		"package_type":     "toolpack",
		"name":             "Echo Pack",
		"publisher":        "example",
		"version":          "1.2.3",
		"summary":          "Echoes its input back.",
		"runtime":          "exec",
		"capabilities": map[string]any{
			"tools": []any{
				map[string]any{
					"name":        "echo",
					"description": "Echo the input.",
					"entrypoint":  "bin/echo",
					"action_type": "compute",
					"input_schema": map[string]any{
						"type":       "object",
						"properties": map[string]any{"text": map[string]any{"type": "string"}},
						"required":   []any{"text"},
					},
				},
			},
		},
		"permissions": map[string]any{
			"network":        map[string]any{"level": "none"},
			"filesystem":     map[string]any{"level": "none"},
			"code_execution": map[string]any{"level": "none"},
		},
	}
}

func tool0(m map[string]any) map[string]any {
	return m["capabilities"].(map[string]any)["tools"].([]any)[0].(map[string]any)
}

func perms(m map[string]any, k string) map[string]any {
	return m["permissions"].(map[string]any)[k].(map[string]any)
}

// packageDir makes a package directory with bin/echo (0755), bin/data.txt
// (0644) and the manifest text.
func packageDir(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "bin", "echo"), "#!/bin/sh\ncat\n", 0o755)
	write(t, filepath.Join(dir, "bin", "data.txt"), "data\n", 0o644)
	write(t, filepath.Join(dir, FileName), manifest, 0o644)
	return dir
}

func write(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

func toYAML(t *testing.T, m map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadErr loads a manifest that must fail and returns its *Error.
func loadErr(t *testing.T, dir string) *Error {
	t.Helper()
	m, err := Load(dir)
	if err == nil {
		t.Fatalf("Load succeeded, want an error; manifest %+v", m)
	}
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("error is %T, want *manifest.Error: %v", err, err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, FileName)+": ") {
		t.Fatalf("error does not name the file: %v", err)
	}
	return me
}

func wantProblem(t *testing.T, me *Error, field, msg string) {
	t.Helper()
	if !me.Has(field, msg) {
		t.Fatalf("want a problem at %q containing %q, got:\n%v", field, msg, me)
	}
}

func TestValidManifestLoads(t *testing.T) {
	dir := packageDir(t, toYAML(t, baseManifest()))
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.PackageID != "echo-pack" || m.PackageType != TypeToolpack || m.Runtime != RuntimeExec ||
		m.Version != "1.2.3" || m.Publisher != "example" || m.Name != "Echo Pack" {
		t.Fatalf("decoded %+v", m)
	}
	if m.Permissions.Network.Level != "none" || m.Permissions.Filesystem.Level != "none" ||
		m.Permissions.CodeExecution.Level != "none" {
		t.Fatalf("permissions %+v", m.Permissions)
	}
	tool, ok := m.Tool("echo")
	if !ok || tool.Entrypoint != "bin/echo" || tool.ActionType != "compute" || tool.OutputSchema != nil {
		t.Fatalf("Tool(echo) = %+v, %v", tool, ok)
	}
	var is map[string]any
	if err := json.Unmarshal(tool.InputSchema, &is); err != nil || is["type"] != "object" {
		t.Fatalf("input_schema %s: %v", tool.InputSchema, err)
	}
	if _, ok := m.Tool("nope"); ok {
		t.Fatal("Tool(nope) found")
	}
	if !json.Valid(m.Raw) {
		t.Fatal("Raw is not JSON")
	}
	s, err := CompileSchema(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if s.Validate(map[string]any{}) == nil {
		t.Fatal("compiled input schema accepted an input without the required text")
	}
}

// An ANP 0.2 manifest as AgentNode users write them (python runtime, the
// optional registry fields, an agent section) loads unchanged.
func TestANPManifestLoads(t *testing.T) {
	const anp = `manifest_version: "0.2"
package_id: "notes-agent"
package_type: "agent"
name: "Notes Agent"
publisher: "someone"
version: "2.0.1-beta.1+build.5"
summary: "Summarise a folder of notes into a short report."
description: |
  Longer text.
runtime: "python"
install_mode: "package"
hosting_type: "agentnode_hosted"
entrypoint: "notes_agent.agent"
license: MIT
capabilities:
  tools:
    - name: "summarise_notes"
      capability_id: "summarise_notes"
      description: "Summarise notes."
      entrypoint: "notes_agent.agent:run"
      input_schema:
        type: "object"
        properties:
          goal: {type: "string"}
        required: ['goal']
      output_schema:
        type: object
  resources: []
  prompts: []
agent:
  entrypoint: "notes_agent.agent:run"
  goal: "Summarise notes."
  tool_access:
    allowed_packages: ["document-summarizer-pack"]
  limits: {max_iterations: 10, max_tool_calls: 50, max_runtime_seconds: 300}
  termination: {stop_on_final_answer: true}
  llm_access: {enabled: true, max_calls: 5, allowed_models: [small]}
  isolation: "thread"
compatibility:
  frameworks: ["generic"]
  python: ">=3.10"
permissions:
  network: {level: "restricted", allowed_domains: ["api.example.com"]}
  filesystem: {level: "workspace_read"}
  code_execution: {level: "none"}
  data_access: {level: "input_only"}
  user_approval: {required: "never"}
env_requirements:
  - {name: NOTES_TOKEN, required: true}
tags: ["agent", "notes"]
categories: ["productivity"]
`
	dir := packageDir(t, anp)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.LLMAccess == nil || !m.LLMAccess.Enabled || *m.LLMAccess.MaxCalls != 5 {
		t.Fatalf("llm_access from the agent section: %+v", m.LLMAccess)
	}
	if m.ToolAccess == nil || m.ToolAccess.AllowedPackages[0] != "document-summarizer-pack" {
		t.Fatalf("tool_access: %+v", m.ToolAccess)
	}
	if m.Limits == nil || *m.Limits.MaxToolCalls != 50 {
		t.Fatalf("limits: %+v", m.Limits)
	}
	if m.Permissions.Network.AllowedDomains[0] != "api.example.com" || m.Permissions.DataAccess.Level != "input_only" {
		t.Fatalf("permissions: %+v", m.Permissions)
	}
	if len(m.Agent) == 0 || len(m.EnvRequirements) != 1 {
		t.Fatalf("agent/env_requirements not kept: %+v", m)
	}
}

// Required fields, in a 0.1 manifest (ANP 0.2 defaults runtime and the
// permissions: TestANP02Defaults).
func TestRequiredFields(t *testing.T) {
	cases := []struct {
		field string
		drop  func(m map[string]any)
	}{
		{"manifest_version", nil},
		{"package_id", nil},
		{"package_type", nil},
		{"name", nil},
		{"publisher", nil},
		{"version", nil},
		{"summary", nil},
		{"runtime", nil},
		{"capabilities", nil},
		{"permissions", nil},
		{"capabilities.tools", func(m map[string]any) { delete(m["capabilities"].(map[string]any), "tools") }},
		{"capabilities.tools[0].name", func(m map[string]any) { delete(tool0(m), "name") }},
		{"capabilities.tools[0].description", func(m map[string]any) { delete(tool0(m), "description") }},
		{"capabilities.tools[0].entrypoint", func(m map[string]any) { delete(tool0(m), "entrypoint") }},
		{"capabilities.tools[0].input_schema", func(m map[string]any) { delete(tool0(m), "input_schema") }},
		{"permissions.network", func(m map[string]any) { delete(m["permissions"].(map[string]any), "network") }},
		{"permissions.filesystem", func(m map[string]any) { delete(m["permissions"].(map[string]any), "filesystem") }},
		{"permissions.code_execution", func(m map[string]any) { delete(m["permissions"].(map[string]any), "code_execution") }},
		{"permissions.network.level", func(m map[string]any) { delete(perms(m, "network"), "level") }},
		{"permissions.filesystem.level", func(m map[string]any) { delete(perms(m, "filesystem"), "level") }},
		{"permissions.code_execution.level", func(m map[string]any) { delete(perms(m, "code_execution"), "level") }},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			m := baseManifest()
			m["manifest_version"] = "0.1"
			if c.drop == nil {
				delete(m, c.field)
			} else {
				c.drop(m)
			}
			me := loadErr(t, packageDir(t, toYAML(t, m)))
			wantProblem(t, me, c.field, "missing")
			if !strings.Contains(me.Error(), "agentnode.yaml: "+c.field+": missing") {
				t.Fatalf("message %q", me.Error())
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	cases := []struct {
		name, field, msg string
		mutate           func(m map[string]any)
	}{
		{"package_type enum", "package_type", "must be one of", func(m map[string]any) { m["package_type"] = "tool-pack" }},
		{"runtime enum", "runtime", "must be one of", func(m map[string]any) { m["runtime"] = "node" }},
		{"action_type enum", "capabilities.tools[0].action_type", "must be one of", func(m map[string]any) { tool0(m)["action_type"] = "destroy" }},
		{"network level enum", "permissions.network.level", "must be one of", func(m map[string]any) { perms(m, "network")["level"] = "full" }},
		{"filesystem level enum", "permissions.filesystem.level", "must be one of", func(m map[string]any) { perms(m, "filesystem")["level"] = "rw" }},
		{"manifest_version unknown", "manifest_version", "must be one of", func(m map[string]any) { m["manifest_version"] = "0.9" }},
		{"package_id upper case", "package_id", "is not a package id", func(m map[string]any) { m["package_id"] = "Echo" }},
		{"package_id path", "package_id", "is not a package id", func(m map[string]any) { m["package_id"] = "../etc" }},
		{"package_id short", "package_id", "is not a package id", func(m map[string]any) { m["package_id"] = "ab" }},
		{"version not string", "version", "must be string, not number (YAML read it as a number; put the value in quotes)", func(m map[string]any) { m["version"] = 1.5 }},
		{"manifest_version not string", "manifest_version", "put the value in quotes", func(m map[string]any) { m["manifest_version"] = 0.2 }},
		{"version two parts", "version", "is not a semantic version", func(m map[string]any) { m["version"] = "1.0" }},
		{"version v prefix", "version", "is not a semantic version", func(m map[string]any) { m["version"] = "v1.0.0" }},
		{"version leading zero", "version", "is not a semantic version", func(m map[string]any) { m["version"] = "01.0.0" }},
		{"version empty prerelease", "version", "is not a semantic version", func(m map[string]any) { m["version"] = "1.0.0-" }},
		{"input_schema not object", "capabilities.tools[0].input_schema", "must be object", func(m map[string]any) { tool0(m)["input_schema"] = "string" }},
		{"no tools", "capabilities.tools", "minItems", func(m map[string]any) { m["capabilities"].(map[string]any)["tools"] = []any{} }},
		{"wildcard domain", "permissions.network.allowed_domains[0]", "is not an exact lower-case DNS name", func(m map[string]any) {
			perms(m, "network")["level"] = "restricted"
			perms(m, "network")["allowed_domains"] = []any{"*.example.com"}
		}},
		{"domain with scheme", "permissions.network.allowed_domains[0]", "is not an exact lower-case DNS name", func(m map[string]any) {
			perms(m, "network")["level"] = "restricted"
			perms(m, "network")["allowed_domains"] = []any{"https://example.com"}
		}},
		{"domains with network none", "permissions.network.allowed_domains", "must be empty", func(m map[string]any) {
			perms(m, "network")["allowed_domains"] = []any{"example.com"}
		}},
		{"duplicate tool name", "capabilities.tools[1].name", "duplicate tool name", func(m map[string]any) {
			tools := m["capabilities"].(map[string]any)["tools"].([]any)
			m["capabilities"].(map[string]any)["tools"] = append(tools, tools[0])
		}},
		{"input_schema does not compile", "capabilities.tools[0].input_schema.properties.a.type", "not a valid JSON Schema", func(m map[string]any) {
			tool0(m)["input_schema"] = map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 12}}}
		}},
		{"input_schema external ref", "capabilities.tools[0].input_schema", "not a valid JSON Schema", func(m map[string]any) {
			tool0(m)["input_schema"] = map[string]any{"$ref": "file:///etc/passwd"}
		}},
		{"output_schema does not compile", "capabilities.tools[0].output_schema.minimum", "not a valid JSON Schema: must be number", func(m map[string]any) {
			tool0(m)["output_schema"] = map[string]any{"minimum": "zero"}
		}},
		{"bad tool name", "capabilities.tools[0].name", "is not a tool name", func(m map[string]any) { tool0(m)["name"] = "a/b" }},
		{"llm_access twice", "agent.llm_access", "set it in one place", func(m map[string]any) {
			m["package_type"] = "agent"
			m["llm_access"] = map[string]any{"enabled": false}
			m["agent"] = map[string]any{"entrypoint": "bin/echo", "llm_access": map[string]any{"enabled": true}}
		}},
		{"python entrypoint", "capabilities.tools[0].entrypoint", "module.path:function", func(m map[string]any) {
			m["runtime"] = "python"
			tool0(m)["entrypoint"] = "bin/echo"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := baseManifest()
			c.mutate(m)
			wantProblem(t, loadErr(t, packageDir(t, toYAML(t, m))), c.field, c.msg)
		})
	}
}

func TestValidSemver(t *testing.T) {
	for _, v := range []string{"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85"} {
		if !ValidSemver(v) {
			t.Errorf("%q rejected", v)
		}
	}
	for _, v := range []string{"", "1", "1.2", "v1.2.3", "1.2.3.4", "01.2.3", "1.02.3", "1.2.3-", "1.2.3+", "1.2.3-01", "1.2.3 ", " 1.2.3", "1.2.3-a..b"} {
		if ValidSemver(v) {
			t.Errorf("%q accepted", v)
		}
	}
}

func TestUnknownFields(t *testing.T) {
	cases := []struct {
		name, field, msg string
		mutate           func(m map[string]any)
	}{
		{"top level typo", "sumary", "unknown field (did you mean summary?)", func(m map[string]any) { m["sumary"] = m["summary"] }},
		{"tool typo", "capabilities.tools[0].entrypiont", "unknown field (did you mean capabilities.tools[0].entrypoint?)",
			func(m map[string]any) { tool0(m)["entrypiont"] = "bin/echo" }},
		{"permissions typo", "permissions.network.alowed_domains", "(did you mean permissions.network.allowed_domains?)",
			func(m map[string]any) { perms(m, "network")["alowed_domains"] = []any{} }},
		{"capabilities typo", "capabilities.tool", "(did you mean capabilities.tools?)", func(m map[string]any) { m["capabilities"].(map[string]any)["tool"] = []any{} }},
		{"transposition", "nmae", "(did you mean name?)", func(m map[string]any) { m["nmae"] = m["name"] }},
		{"no suggestion", "frobnicate", "unknown field", func(m map[string]any) { m["frobnicate"] = 1 }},
		{"odd key", `["my key"]`, "unknown field", func(m map[string]any) { m["my key"] = 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := baseManifest()
			c.mutate(m)
			me := loadErr(t, packageDir(t, toYAML(t, m)))
			wantProblem(t, me, c.field, c.msg)
			if c.name == "no suggestion" && strings.Contains(me.Error(), "did you mean") {
				t.Fatalf("suggested something for a field nothing like any known one: %v", me)
			}
		})
	}
}

func TestYAMLStructure(t *testing.T) {
	base := toYAML(t, baseManifest())
	cases := []struct {
		name, text, field, msg string
	}{
		{"duplicate top-level key", base + "name: Other\n", "name", "duplicate key"},
		{"duplicate quoted key", base + "\"version\": 2.0.0\n", "version", "duplicate key"},
		{"duplicate nested key", strings.Replace(base, "    description: Echo the input.\n",
			"    description: Echo the input.\n    description: again\n", 1), "capabilities.tools[0].description", "duplicate key"},
		{"anchor and alias", base + "tags: &t [a]\ncategories: *t\n", "tags", "anchors and aliases"},
		{"merge key", base + "agent:\n  <<: {goal: x}\n", "agent", "merge keys"},
		{"two documents", base + "---\nname: x\n", "", "2 YAML documents"},
		{"empty", "", "", "empty manifest"},
		{"comment only", "# nothing\n", "", "empty manifest"},
		{"syntax error", "name: [a, b\n", "", "invalid YAML at line"},
		{"not a mapping", "- a\n- b\n", "", "must be object, not array"},
		{"nan", base + "limits: {max_tool_calls: .nan}\n", "", "cannot be represented in JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, loadErr(t, packageDir(t, c.text)), c.field, c.msg)
		})
	}
}

func TestExecEntrypoints(t *testing.T) {
	cases := []struct {
		name, ep, msg string
	}{
		{"dotdot", "../outside/echo", "contains .."},
		{"dotdot inside", "bin/../bin/echo", "contains .."},
		{"absolute", "/bin/sh", "is absolute"},
		{"missing", "bin/nope", "does not exist"},
		{"not executable", "bin/data.txt", "not executable"},
		{"directory", "bin", "must be a regular file"},
		{"unclean", "./bin/echo", "not a clean relative path"},
		{"backslash", `bin\echo`, "path separator"},
		{"symlink", "bin/link", "is a symlink"},
		{"through escaping symlink dir", "sys/sh", "sys/sh"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := baseManifest()
			tool0(m)["entrypoint"] = c.ep
			dir := packageDir(t, toYAML(t, m))
			// ../outside/echo exists and is executable: refused for its path alone.
			outside := filepath.Join(filepath.Dir(dir), "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(outside, "echo"), "#!/bin/sh\n", 0o755)
			if err := os.Symlink("echo", filepath.Join(dir, "bin", "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/bin", filepath.Join(dir, "sys")); err != nil {
				t.Fatal(err)
			}
			wantProblem(t, loadErr(t, dir), "capabilities.tools[0].entrypoint", c.msg)
		})
	}
}

func TestEntrypointThroughInsideSymlinkDir(t *testing.T) {
	m := baseManifest()
	tool0(m)["entrypoint"] = "alias/echo"
	dir := packageDir(t, toYAML(t, m))
	if err := os.Symlink("bin", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err != nil {
		t.Fatalf("a symlinked directory inside the package was refused: %v", err)
	}
}

func TestMissingOrIrregularFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	var me *Error
	if !errors.As(err, &me) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing manifest: %v", err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("symlinked manifest: %v", err)
	}
	big := packageDir(t, toYAML(t, baseManifest())+"description: "+strings.Repeat("x", MaxSize)+"\n")
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized manifest: %v", err)
	}
}

func TestValidPackageID(t *testing.T) {
	for _, id := range []string{"abc", "echo-pack", "a1-b2", strings.Repeat("a", 60)} {
		if !ValidPackageID(id) {
			t.Errorf("%q rejected", id)
		}
	}
	for _, id := range []string{"", "ab", "..", "a/b", "ABC", "a_b", ".abc", strings.Repeat("a", 61)} {
		if ValidPackageID(id) {
			t.Errorf("%q accepted", id)
		}
	}
}

// The schema's patterns and the Go checks must agree.
func TestSchemaPatternsMatchGo(t *testing.T) {
	data, err := fs.ReadFile(specs.Schemas, SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Defs map[string]struct {
			Pattern string `json:"pattern"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if got := s.Defs["semver"].Pattern; got != semverRe.String() {
		t.Errorf("schema semver pattern %q != Go %q", got, semverRe.String())
	}
	if got := s.Defs["packageId"].Pattern; got != packageIDRe.String() {
		t.Errorf("schema packageId pattern %q != Go %q", got, packageIDRe.String())
	}
}
