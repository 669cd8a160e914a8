package test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Python MCP server in the shape the ecosystem publishes them: a
// project of its own on the package index (mcp-server-wordstat, a module
// with main() and a console script, speaking MCP over stdio) that needs a
// library (textkit). No server from the index can be used here (the
// machines have no Python index, and Debian ships no MCP SDK), so the test
// writes one on the standard library alone and builds both wheels itself.
var wordstatProject = map[string]string{
	"server/pyproject.toml": `[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mcp-server-wordstat"
version = "1.2.0"
description = "An MCP server that counts words"
requires-python = ">=3.9"
dependencies = ["textkit>=1.0"]

[project.scripts]
mcp-server-wordstat = "mcp_server_wordstat:main"

[tool.setuptools]
packages = ["mcp_server_wordstat"]
`,
	"server/mcp_server_wordstat/__init__.py": `"""An MCP server (stdio, newline-delimited JSON-RPC 2.0) with two tools."""
import json
import sys

import textkit

PROTOCOLS = ["2025-06-18", "2025-03-26", "2024-11-05"]
TOOLS = [
    {"name": "word_stats", "description": "Count the words of a text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
     "outputSchema": {"type": "object"}},
    {"name": "shout", "description": "The text in capitals.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]


def call(name, args):
    text = args.get("text", "")
    if name == "word_stats":
        stats = textkit.stats(text)
        return {"content": [{"type": "text", "text": json.dumps(stats)}], "structuredContent": stats}
    if name == "shout":
        return {"content": [{"type": "text", "text": text.upper() + "!"}]}
    return {"content": [{"type": "text", "text": "unknown tool " + name}], "isError": True}


def handle(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {"protocolVersion": asked if asked in PROTOCOLS else PROTOCOLS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-server-wordstat", "version": "1.2.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call(params.get("name"), params.get("arguments") or {})
    raise LookupError(method)


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue  # a notification
        try:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg)}
        except LookupError as e:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no method %s" % e}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
`,
	"textkit/pyproject.toml": `[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "textkit"
version = "1.0.3"

[tool.setuptools]
packages = ["textkit"]
`,
	"textkit/textkit/__init__.py": `import collections
import re


def stats(text):
    words = re.findall(r"[\w']+", text.lower())
    top = collections.Counter(words).most_common(3)
    return {"words": len(words), "chars": len(text), "top": [w for w, _ in top]}
`,
}

// wordstatManifest pins the server; the package around it holds only a
// pyproject.toml requiring it at that version and the script that starts
// it from the dependencies agentnode installs into .deps.
const wordstatManifest = `manifest_version: "0.2"
package_id: wordstat-mcp
package_type: mcp_server
name: Word statistics MCP server
publisher: e2e
version: 1.0.0
summary: A Python MCP server installed from wheels by agentnode.
runtime: mcp
mcp_server:
  command: [python3, /pack/server.py]
  install: {manager: pypi, package: mcp-server-wordstat, version: 1.2.0}
capabilities:
  tools:
    - {name: word_stats, description: Count words., entrypoint: word_stats, action_type: read, input_schema: {type: object}}
    - {name: shout, description: Capitals., entrypoint: shout, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

const wordstatPyproject = `[project]
name = "wordstat-pack"
version = "1.0.0"
dependencies = ["mcp-server-wordstat==1.2.0"]
`

// wordstatLauncher starts the installed server as its console script
// would, with the installed dependencies first on the path.
const wordstatLauncher = `import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".deps"))
from mcp_server_wordstat import main
main()
`

// wordstatPackage builds the two wheels into a wheelhouse and writes the
// package; it returns both directories.
func wordstatPackage(t *testing.T, dir string) (pkg, wheelhouse string) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import setuptools, wheel, pip").Run(); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_PYTHON=1 but Debian's python3 with pip, wheel and setuptools is missing: %v", err)
		}
		t.Skipf("needs /usr/bin/python3 with pip, wheel and setuptools: %v", err)
	}
	src := filepath.Join(dir, "src")
	for name, body := range wordstatProject {
		writeFile(t, filepath.Join(src, name), body)
	}
	wheelhouse = filepath.Join(dir, "wheelhouse")
	cmd := exec.Command("/usr/bin/python3", "-I", "-m", "pip", "wheel", "--isolated", "--no-deps", "--no-build-isolation",
		"--no-index", "--disable-pip-version-check", "-q", "-w", wheelhouse, "./server", "./textkit")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel: %v\n%s", err, out)
	}
	if err := exec.Command("chmod", "-R", "a+rX", wheelhouse).Run(); err != nil {
		t.Fatal(err)
	}
	pkg = filepath.Join(dir, "wordstat-mcp")
	for name, body := range map[string]string{"agentnode.yaml": wordstatManifest, "pyproject.toml": wordstatPyproject, "server.py": wordstatLauncher} {
		writeFile(t, filepath.Join(pkg, name), body)
	}
	return pkg, wheelhouse
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPythonMCPServerFromWheels: a Python MCP server pinned with
// manager pypi gets its wheels (the server and its library) installed at
// `agentnode install` by pip in the sandbox, and runs sandboxed on the
// Python runtime image, through `agentnode run` and through `mcp serve`,
// answering exactly as the same installed files run directly by the host's
// python3. A looser pin is refused; a changed installed file stops the run.
func TestPythonMCPServerFromWheels(t *testing.T) {
	requireRoot(t)
	e := newMCPEnv(t)
	pkg, wheelhouse := wordstatPackage(t, e.dir)
	e.cli(t, "setup")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.wordstat-mcp", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)

	// A pin the dependencies do not hold exactly: refused before anything runs.
	loose := filepath.Join(e.dir, "wordstat-loose")
	if err := exec.Command("cp", "-R", pkg, loose).Run(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(loose, "pyproject.toml"), strings.Replace(wordstatPyproject, "==1.2.0", ">=1.2", 1))
	e.installFails(t, []string{"mcp_unpinned", `"mcp-server-wordstat>=1.2"`, "mcp-server-wordstat==1.2.0"}, loose, "--wheelhouse", wheelhouse)

	e.cli(t, "sandbox", "build", "--python-installer")
	e.cli(t, "sandbox", "build", "--python")
	out := e.cli(t, "install", pkg, "--wheelhouse", wheelhouse)
	if !regexp.MustCompile(`dependencies mcp[-_]server[-_]wordstat==1\.2\.0 textkit==1\.0\.3 sha256:`).Match(out) {
		t.Fatalf("install: %s", out)
	}

	const text = `{"text":"The cat saw the other cat, and the dog."}`
	sandboxed := []any{
		e.runPackageResult(t, "wordstat-mcp", "", "libcontainer", "word_stats", text),
		e.runPackageResult(t, "wordstat-mcp", "", "libcontainer", "shout", text),
	}
	installed := installedContent(t, e, "wordstat-mcp")
	// The host's python3 writes bytecode beside what it imports: it runs a
	// copy, so the installed tree stays as verified.
	copied := filepath.Join(t.TempDir(), "content")
	if err := exec.Command("cp", "-R", installed, copied).Run(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", filepath.Join(copied, "server.py"))
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("python3 server.py: %v", err)
	}
	direct := []any{directResult(t, cs, "word_stats", text), directResult(t, cs, "shout", text)}
	_ = cs.Close()
	sameResults(t, "sandboxed", sandboxed, direct)
	if got, _ := json.Marshal(direct); !strings.Contains(string(got), `"words":9`) || !strings.Contains(string(got), `THE CAT SAW`) {
		t.Fatalf("direct answers: %s", got)
	}

	// Through mcp serve --package, by the official Go SDK client.
	serve := e.command("mcp", "serve", "--package", "wordstat-mcp")
	ss, err := mcp.NewClient(&mcp.Implementation{Name: "through", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: serve}, nil)
	if err != nil {
		t.Fatalf("mcp serve: %v", err)
	}
	served := []any{directResult(t, ss, "word_stats", text), directResult(t, ss, "shout", text)}
	_ = ss.Close()
	sameResults(t, "through mcp serve", served, direct)

	// The attacker changes the installed server: refused before it runs.
	appendTo(t, filepath.Join(installed, ".deps", "mcp_server_wordstat", "__init__.py"), "\nimport sys; sys.stderr.write('tampered')\n")
	run := e.command("run", "wordstat-mcp", "shout", "--input", text, "--json")
	rout, err := run.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Contains(string(rout), "tampered") ||
		!strings.Contains(string(rout), "artifact_mismatch") {
		t.Fatalf("a changed file of the installed server: %v\n%s", err, rout)
	}
	t.Logf("sandboxed, served and direct agree: %s", mustJSON(direct))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
