package lockfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
)

const mcpManifest = `manifest_version: "0.2"
package_id: demo-mcp
package_type: mcp_server
name: Demo MCP
publisher: acme
version: 2.0.0
summary: A preinstalled MCP server.
runtime: mcp
mcp_server:
  command: [/pack/bin/server, --stdio]
  env_keys: [DEMO_TOKEN]
  install: {manager: npm, package: "@acme/demo-mcp", version: 1.2.3}
capabilities:
  tools:
    - {name: echo, description: Echo., entrypoint: echo, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// An MCP server's entry seals the preinstall: the pin, the installed tree's
// hash and the command, all covered by _integrity.
func TestEntryForMCPServer(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(mcpManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := pkginstall.Open(filepath.Join(t.TempDir(), "packages")).Install(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := EntryFor(p, EntryInfo{Source: SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mcp_preinstalled":       `true`,
		"mcp_preinstall":         `{"artifact_hash":"` + p.ArtifactHash + `","manager":"npm","package":"@acme/demo-mcp","version":"1.2.3"}`,
		"mcp_preinstall_command": `["/pack/bin/server","--stdio"]`,
		"mcp_command":            `["/pack/bin/server","--stdio"]`,
		"mcp_env_keys":           `["DEMO_TOKEN"]`,
	}
	for k, w := range want {
		v := e.Get(k)
		if v == nil {
			t.Errorf("%s missing", k)
			continue
		}
		if got := string(Canonical(v)); got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	if e.Get("mcp_sandbox_volume") != nil || e.Get("mcp_allowed_domains") != nil {
		t.Errorf("unexpected fields in %s", Canonical(e))
	}
	// Every preinstall field is hashed.
	c := string(Canonical(CanonicalEntry(e, SelectCanonicalVersion(e))))
	for _, k := range []string{"mcp_preinstalled", "mcp_preinstall", "mcp_preinstall_command"} {
		if !strings.Contains(c, `"`+k+`":`) {
			t.Errorf("%s is not in the hashed fields: %s", k, c)
		}
	}
}
