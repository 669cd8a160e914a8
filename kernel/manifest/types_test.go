package manifest

import (
	"strings"
	"testing"
)

// agentManifest is a valid exec agent: the base toolpack turned into an
// agent with its own entrypoint and the agent fields AgentNode uses.
func agentManifest() map[string]any {
	m := baseManifest()
	m["package_id"] = "echo-agent"
	m["package_type"] = "agent"
	m["agent"] = map[string]any{
		"entrypoint":    "bin/echo",
		"goal":          "Echo things.",
		"tool_access":   map[string]any{"allowed_packages": []any{"echo-pack"}},
		"llm_access":    map[string]any{"enabled": true, "max_calls": 3, "allowed_models": []any{"small"}},
		"limits":        map[string]any{"max_runtime_seconds": 60, "max_tool_calls": 10},
		"pre_approved":  []any{"read"},
		"system_prompt": "You echo.",
	}
	return m
}

// mcpManifest is a valid MCP server package in ANP's shape.
func mcpManifest() map[string]any {
	m := baseManifest()
	m["package_id"] = "echo-mcp"
	m["package_type"] = "mcp_server"
	m["runtime"] = "mcp"
	tool0(m)["entrypoint"] = "echo"
	perms(m, "network")["level"] = "restricted"
	perms(m, "network")["allowed_domains"] = []any{"api.example.com"}
	m["mcp_server"] = map[string]any{
		"name":            "echo",
		"transport":       "stdio",
		"command":         []any{"node", "/pack/bin/echo"},
		"env_keys":        []any{"ECHO_TOKEN"},
		"allowed_domains": []any{"api.example.com"},
		"install":         map[string]any{"manager": "npm", "package": "@scope/echo-mcp", "version": "1.2.3"},
		"npm_package":     "@scope/echo-mcp",
		"source_repo":     "https://github.com/example/echo-mcp",
	}
	m["env_requirements"] = []any{map[string]any{"name": "ECHO_TOKEN", "required": true, "description": "token"}}
	return m
}

// One valid example of each package type loads, with its type-specific
// fields decoded.
func TestEachPackageTypeLoads(t *testing.T) {
	t.Run("toolpack", func(t *testing.T) {
		m := baseManifest()
		m["connector"] = map[string]any{"provider": "github", "auth_type": "oauth2", "scopes": []any{"repo"}}
		m["assets"] = []any{"README.md", map[string]any{"path": "icon.png"}}
		m["remote_endpoint"] = "https://example.com/api"
		got, err := Load(packageDir(t, toYAML(t, m)))
		if err != nil {
			t.Fatal(err)
		}
		if got.PackageType != TypeToolpack || got.Connector == nil || got.Connector.Provider != "github" {
			t.Fatalf("decoded %+v", got)
		}
	})
	t.Run("agent exec", func(t *testing.T) {
		got, err := Load(packageDir(t, toYAML(t, agentManifest())))
		if err != nil {
			t.Fatal(err)
		}
		if got.PackageType != TypeAgent || got.AgentEntrypoint != "bin/echo" ||
			got.ToolAccess == nil || got.ToolAccess.AllowedPackages[0] != "echo-pack" ||
			got.LLMAccess == nil || !got.LLMAccess.Enabled || *got.LLMAccess.MaxCalls != 3 ||
			got.Limits == nil || *got.Limits.MaxRuntimeSeconds != 60 || *got.Limits.MaxToolCalls != 10 {
			t.Fatalf("decoded %+v", got)
		}
	})
	t.Run("agent python", func(t *testing.T) {
		m := agentManifest()
		m["runtime"] = "python"
		m["agent"].(map[string]any)["entrypoint"] = "echo_agent.main:run"
		tool0(m)["entrypoint"] = "echo_agent.tools:echo"
		if _, err := Load(packageDir(t, toYAML(t, m))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mcp_server", func(t *testing.T) {
		got, err := Load(packageDir(t, toYAML(t, mcpManifest())))
		if err != nil {
			t.Fatal(err)
		}
		if got.PackageType != TypeMCPServer || got.Runtime != RuntimeMCP || got.MCP == nil ||
			got.MCP.Command[0] != "node" || got.MCP.EnvKeys[0] != "ECHO_TOKEN" ||
			got.MCP.Install == nil || got.MCP.Install.Manager != "npm" || got.MCP.Install.Version != "1.2.3" ||
			got.MCP.AllowedDomains[0] != "api.example.com" || len(got.EnvRequirements) != 1 {
			t.Fatalf("decoded %+v / %+v", got, got.MCP)
		}
	})
}

// Each type's own rules: wrong runtimes, missing sections, sections that
// belong to another type, and malformed type-specific fields. Every error
// names the field (and Load's error names the file: loadErr checks).
func TestPackageTypeRules(t *testing.T) {
	cases := []struct {
		name, field, msg string
		base             func() map[string]any
		mutate           func(m map[string]any)
	}{
		{"toolpack runtime mcp", "runtime", "package_type toolpack needs runtime exec or python", baseManifest,
			func(m map[string]any) { m["runtime"] = "mcp"; tool0(m)["entrypoint"] = "echo" }},
		{"toolpack with agent section", "agent", "not allowed (package_type toolpack", baseManifest,
			func(m map[string]any) { m["agent"] = map[string]any{"entrypoint": "bin/echo"} }},
		{"toolpack with llm_access", "llm_access", "not allowed", baseManifest,
			func(m map[string]any) { m["llm_access"] = map[string]any{"enabled": true} }},
		{"toolpack with mcp_server", "mcp_server", "not allowed", baseManifest,
			func(m map[string]any) { m["mcp_server"] = mcpManifest()["mcp_server"] }},
		{"agent without agent section", "agent", "missing (package_type agent needs", agentManifest,
			func(m map[string]any) { delete(m, "agent") }},
		{"agent without entrypoint", "agent.entrypoint", "missing", agentManifest,
			func(m map[string]any) { delete(m["agent"].(map[string]any), "entrypoint") }},
		{"agent runtime mcp", "runtime", "package_type agent needs runtime exec or python", agentManifest,
			func(m map[string]any) { m["runtime"] = "mcp" }},
		{"agent exec entrypoint missing", "agent.entrypoint", "does not exist", agentManifest,
			func(m map[string]any) { m["agent"].(map[string]any)["entrypoint"] = "bin/agent" }},
		{"agent exec entrypoint escapes", "agent.entrypoint", "contains ..", agentManifest,
			func(m map[string]any) { m["agent"].(map[string]any)["entrypoint"] = "../bin/echo" }},
		{"agent python entrypoint", "agent.entrypoint", "module.path:function", agentManifest,
			func(m map[string]any) {
				m["runtime"] = "python"
				tool0(m)["entrypoint"] = "a.b:c"
				m["agent"].(map[string]any)["entrypoint"] = "bin/echo"
			}},
		{"agent limits out of range", "agent.limits.max_runtime_seconds", "maximum", agentManifest,
			func(m map[string]any) {
				m["agent"].(map[string]any)["limits"] = map[string]any{"max_runtime_seconds": 7200}
			}},
		{"agent tool_access bad id", "agent.tool_access.allowed_packages[0]", "is not a package id", agentManifest,
			func(m map[string]any) {
				m["agent"].(map[string]any)["tool_access"] = map[string]any{"allowed_packages": []any{"../x"}}
			}},
		{"agent llm_access typo", "agent.llm_access.max_call", "did you mean agent.llm_access.max_calls?", agentManifest,
			func(m map[string]any) {
				m["agent"].(map[string]any)["llm_access"] = map[string]any{"enabled": true, "max_call": 1}
			}},
		{"agent with mcp_server", "mcp_server", "not allowed", agentManifest,
			func(m map[string]any) { m["mcp_server"] = mcpManifest()["mcp_server"] }},
		{"mcp_server without section", "mcp_server", "missing (package_type mcp_server needs", mcpManifest,
			func(m map[string]any) { delete(m, "mcp_server") }},
		{"mcp_server runtime exec", "runtime", "package_type mcp_server needs runtime mcp", mcpManifest,
			func(m map[string]any) { m["runtime"] = "exec"; tool0(m)["entrypoint"] = "bin/echo" }},
		{"mcp_server with agent fields", "limits", "not allowed", mcpManifest,
			func(m map[string]any) { m["limits"] = map[string]any{"max_tool_calls": 1} }},
		{"mcp_server without command", "mcp_server.command", "missing", mcpManifest,
			func(m map[string]any) { delete(m["mcp_server"].(map[string]any), "command") }},
		{"mcp_server command typo", "mcp_server.comand", "did you mean mcp_server.command?", mcpManifest,
			func(m map[string]any) { m["mcp_server"].(map[string]any)["comand"] = []any{"x"} }},
		{"mcp_server install manager", "mcp_server.install.manager", "must be one of", mcpManifest,
			func(m map[string]any) {
				m["mcp_server"].(map[string]any)["install"].(map[string]any)["manager"] = "cargo"
			}},
		{"mcp_server install unknown key", "mcp_server.install.registry", "unknown field", mcpManifest,
			func(m map[string]any) {
				m["mcp_server"].(map[string]any)["install"].(map[string]any)["registry"] = "npm"
			}},
		{"mcp_server install without version", "mcp_server.install.version", "missing", mcpManifest,
			func(m map[string]any) {
				delete(m["mcp_server"].(map[string]any)["install"].(map[string]any), "version")
			}},
		{"mcp_server env key", "mcp_server.env_keys[0]", "is not an environment variable name", mcpManifest,
			func(m map[string]any) { m["mcp_server"].(map[string]any)["env_keys"] = []any{"A-B"} }},
		{"mcp_server domain ip", "mcp_server.allowed_domains[0]", "is not an exact lower-case DNS name", mcpManifest,
			func(m map[string]any) { m["mcp_server"].(map[string]any)["allowed_domains"] = []any{"169.254.169.254"} }},
		{"mcp_server domains with network none", "mcp_server.allowed_domains", "must be empty", mcpManifest,
			func(m map[string]any) {
				perms(m, "network")["level"] = "none"
				delete(perms(m, "network"), "allowed_domains")
			}},
		{"env_requirements unknown key", "env_requirements[0].value", "unknown field", mcpManifest,
			func(m map[string]any) { m["env_requirements"] = []any{map[string]any{"name": "X", "value": "secret"}} }},
		{"remote_endpoint not a URL", "remote_endpoint", "is not an http(s) URL", baseManifest,
			func(m map[string]any) { m["remote_endpoint"] = "ftp://x" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.base()
			c.mutate(m)
			me := loadErr(t, packageDir(t, toYAML(t, m)))
			wantProblem(t, me, c.field, c.msg)
			if !strings.Contains(me.Error(), "agentnode.yaml: "+c.field+": ") {
				t.Fatalf("message does not name file and field: %v", me)
			}
		})
	}
}
