package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// serverFilesystemVersion is the exact @modelcontextprotocol/server-filesystem
// the test installs from npm.
const serverFilesystemVersion = "2026.8.31"

// filesystemLauncher gives the reference filesystem server its working
// directory (the granted workspace, in the sandbox and directly) as its one
// allowed directory, as its command-line arguments would, and imports it
// unchanged.
const filesystemLauncher = `process.argv.push(process.cwd());
await import("./node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
`

const filesystemManifest = `manifest_version: "0.2"
package_id: fs-mcp
package_type: mcp_server
name: Filesystem MCP server
publisher: e2e
version: 1.0.0
summary: The reference filesystem MCP server, preinstalled with npm.
runtime: mcp
mcp_server:
  command: [node, /pack/server.mjs]
  install: {manager: npm, package: "@modelcontextprotocol/server-filesystem", version: ` + serverFilesystemVersion + `}
capabilities:
  tools:
    - {name: write_file, description: Write a file., entrypoint: write_file, action_type: write_local, input_schema: {type: object}}
    - {name: read_text_file, description: Read a file., entrypoint: read_text_file, action_type: read, input_schema: {type: object}}
    - {name: list_directory, description: List a directory., entrypoint: list_directory, action_type: read, input_schema: {type: object}}
    - {name: create_directory, description: Make a directory., entrypoint: create_directory, action_type: write_local, input_schema: {type: object}}
    - {name: move_file, description: Move a file., entrypoint: move_file, action_type: write_local, input_schema: {type: object}}
    - {name: directory_tree, description: The tree., entrypoint: directory_tree, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: workspace_write}
  code_execution: {level: none}
`

// filesystemCalls use paths relative to the allowed directory, so that
// the answers do not depend on where the workspace is.
var filesystemCalls = []map[string]any{
	{"name": "write_file", "arguments": map[string]any{"path": "notes.txt", "content": "first line\nsecond line\n"}},
	{"name": "read_text_file", "arguments": map[string]any{"path": "notes.txt"}},
	{"name": "read_text_file", "arguments": map[string]any{"path": "notes.txt", "head": 1}},
	{"name": "create_directory", "arguments": map[string]any{"path": "archive/2026"}},
	{"name": "move_file", "arguments": map[string]any{"source": "notes.txt", "destination": "archive/2026/notes.txt"}},
	{"name": "list_directory", "arguments": map[string]any{"path": "archive/2026"}},
	{"name": "directory_tree", "arguments": map[string]any{"path": "."}},
}

// TestMCPServeFilesystemServer: the reference filesystem server
// (server-filesystem, exact version), installed as a community package and
// sandboxed on libcontainer in the Node image, driven by the official
// TypeScript SDK client through `agentnode mcp serve --package` over stdio
// and over Streamable HTTP, answers every call exactly as the same server
// started directly does, leaves the same files in its workspace, and has
// every call audited. Paths outside the workspace stay out of reach.
func TestMCPServeFilesystemServer(t *testing.T) {
	node, script := requireNode(t)
	requireRoot(t)
	e := newMCPEnv(t)
	pkg := npmPackage(t, e.dir, "fs-mcp", "@modelcontextprotocol/server-filesystem@"+serverFilesystemVersion)
	for name, body := range map[string]string{"server.mjs": filesystemLauncher, "agentnode.yaml": filesystemManifest} {
		writeFile(t, filepath.Join(pkg, name), body)
	}
	e.cli(t, "setup")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.fs-mcp", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	e.cli(t, "install", pkg)
	e.cli(t, "sandbox", "build", "--node")

	raws := func(out map[string]any) []any {
		t.Helper()
		rs, _ := out["results"].([]any)
		if len(rs) != len(filesystemCalls) {
			t.Fatalf("results: %v", out)
		}
		var raw []any
		for i, r := range rs {
			m, _ := r.(map[string]any)
			if m["protocolError"] != nil || m["isError"] == true {
				t.Fatalf("%v: %v", filesystemCalls[i], m)
			}
			raw = append(raw, comparable(m["raw"]))
		}
		return raw
	}
	wsDirect, wsStdio, wsHTTP := workspace(t), workspace(t), workspace(t)
	direct := raws(tsRun(t, os.Environ(), wsDirect, map[string]any{"command": node,
		"args": []string{filepath.Join(pkg, "server.mjs")}, "calls": filesystemCalls}))
	stdioOut := tsRun(t, e.env, e.dir, map[string]any{"command": filepath.Join(binDir, "agentnode"),
		"args": []string{"mcp", "serve", "--package", "fs-mcp", "--workspace", wsStdio}, "calls": filesystemCalls})
	stdio := raws(stdioOut)

	srv := e.serveHTTP(t, "--package", "fs-mcp", "--workspace", wsHTTP)
	plan, _ := json.Marshal(map[string]any{"url": srv.url, "token": e.token(t), "calls": filesystemCalls})
	cmd := exec.Command(node, filepath.Join(filepath.Dir(script), "http-client.mjs"), string(plan))
	cmd.Env, cmd.Dir = e.env, e.dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node http-client.mjs: %v\nserver stderr: %s", err, srv.stderr)
	}
	var httpOut map[string]any
	if err := json.Unmarshal(out, &httpOut); err != nil {
		t.Fatalf("http-client output %q: %v", out, err)
	}
	overHTTP := raws(httpOut)

	for i, c := range filesystemCalls {
		if !reflect.DeepEqual(direct[i], stdio[i]) || !reflect.DeepEqual(direct[i], overHTTP[i]) {
			t.Errorf("%v:\n direct: %s\n stdio:  %s\n http:   %s", c, jsonOf(direct[i]), jsonOf(stdio[i]), jsonOf(overHTTP[i]))
		}
	}
	if s := jsonOf(direct[2]); !strings.Contains(s, "first line") || strings.Contains(s, "second line") {
		t.Errorf("read_text_file head 1: %s", s)
	}
	for _, ws := range []string{wsDirect, wsStdio, wsHTTP} {
		data, err := os.ReadFile(filepath.Join(ws, "archive", "2026", "notes.txt"))
		if err != nil || string(data) != "first line\nsecond line\n" {
			t.Errorf("%s/archive/2026/notes.txt: %v %q", ws, err, data)
		}
	}

	// Every call through serve was decided and audited, sandboxed.
	rs, _ := stdioOut["results"].([]any)
	for i, r := range rs {
		meta, _ := r.(map[string]any)["meta"].(map[string]any)
		id, _ := meta["agentnode/request_id"].(string)
		recs := e.auditRecords(t, id)
		if meta["agentnode/placement"] != "sandbox" || len(recs) != 2 || recs[0]["decision"] != "allow" ||
			recs[0]["tool"] != filesystemCalls[i]["name"] || recs[1]["backend"] != "libcontainer" {
			t.Errorf("%v: _meta %v, audit %v", filesystemCalls[i], meta, recs)
		}
	}

	// From the client's side as an attacker: the host's files and the
	// package itself stay out of reach (the server's own refusal, and
	// behind it the sandbox).
	escapes := []map[string]any{
		{"name": "read_text_file", "arguments": map[string]any{"path": "/etc/shadow"}},
		{"name": "read_text_file", "arguments": map[string]any{"path": "../../../../etc/passwd"}},
		{"name": "write_file", "arguments": map[string]any{"path": "/pack/server.mjs", "content": "pwned"}},
		{"name": "list_directory", "arguments": map[string]any{"path": e.home()}},
	}
	got := tsRun(t, e.env, e.dir, map[string]any{"command": filepath.Join(binDir, "agentnode"),
		"args": []string{"mcp", "serve", "--package", "fs-mcp", "--workspace", wsStdio}, "calls": escapes})
	ers, _ := got["results"].([]any)
	for i, r := range ers {
		m, _ := r.(map[string]any)
		if m["isError"] != true || strings.Contains(jsonOf(m), "root:") {
			t.Errorf("%v: %v", escapes[i], m)
		}
	}
	if data, err := os.ReadFile(filepath.Join(e.home(), "packages", "fs-mcp", "content", "server.mjs")); err != nil || string(data) != filesystemLauncher {
		t.Errorf("the installed server.mjs: %v %q", err, data)
	}
}
