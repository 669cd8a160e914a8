package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/test/keychaintest"
)

// `agentnode mcp serve` driven by real MCP clients: the official Go SDK
// client (here) and the official TypeScript SDK client (test/mcpclient),
// against the real binaries, a real keychain (curated trust), real host
// confinement and the real libcontainer sandbox.

// mcpEnv is an agentnode home and the environment to drive it.
type mcpEnv struct {
	dir string // working directory (the lockfile lives here)
	env []string
}

func newMCPEnv(t testing.TB) *mcpEnv { return newMCPEnvIn(t.TempDir()) }

func newMCPEnvIn(dir string) *mcpEnv {
	e := &mcpEnv{dir: dir, env: []string{
		"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "user"),
		"AGENTNODE_HOME=" + filepath.Join(dir, "user", ".agentnode"),
	}}
	for _, k := range passEnv {
		if v := os.Getenv(k); v != "" {
			e.env = append(e.env, k+"="+v)
		}
	}
	return e
}

func (e *mcpEnv) home() string { return filepath.Join(e.dir, "user", ".agentnode") }

func (e *mcpEnv) command(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "agentnode"), args...)
	cmd.Env, cmd.Dir = e.env, e.dir
	return cmd
}

// cli runs agentnode and fails the test unless it exits 0.
func (e *mcpEnv) cli(t testing.TB, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := e.command(args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agentnode %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// auditRecords returns the audit records whose request_id is id.
func (e *mcpEnv) auditRecords(t testing.TB, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range e.allAuditRecords(t) {
		if r["request_id"] == id {
			out = append(out, r)
		}
	}
	return out
}

// allAuditRecords returns every record of the audit log, in order.
func (e *mcpEnv) allAuditRecords(t testing.TB) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.home(), "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// writePackage writes a package: agentnode.yaml from tools (YAML list
// items), the echo tool at bin/echo and a failing tool at bin/fail.
func writeMCPPackage(t testing.TB, dir, id, tools string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	echoTool(t, filepath.Join(dir, "bin", "echo"))
	fail := "#!/bin/sh\necho '{\"ok\":false,\"error\":\"no such record\"}'\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "fail"), []byte(fail), 0o755); err != nil {
		t.Fatal(err)
	}
	m := `manifest_version: "0.2"
package_id: ` + id + `
package_type: toolpack
name: MCP test tools
publisher: e2e
version: 1.0.0
summary: Tools served over MCP in the e2e tests
runtime: exec
capabilities:
  tools:
` + tools + `permissions:
  network: {level: none}
  filesystem: {level: temp}
  code_execution: {level: none}
`
	if err := os.WriteFile(filepath.Join(dir, "agentnode.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	echoOnce  sync.Once
	echoBin   string
	echoError error
)

// echoTool copies a static build of test/tools/echo to dst.
func echoTool(t testing.TB, dst string) {
	t.Helper()
	echoOnce.Do(func() {
		echoBin = filepath.Join(filepath.Dir(binDir), "tools", "echo")
		cmd := exec.Command("go", "build", "-o", echoBin, "./tools/echo")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			echoError = errors.New("build echo tool: " + err.Error() + "\n" + string(out))
		}
	})
	if echoError != nil {
		t.Fatal(echoError)
	}
	data, err := os.ReadFile(echoBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

const mcpTools = `    - name: echo
      description: Echo the input object
      entrypoint: bin/echo
      action_type: read
      input_schema: {type: object, properties: {x: {type: integer}}, required: [x]}
      output_schema: {type: object, properties: {x: {type: integer}}}
    - name: lookup
      description: Always fails
      entrypoint: bin/fail
      action_type: read
      input_schema: {type: object}
    - name: wipe
      description: Delete everything (needs approval, which MCP cannot give)
      entrypoint: bin/echo
      action_type: delete
      input_schema: {type: object}
`

// mcpServerPackage is an MCP server package: the e2e server
// (test/mcpservers/echo) preinstalled at bin/server (writeServerPackage).
const mcpServerPackage = `manifest_version: "0.2"
package_id: some-mcp-server
package_type: mcp_server
name: An MCP server
publisher: e2e
version: 0.1.0
summary: A preinstalled MCP server
runtime: mcp
mcp_server:
  command: [/pack/bin/server]
  install: {manager: npm, package: "@agentnode-e2e/echo-mcp", version: 1.0.0}
capabilities:
  tools:
    - {name: srv, description: Srv, entrypoint: echo, action_type: read, input_schema: {type: object}}
    - {name: read_file, description: Read, entrypoint: echo, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// writeServerPackage writes the mcp_server package some-mcp-server with the
// e2e MCP server binary and returns its directory.
func writeServerPackage(t testing.TB, e *mcpEnv) string {
	t.Helper()
	srv := filepath.Join(e.dir, "srv")
	if err := os.MkdirAll(filepath.Join(srv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(extraDir, "mcpserver-echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv, "bin", "server"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv, "agentnode.yaml"), []byte(mcpServerPackage), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv
}

// requireKeyring skips without a Secret Service, or fails under
// AGENTNODE_REQUIRE_KEYRING=1 (like the scripts' keyring condition).
func requireKeyring(t testing.TB) { keychaintest.Require(t) }

// curatedEnv sets agentnode up with the curated package mcp-tools (on the
// host, confined) and an mcp_server package.
func curatedEnv(t testing.TB) *mcpEnv {
	t.Helper()
	requireKeyring(t)
	e := newMCPEnv(t)
	e.cli(t, "setup")
	keyID := "mcp-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36) // unique in the shared keychain
	e.cli(t, "trust", "keygen", "--id", keyID)
	pkg := filepath.Join(e.dir, "pkg")
	writeMCPPackage(t, pkg, "mcp-tools", mcpTools)
	att := filepath.Join(e.dir, "att.json")
	if err := os.WriteFile(att, e.cli(t, "trust", "attest", pkg, "--level", "curated", "--key", keyID), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cli(t, "install", pkg, "--attestation", att)
	e.cli(t, "install", writeServerPackage(t, e))
	e.cli(t, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":10000,"per_hour":100000,"burst":1000}`)
	return e
}

// serve starts `agentnode mcp serve` and connects the Go SDK client.
func (e *mcpEnv) serve(t testing.TB, opts *mcp.ClientOptions) (*mcp.ClientSession, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	return e.serveArgs(t, opts)
}

// serveArgs is serve with more arguments to `agentnode mcp serve`.
func (e *mcpEnv) serveArgs(t testing.TB, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := e.command(append([]string{"mcp", "serve"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "agentnode-e2e-go", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to agentnode mcp serve: %v\nstderr: %s", err, stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, cmd, stderr
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return r
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// childPlugins returns pid → fd 0 of the agentnode plugin processes whose
// parent is pid.
func childPlugins(t testing.TB, pid int) map[int]string {
	t.Helper()
	out := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		cpid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		// argv[0], not comm: plugins are exec'd as /proc/self/fd/N
		// (kernel/pluginhost), so comm is "N".
		cmdline, _ := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if !strings.HasPrefix(filepath.Base(string(argv0)), "agentnode-") {
			continue
		}
		fd0, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "fd", "0"))
		out[cpid] = fd0
	}
	return out
}

func TestMCPServeGoClient(t *testing.T) {
	e := curatedEnv(t)

	// mcp status: what serve exposes and what it does not, with why.
	var st struct {
		SetUp bool `json:"set_up"`
		Tools []struct {
			Name, Package, Tool, Version string
		} `json:"tools"`
		Skipped []struct {
			Package, Code, Reason string
		} `json:"skipped"`
	}
	if err := json.Unmarshal(e.cli(t, "mcp", "status", "--json"), &st); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range st.Tools {
		names = append(names, tl.Name)
	}
	if !st.SetUp || !slices.Equal(names, []string{"mcp-tools__echo", "mcp-tools__lookup", "mcp-tools__wipe",
		"some-mcp-server__srv", "some-mcp-server__read_file"}) {
		t.Fatalf("mcp status: %+v", st)
	}
	if len(st.Skipped) != 0 {
		t.Fatalf("mcp status skipped: %+v", st.Skipped)
	}
	if text := string(e.cli(t, "mcp", "status")); !strings.Contains(text, "mcp-tools__echo") ||
		!strings.Contains(text, "some-mcp-server__srv") {
		t.Fatalf("mcp status text:\n%s", text)
	}

	var listChanged atomic.Int32
	cs, cmd, stderr := e.serve(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged.Add(1) },
	})
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "mcp-tools__echo" {
			schema, _ := json.Marshal(tl.InputSchema)
			if tl.Description != "Echo the input object" || !strings.Contains(string(schema), `"required":["x"]`) || tl.OutputSchema == nil {
				t.Errorf("echo tool: %+v (schema %s)", tl, schema)
			}
		}
	}
	if !slices.Equal(names, []string{"mcp-tools__echo", "mcp-tools__lookup", "mcp-tools__wipe",
		"some-mcp-server__read_file", "some-mcp-server__srv"}) {
		t.Fatalf("tools/list: %v", names)
	}

	// An allowed call runs on the host (curated), returns the tool's
	// result, and leaves a decision and an outcome record.
	r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
	if r.IsError || resultText(r) != `{"x":1}` {
		t.Fatalf("echo: isError=%v %q\nstderr: %s", r.IsError, resultText(r), stderr)
	}
	if sc, _ := json.Marshal(r.StructuredContent); string(sc) != `{"x":1}` {
		t.Errorf("structuredContent %s", sc)
	}
	if r.Meta["agentnode/placement"] != "host" || r.Meta["agentnode/decision"] != "allow" {
		t.Errorf("meta %v", r.Meta)
	}
	id, _ := r.Meta["agentnode/request_id"].(string)
	recs := e.auditRecords(t, id)
	if len(recs) != 2 || recs[0]["event"] != "decision" || recs[0]["decision"] != "allow" || recs[0]["trust"] != "curated" ||
		recs[1]["event"] != "outcome" || recs[1]["exit_code"] != float64(0) || recs[1]["placement"] != "host" {
		t.Fatalf("audit records of %s: %v", id, recs)
	}
	if env, _ := recs[0]["env"].(map[string]any); env["interactive"] != false {
		t.Errorf("serve ran interactive: %v", recs[0]["env"])
	}
	plugins := childPlugins(t, cmd.Process.Pid)
	if len(plugins) == 0 {
		t.Fatal("no plugin processes under mcp serve after a call")
	}

	// A tool that runs and fails is a tool error with its message.
	r = callTool(t, cs, "mcp-tools__lookup", map[string]any{})
	if !r.IsError || resultText(r) != "tool failed: no such record" {
		t.Fatalf("lookup: isError=%v %q", r.IsError, resultText(r))
	}

	// A delete needs approval; MCP has nobody to ask: deny policy_prompt,
	// audited, nothing run.
	r = callTool(t, cs, "mcp-tools__wipe", map[string]any{})
	if !r.IsError || !strings.HasPrefix(resultText(r), "deny policy_prompt: ") {
		t.Fatalf("wipe: isError=%v %q", r.IsError, resultText(r))
	}
	id, _ = r.Meta["agentnode/request_id"].(string)
	recs = e.auditRecords(t, id)
	if len(recs) != 1 || recs[0]["decision"] != "deny" || recs[0]["code"] != "policy_prompt" || recs[0]["tool"] != "wipe" {
		t.Fatalf("audit records of the denied call %s: %v", id, recs)
	}

	// Bad arguments: not an object (refused before the pipeline), and an
	// object that violates the schema (Guard's inspector: approval needed,
	// so denied). The server survives all of them.
	for _, bad := range []any{"just a string", []any{1, 2}, json.RawMessage(`null`), map[string]any{"x": "not a number"}} {
		r = callTool(t, cs, "mcp-tools__echo", bad)
		if !r.IsError {
			t.Fatalf("echo %v: not an error: %q", bad, resultText(r))
		}
		if _, ok := bad.(map[string]any); ok && !strings.HasPrefix(resultText(r), "deny ") {
			t.Fatalf("echo %v: %q", bad, resultText(r))
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no-such__tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("unknown tool: no error")
	}

	// Still serving, with the same plugin processes (started once).
	r = callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 2})
	if r.IsError || resultText(r) != `{"x":2}` {
		t.Fatalf("echo after bad calls: isError=%v %q\nstderr: %s", r.IsError, resultText(r), stderr)
	}
	// Concurrent calls share the plugins, the audit log and the rate-limit
	// state: all succeed, and the audit chain stays valid (checked below).
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-tools__echo", Arguments: map[string]any{"x": 100 + i}})
			if err != nil || r.IsError || resultText(r) != `{"x":`+strconv.Itoa(100+i)+`}` {
				t.Errorf("concurrent call %d: %v %+v", i, err, r)
			}
		}()
	}
	wg.Wait()
	again := childPlugins(t, cmd.Process.Pid)
	for pid := range plugins {
		if _, ok := again[pid]; !ok {
			t.Errorf("plugin %d was restarted between calls (before %v, after %v)", pid, plugins, again)
		}
	}

	// The MCP stream is private to agentnode: its fds 0 and 1 are
	// /dev/null and stderr, so plugin processes (go-plugin hands them our
	// stdin) can neither read the client's requests nor write into the
	// stream.
	self := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/"
	fd0, _ := os.Readlink(self + "0")
	fd1, _ := os.Readlink(self + "1")
	fd2, _ := os.Readlink(self + "2")
	if fd0 != "/dev/null" || fd1 != fd2 {
		t.Errorf("mcp serve fds: 0=%s 1=%s 2=%s", fd0, fd1, fd2)
	}
	for pid, fd := range again {
		if fd != "/dev/null" {
			t.Errorf("plugin %d has stdin %s, want /dev/null", pid, fd)
		}
	}

	// Installing while serving: the client is told, and the tool is there.
	pkg2 := filepath.Join(e.dir, "pkg2")
	writeMCPPackage(t, pkg2, "late-tools", "    - {name: hi, description: Hi, entrypoint: bin/echo, action_type: read, input_schema: {type: object}}\n")
	e.cli(t, "install", pkg2)
	deadline := time.Now().Add(15 * time.Second)
	for listChanged.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if listChanged.Load() == 0 {
		t.Fatal("no notifications/tools/list_changed after an install")
	}
	tools, err = cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tools.Tools); n != 6 {
		t.Fatalf("%d tools after install", n)
	}
	// Unknown trust: refused (minimum verified), through the same server.
	r = callTool(t, cs, "late-tools__hi", map[string]any{})
	if !r.IsError || !strings.HasPrefix(resultText(r), "deny trust_below_minimum: ") {
		t.Fatalf("late-tools: isError=%v %q", r.IsError, resultText(r))
	}

	// Disconnect: serve exits 0 and takes its plugins with it.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("mcp serve exited %d\nstderr: %s", code, stderr)
	}
	for pid := range again {
		waitGone(t, pid)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr: %s", stderr)
	}
	e.cli(t, "audit", "verify")
}

func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || bytes.Contains(stat, []byte(") Z ")) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("plugin %d still running after mcp serve exited", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireNode returns node and the client script, skipping without node or
// `npm ci` in test/mcpclient, or failing under AGENTNODE_REQUIRE_NODE=1.
func requireNode(t testing.TB) (node, script string) {
	t.Helper()
	script = filepath.Join(repoRoot(), "test", "mcpclient", "client.mjs")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(repoRoot(), "test", "mcpclient", "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_NODE") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_NODE=1 but node or the SDK is missing (npm ci --prefix test/mcpclient): %v", err)
		}
		t.Skipf("node or test/mcpclient/node_modules missing (npm ci --prefix test/mcpclient): %v", err)
	}
	return node, script
}

type tsOutput struct {
	Server       map[string]any `json:"server"`
	Capabilities map[string]any `json:"capabilities"`
	Tools        []struct {
		Name         string         `json:"name"`
		Description  string         `json:"description"`
		InputSchema  map[string]any `json:"inputSchema"`
		OutputSchema map[string]any `json:"outputSchema"`
	} `json:"tools"`
	Results []struct {
		IsError           bool           `json:"isError"`
		Text              string         `json:"text"`
		StructuredContent map[string]any `json:"structuredContent"`
		Meta              map[string]any `json:"meta"`
		ProtocolError     string         `json:"protocolError"`
	} `json:"results"`
}

// runTSClient runs test/mcpclient/client.mjs with a plan against
// `agentnode mcp serve`.
func (e *mcpEnv) runTSClient(t testing.TB, calls []map[string]any) *tsOutput {
	t.Helper()
	return e.runTSClientArgs(t, []string{"mcp", "serve"}, calls)
}

// The official TypeScript SDK client lists and calls the tools; its
// output-schema validation of structuredContent passes.
func TestMCPServeTypeScriptClient(t *testing.T) {
	requireNode(t)
	e := curatedEnv(t)
	out := e.runTSClient(t, []map[string]any{
		{"name": "mcp-tools__echo", "arguments": map[string]any{"x": 7}},
		{"name": "mcp-tools__wipe", "arguments": map[string]any{}},
		{"name": "mcp-tools__lookup", "arguments": map[string]any{}},
		{"name": "mcp-tools__echo", "arguments": map[string]any{"x": "seven"}},
		{"name": "mcp-tools__echo", "arguments": map[string]any{"x": 8}},
	})
	if out.Server["name"] != "agentnode" || out.Capabilities["tools"] == nil {
		t.Errorf("server %v capabilities %v", out.Server, out.Capabilities)
	}
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"mcp-tools__echo", "mcp-tools__lookup", "mcp-tools__wipe",
		"some-mcp-server__read_file", "some-mcp-server__srv"}) {
		t.Fatalf("tools: %v", names)
	}
	if out.Tools[0].InputSchema["type"] != "object" || out.Tools[0].OutputSchema == nil {
		t.Errorf("echo schemas: %+v", out.Tools[0])
	}
	if len(out.Results) != 5 {
		t.Fatalf("results: %+v", out.Results)
	}
	ok := out.Results[0]
	if ok.ProtocolError != "" || ok.IsError || ok.Text != `{"x":7}` || ok.StructuredContent["x"] != float64(7) {
		t.Fatalf("echo: %+v", ok)
	}
	id, _ := ok.Meta["agentnode/request_id"].(string)
	if recs := e.auditRecords(t, id); len(recs) != 2 || recs[1]["event"] != "outcome" || recs[1]["exit_code"] != float64(0) {
		t.Fatalf("audit of %s: %v", id, recs)
	}
	deny := out.Results[1]
	if !deny.IsError || !strings.HasPrefix(deny.Text, "deny policy_prompt: ") {
		t.Fatalf("wipe: %+v", deny)
	}
	id, _ = deny.Meta["agentnode/request_id"].(string)
	if recs := e.auditRecords(t, id); len(recs) != 1 || recs[0]["decision"] != "deny" || recs[0]["code"] != "policy_prompt" {
		t.Fatalf("audit of the denied %s: %v", id, recs)
	}
	if r := out.Results[2]; !r.IsError || r.Text != "tool failed: no such record" {
		t.Fatalf("lookup: %+v", r)
	}
	if r := out.Results[3]; !r.IsError || !strings.HasPrefix(r.Text, "deny ") {
		t.Fatalf("schema-violating arguments: %+v", r)
	}
	if r := out.Results[4]; r.IsError || r.Text != `{"x":8}` {
		t.Fatalf("echo after a denied call: %+v", r)
	}
	e.cli(t, "audit", "verify")
}

// sandboxEnv sets agentnode up with the sandbox image and the package
// mcp-bench of unknown trust, which therefore runs only in the libcontainer
// sandbox.
func sandboxEnv(t testing.TB) *mcpEnv { return setupSandboxEnv(t, newMCPEnv(t)) }

func setupSandboxEnv(t testing.TB, e *mcpEnv) *mcpEnv {
	t.Helper()
	requireRoot(t)
	e.cli(t, "setup")
	e.cli(t, "sandbox", "build")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.mcp-bench", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	pkg := filepath.Join(e.dir, "pkg")
	writeMCPPackage(t, pkg, "mcp-bench", "    - {name: echo, description: Echo, entrypoint: bin/echo, action_type: read, input_schema: {type: object}}\n")
	e.cli(t, "install", pkg)
	return e
}

// A community package over MCP runs in the sandbox, never on the host; so
// does a community MCP server package, kept running across calls, each
// call through the pipeline and the Guard proxy.
func TestMCPServeSandboxed(t *testing.T) {
	e := sandboxEnv(t)
	e.cli(t, "install", writeServerPackage(t, e))
	e.cli(t, "config", "set", "guard.rate_limits.some-mcp-server", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	cs, _, stderr := e.serve(t, nil)
	for i, c := range []struct {
		tool  string
		args  map[string]any
		calls int // the server's own count of calls it received
		deny  string
	}{
		{"some-mcp-server__srv", map[string]any{"n": 1}, 1, ""},
		{"some-mcp-server__read_file", map[string]any{"path": "docs/../../etc/shadow"}, 0, "deny input_denied: "},
		{"some-mcp-server__srv", map[string]any{"n": 2}, 2, ""}, // the denied call never reached it
	} {
		r := callTool(t, cs, c.tool, c.args)
		id, _ := r.Meta["agentnode/request_id"].(string)
		recs := e.auditRecords(t, id)
		if c.deny != "" {
			if !r.IsError || !strings.HasPrefix(resultText(r), c.deny) || len(recs) != 1 || recs[0]["decision"] != "deny" {
				t.Fatalf("call %d: isError=%v %q, audit %v", i, r.IsError, resultText(r), recs)
			}
			continue
		}
		var out struct{ Calls int }
		if r.IsError || json.Unmarshal([]byte(resultText(r)), &out) != nil || out.Calls != c.calls {
			t.Fatalf("call %d: isError=%v %q, want call %d of one server\nstderr: %s", i, r.IsError, resultText(r), c.calls, stderr)
		}
		if r.Meta["agentnode/placement"] != "sandbox" || len(recs) != 2 || recs[1]["event"] != "outcome" || recs[1]["backend"] != "libcontainer" {
			t.Fatalf("call %d: meta %v, audit %v", i, r.Meta, recs)
		}
	}
	// The server's undeclared tool is neither listed nor callable.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "some-mcp-server__secret", Arguments: map[string]any{}}); err == nil {
		t.Fatal("undeclared server tool callable")
	}

	for i := 0; i < 2; i++ {
		r := callTool(t, cs, "mcp-bench__echo", map[string]any{"x": i})
		if r.IsError || resultText(r) != `{"x":`+strconv.Itoa(i)+`}` {
			t.Fatalf("echo: isError=%v %q\nstderr: %s", r.IsError, resultText(r), stderr)
		}
		if r.Meta["agentnode/placement"] != "sandbox" {
			t.Fatalf("placement %v", r.Meta)
		}
		id, _ := r.Meta["agentnode/request_id"].(string)
		if recs := e.auditRecords(t, id); len(recs) != 2 || recs[0]["trust"] != "unknown" || recs[1]["backend"] != "libcontainer" {
			t.Fatalf("audit of %s: %v", id, recs)
		}
	}

	// The kept-alive MCP server's container is running now; when serve
	// exits it is stopped and removed (libcontainer's state root). Only
	// containers of this test's home count: another agentnode (or test run)
	// on the machine shares the state root.
	mcpContainers := func() []string {
		const stateRoot = "/run/agentnode/libcontainer"
		ents, _ := os.ReadDir(stateRoot)
		var out []string
		for _, ent := range ents {
			if !strings.HasPrefix(ent.Name(), "an-mcp-") {
				continue
			}
			// The state names the package directory it mounts, under this
			// test's AGENTNODE_HOME. (Unreadable: being created or removed.)
			st, err := os.ReadFile(filepath.Join(stateRoot, ent.Name(), "state.json"))
			if err == nil && !bytes.Contains(st, []byte(e.home()+"/")) {
				continue
			}
			out = append(out, ent.Name())
		}
		return out
	}
	if n := len(mcpContainers()); n != 1 {
		t.Errorf("%d MCP server containers while serving, want 1", n)
	}
	_ = cs.Close()
	deadline := time.Now().Add(30 * time.Second)
	for len(mcpContainers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := mcpContainers(); len(left) > 0 {
		t.Fatalf("MCP server containers left after serve exited: %v\nstderr: %s", left, stderr)
	}
}

// wsServerPackage is an MCP server package (the e2e server, whose files
// tool reads and writes paths relative to its working directory) with
// permissions.filesystem.level LEVEL.
const wsServerPackage = `manifest_version: "0.2"
package_id: ID
package_type: mcp_server
name: A workspace MCP server
publisher: e2e
version: 0.1.0
summary: A preinstalled MCP server using the user's files
runtime: mcp
mcp_server:
  command: [/pack/bin/server]
  install: {manager: npm, package: "@agentnode-e2e/echo-mcp", version: 1.0.0}
capabilities:
  tools:
    - {name: files, description: Files, entrypoint: files, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: LEVEL}
  code_execution: {level: none}
`

// An MCP server package's kept server gets the session's workspace (`mcp
// serve --workspace`) as its filesystem level grants it, like a toolpack
// tool: workspace_write reads and writes it (its working directory),
// workspace_read reads it and cannot write (EROFS), none does not have it.
// The grant is in every call's audit records; `agentnode run --workspace`
// (a server per call) gives the same.
func TestMCPServeWorkspaceServer(t *testing.T) {
	e := sandboxEnv(t)
	bin, err := os.ReadFile(filepath.Join(extraDir, "mcpserver-echo"))
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]string{"ws-write": "workspace_write", "ws-read": "workspace_read", "ws-none": "none"}
	for id, level := range levels {
		dir := filepath.Join(e.dir, id)
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", "server"), bin, 0o755); err != nil {
			t.Fatal(err)
		}
		m := strings.NewReplacer("ID", id, "LEVEL", level).Replace(wsServerPackage)
		if err := os.WriteFile(filepath.Join(dir, "agentnode.yaml"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		e.cli(t, "install", dir)
		e.cli(t, "config", "set", "guard.rate_limits."+id, `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	}
	// The user's directory, writable by all: only the grant stands in the
	// way of writing it.
	ws := filepath.Join(e.dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "data.txt"), []byte("the user's data\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "data.txt"), 0o666); err != nil {
		t.Fatal(err)
	}

	type filesOut struct {
		Cwd        string `json:"cwd"`
		Read       string `json:"read"`
		ReadError  string `json:"read_error"`
		WriteError string `json:"write_error"`
	}
	check := func(t *testing.T, how, id string, got filesOut, out string) {
		t.Helper()
		want := map[string]bool{"ws-write": true, "ws-read": true}[id]
		switch {
		case want && (got.Cwd != ws || got.Read != "the user's data\n" || got.ReadError != ""):
			t.Errorf("%s %s: the workspace not granted as its working directory, readable: %+v", how, id, got)
		case !want && (got.Cwd == ws || got.ReadError == ""):
			t.Errorf("%s %s (filesystem none) saw the workspace: %+v", how, id, got)
		}
		written, statErr := os.ReadFile(filepath.Join(ws, out))
		switch id {
		case "ws-write":
			if got.WriteError != "" || statErr != nil || string(written) != "written by the MCP server\n" {
				t.Errorf("%s %s: write error %q; on the host: %q, %v", how, id, got.WriteError, written, statErr)
			}
		case "ws-read":
			if !strings.Contains(got.WriteError, "read-only file system") || statErr == nil {
				t.Errorf("%s %s: write error %q (want EROFS); on the host: %v", how, id, got.WriteError, statErr)
			}
		default:
			if got.WriteError == "" && statErr == nil {
				t.Errorf("%s %s (filesystem none) wrote %s into the workspace", how, id, out)
			}
		}
	}

	cs, _, stderr := e.serveArgs(t, nil, "--workspace", ws)
	for _, id := range []string{"ws-write", "ws-read", "ws-none"} {
		for i := range 2 { // the second call is on the same kept server
			out := id + "-serve-" + strconv.Itoa(i) + ".txt"
			r := callTool(t, cs, id+"__files", map[string]any{"read": "data.txt", "write": out})
			var got filesOut
			if r.IsError || json.Unmarshal([]byte(resultText(r)), &got) != nil {
				t.Fatalf("%s: isError=%v %q\nstderr: %s", id, r.IsError, resultText(r), stderr)
			}
			check(t, "mcp serve", id, got, out)
			rid, _ := r.Meta["agentnode/request_id"].(string)
			recs := e.auditRecords(t, rid)
			want := map[string]string{"ws-write": "read-write " + ws, "ws-read": "read-only " + ws,
				"ws-none": "not granted (filesystem level none): " + ws}[id]
			if len(recs) != 2 || recs[0]["workspace"] != want || recs[1]["workspace"] != want || recs[1]["backend"] != "libcontainer" {
				t.Errorf("%s: audit records %v, want workspace %q in both", id, recs, want)
			}
		}
	}
	_ = cs.Close()

	// agentnode run: a server started for the call, the same grant.
	for _, id := range []string{"ws-write", "ws-read", "ws-none"} {
		out := id + "-run.txt"
		res := e.cli(t, "run", id, "files", "--input", `{"read":"data.txt","write":"`+out+`"}`, "--workspace", ws, "--json")
		var r struct {
			Placement string          `json:"placement"`
			Result    json.RawMessage `json:"result"`
		}
		var got filesOut
		if json.Unmarshal(res, &r) != nil || r.Placement != "sandbox" || json.Unmarshal(r.Result, &got) != nil {
			t.Fatalf("run %s: %s", id, res)
		}
		check(t, "run", id, got, out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "data.txt")); err != nil || string(b) != "the user's data\n" {
		t.Errorf("the user's file changed: %q, %v", b, err)
	}
}

var (
	benchEnvMu sync.Mutex
	benchEnv   *mcpEnv
)

// sharedSandboxEnv is one sandboxEnv for all benchmark runs (building the
// image once), removed with the binaries by TestMain.
func sharedSandboxEnv(b *testing.B) *mcpEnv {
	b.Helper()
	benchEnvMu.Lock()
	defer benchEnvMu.Unlock()
	if benchEnv == nil {
		dir, err := os.MkdirTemp(filepath.Dir(binDir), "mcp-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchEnv = setupSandboxEnv(b, newMCPEnvIn(dir))
	}
	return benchEnv
}

// BenchmarkMCPToolsCall is one tools/call through a running `agentnode mcp
// serve` to a trivial sandboxed tool: the whole pipeline (config, lockfile,
// artifact re-hash, trust and guard plugins already running, two fsynced
// audit records) and a libcontainer run. Compare with BenchmarkAgentnodeRun,
// the same call as one `agentnode run` process.
func BenchmarkMCPToolsCall(b *testing.B) {
	e := sharedSandboxEnv(b)
	cs, _, stderr := e.serve(b, nil)
	callTool(b, cs, "mcp-bench__echo", map[string]any{"x": 1}) // start the plugins
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := callTool(b, cs, "mcp-bench__echo", map[string]any{"x": 1})
		if r.IsError || resultText(r) != `{"x":1}` {
			b.Fatalf("isError=%v %q\nstderr: %s", r.IsError, resultText(r), stderr)
		}
	}
}

// BenchmarkAgentnodeRun is `agentnode run` of the same sandboxed tool: a
// process, plugin starts and the same pipeline per call.
func BenchmarkAgentnodeRun(b *testing.B) {
	e := sharedSandboxEnv(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := e.cli(b, "run", "mcp-bench", "echo", "--input", `{"x":1}`)
		if !bytes.Contains(out, []byte(`{"x":1}`)) {
			b.Fatalf("output %s", out)
		}
	}
}
