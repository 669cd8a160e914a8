package dispatch

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/executor"
	"github.com/agentnode/agentnode/executor/mcpserver"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/trust"
)

// The MCP tests run the real e2e MCP server (test/mcpservers/echo, a
// go-sdk server) on the host, confined, through the pipeline with every
// real stage but the trust plugin (curated, so placement is the host) and
// the inspector plugins.

const mcpTestManifest = `manifest_version: "0.2"
package_id: echo-mcp
package_type: mcp_server
name: Echo MCP
publisher: acme
version: 1.0.0
summary: The e2e MCP server.
runtime: mcp
mcp_server:
  command: [/pack/bin/server]
  install: {manager: npm, package: "@agentnode-test/echo-mcp", version: 1.0.0}
capabilities:
  tools:
    - {name: echo, description: Echo., entrypoint: echo, action_type: read, input_schema: {type: object}}
    - {name: lookup, description: Fails., entrypoint: fail, action_type: read, input_schema: {type: object}}
    - {name: probe, description: Probe., entrypoint: probe, action_type: read, input_schema: {type: object}}
    - {name: ghost, description: Not on the server., entrypoint: ghost, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

var (
	serverOnce sync.Once
	serverBin  string
	serverErr  error
)

// echoServer builds test/mcpservers/echo once (static, like the e2e
// build).
func echoServer(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(file), "..", "..", "test", "mcpservers", "echo")
		out, err := os.MkdirTemp("", "agentnode-mcpserver-")
		if err != nil {
			serverErr = err
			return
		}
		serverBin = filepath.Join(out, "server")
		cmd := exec.Command("go", "build", "-trimpath", "-o", serverBin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			serverErr = &exec.ExitError{Stderr: b}
		}
	})
	if serverErr != nil {
		t.Fatalf("build the MCP test server: %v", serverErr)
	}
	return serverBin
}

// mcpHome installs the echo MCP server package (manifest text m) into a
// set-up home and returns the kernel and the package.
func mcpHome(t *testing.T, m string) (*Kernel, *store.Package) {
	t.Helper()
	k := newHome(t)
	k.StageTimeout = 10 * time.Second
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "server"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := pkginstall.Open(home.PackagesDir(k.HomeDir)).Install(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTNODE_LOCKFILE", filepath.Join(t.TempDir(), "agentnode.lock"))
	k.Environ = []string{"PATH=/usr/bin:/bin", "SECRET_TOKEN=" + leakMarker}
	var stages []stage
	for _, s := range decisionStages {
		switch s.name {
		case "trust":
			s.run = func(_ context.Context, st *state) error { st.res.Trust = trust.LevelCurated; return nil }
		case "inspectors":
			continue
		}
		stages = append(stages, s)
	}
	withStages(t, stages...)
	return k, p
}

func mcpRun(t *testing.T, k *Kernel, tool, input string) (*Result, error) {
	t.Helper()
	return k.Run(context.Background(), &Request{Package: "echo-mcp", Tool: tool, Input: json.RawMessage(input)})
}

func TestMCPRunOnHost(t *testing.T) {
	k, _ := mcpHome(t, mcpTestManifest)

	res, err := mcpRun(t, k, "echo", `{"x": 1}`)
	if err != nil || res.Placement != PlacementHost || res.OK == nil || !*res.OK {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if string(res.Output) != `{"calls":1,"echo":{"x":1}}` || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("echo result %s, exit %v, stderr %q", res.Output, res.ExitCode, res.Stderr)
	}
	recs := auditRecords(t, k)
	if len(recs) != 2 || recs[0].Event != "decision" || recs[0].Decision != "allow" || recs[1].Event != "outcome" ||
		recs[1].RequestID != res.RequestID || recs[1].Placement != PlacementHost {
		t.Fatalf("audit %+v", recs)
	}

	// A server's tool error is a failed tool.
	res, err = mcpRun(t, k, "lookup", `{}`)
	if err != nil || *res.OK || res.Error != "no such record" {
		t.Fatalf("lookup: %+v, %v", res, err)
	}

	// What the server sees on the host: confined (no sockets), and nothing
	// of the caller's environment.
	res, err = mcpRun(t, k, "probe", `{}`)
	if err != nil || !*res.OK {
		t.Fatalf("probe: %+v, %v", res, err)
	}
	var seen struct {
		Internet, Loopback string
		Env                []string
	}
	if err := json.Unmarshal(res.Output, &seen); err != nil {
		t.Fatal(err)
	}
	if seen.Internet == "connected" || seen.Loopback == "refused" || seen.Loopback == "connected" ||
		!slices.Equal(seen.Env, []string{"HOME", "PACK_DIR", "PATH", "TMPDIR"}) {
		t.Fatalf("the server saw %+v (want no sockets and only HOME, PACK_DIR, PATH, TMPDIR)", seen)
	}
	if strings.Contains(string(res.Output), leakMarker) {
		t.Fatal("the caller's secret reached the server")
	}

	// A declared tool the server does not offer: refused by the Guard
	// proxy after the decision, nothing called.
	res, err = mcpRun(t, k, "ghost", `{}`)
	if reason.CodeOf(err) != reason.PolicyDenied || !strings.Contains(err.Error(), "does not offer") {
		t.Fatalf("ghost: %+v, %v", res, err)
	}
	// A tool the package does not declare (the server has it): refused
	// before anything starts.
	res, err = mcpRun(t, k, "secret", `{}`)
	if reason.CodeOf(err) != reason.PolicyDenied || res.Ran {
		t.Fatalf("secret: %+v, %v", res, err)
	}
}

// Run-time checks of the sealed lockfile fields: a verified entry is the
// launch, and it must be preinstalled, pinned and agree with the manifest;
// every refusal is at placement, audited, and nothing starts.
func TestMCPRunSealedLaunch(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(e *lockfile.Value)
		code   reason.Code
		msg    string
	}{
		{"npx", func(e *lockfile.Value) {
			e.Set("mcp_preinstall_command", &lockfile.Value{Kind: lockfile.Array, Arr: []*lockfile.Value{lockfile.Str("npx"), lockfile.Str("-y"), lockfile.Str("x")}})
		}, reason.MCPUnpinned, "mcp_preinstall_command differs"},
		{"not preinstalled", func(e *lockfile.Value) { e.Set("mcp_preinstalled", &lockfile.Value{Kind: lockfile.Bool}) },
			reason.MCPNotPreinstalled, "mcp_preinstalled is not true"},
		{"no preinstall", func(e *lockfile.Value) { e.Delete("mcp_preinstall") }, reason.MCPNotPreinstalled, "mcp_preinstall is missing"},
		{"other tree", func(e *lockfile.Value) {
			e.Get("mcp_preinstall").Set("artifact_hash", lockfile.Str("sha256:"+strings.Repeat("0", 64)))
		},
			reason.MCPNotPreinstalled, "artifact_hash does not name"},
		{"caret", func(e *lockfile.Value) { e.Get("mcp_preinstall").Set("version", lockfile.Str("^1.0.0")) },
			reason.MCPUnpinned, "mcp_preinstall differs"},
		{"domains", func(e *lockfile.Value) {
			e.Set("mcp_allowed_domains", &lockfile.Value{Kind: lockfile.Array, Arr: []*lockfile.Value{lockfile.Str("api.example.com")}})
		}, reason.EgressDenied, "mcp_allowed_domains must be sealed in agentnode.lock"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, p := mcpHome(t, mcpTestManifest)
			writeLock(t, os.Getenv("AGENTNODE_LOCKFILE"), p, "", false, func(d *lockfile.Document) {
				c.mutate(d.Entry(p.ID))
			}, false)
			res, err := mcpRun(t, k, "echo", `{}`)
			if reason.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) || res.Ran {
				t.Fatalf("%+v, %v; want %s containing %q", res, err, c.code, c.msg)
			}
			recs := auditRecords(t, k)
			if len(recs) != 1 || recs[0].Decision != "deny" || recs[0].Code != string(c.code) {
				t.Fatalf("audit %+v", recs)
			}
		})
	}
	// The untouched sealed entry runs.
	k, p := mcpHome(t, mcpTestManifest)
	writeLock(t, os.Getenv("AGENTNODE_LOCKFILE"), p, "", false, nil, false)
	if res, err := mcpRun(t, k, "echo", `{}`); err != nil || !*res.OK {
		t.Fatalf("sealed run: %+v, %v", res, err)
	}
}

// Kept-alive servers (mcp serve): one process serves many pipeline calls
// (its call counter keeps counting), a changed package gets a new one, and
// Close stops them all.
func TestMCPServersKeepAlive(t *testing.T) {
	k, _ := mcpHome(t, mcpTestManifest)
	servers := mcpserver.NewServers()
	k.Executors = executor.WithMCPServers(k.Executors, servers)
	defer servers.Close()
	for i := 1; i <= 3; i++ {
		res, err := mcpRun(t, k, "echo", `{}`)
		if err != nil || !*res.OK {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
		var out struct{ Calls int }
		if err := json.Unmarshal(res.Output, &out); err != nil || out.Calls != i {
			t.Fatalf("call %d served as call %d of its server (%s)", i, out.Calls, res.Output)
		}
	}
	if n := servers.Running(); n != 1 {
		t.Fatalf("%d servers running, want 1", n)
	}
	// Every call was decided and audited on its own.
	if recs := auditRecords(t, k); len(recs) != 6 {
		t.Fatalf("%d audit records, want 6", len(recs))
	}
	// A refused call never reaches the server: its counter does not move.
	if _, err := mcpRun(t, k, "ghost", `{}`); reason.CodeOf(err) != reason.PolicyDenied {
		t.Fatal(err)
	}
	res, err := mcpRun(t, k, "echo", `{}`)
	if err != nil || !strings.Contains(string(res.Output), `"calls":4`) {
		t.Fatalf("after a refusal: %s, %v", res.Output, err)
	}
	servers.Close()
	if n := servers.Running(); n != 0 {
		t.Fatalf("%d servers running after Close", n)
	}
	if _, err := mcpRun(t, k, "echo", `{}`); reason.CodeOf(err) != reason.PluginUnavailable {
		t.Fatalf("after Close: %v", err)
	}
}

// The resources and prompts requests of an mcp_server package are decided
// like a call of a read tool named after the method (plan.MCPReadMethods);
// any other name with a "/" is no tool of the package.
func TestMCPReadMethodsDecided(t *testing.T) {
	k, _ := mcpHome(t, mcpTestManifest)
	res, err := mcpRun(t, k, "resources/list", `{}`)
	if err != nil || res.Decision != "allow" || !slices.Equal(res.Actions, []string{"read"}) || !res.Ran {
		t.Fatalf("resources/list: %+v, %v", res, err)
	}
	recs := auditRecords(t, k)
	if len(recs) != 2 || recs[0].Tool != "resources/list" || recs[0].Decision != "allow" || recs[1].Event != "outcome" {
		t.Fatalf("audit %+v", recs)
	}
	// The Guard proxy refuses a read of a URI the server does not list.
	res, err = mcpRun(t, k, "resources/read", `{"uri":"mem://nowhere"}`)
	if reason.CodeOf(err) != reason.PolicyDenied || !strings.Contains(err.Error(), "did not list it") {
		t.Fatalf("resources/read: %+v, %v", res, err)
	}
	for _, tool := range []string{"resources/delete", "tools/call", "prompts/run"} {
		res, err = mcpRun(t, k, tool, `{}`)
		if reason.CodeOf(err) != reason.PolicyDenied || res.Ran || !strings.Contains(err.Error(), "has no tool") {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
	}
}
