package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
)

// session starts a Server over in-memory transports with the real kernel
// and returns a connected client session; listChanged counts the
// notifications/tools/list_changed the client received.
func session(t *testing.T, homeDir string, hosts *atomic.Int32) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	binDir := t.TempDir() // no plugins: every plugin is unavailable
	srv := New(Options{
		Kernel: dispatch.Kernel{HomeDir: homeDir, Environ: []string{"PATH=/usr/bin:/bin"}, StageTimeout: 5 * time.Second},
		NewPlugins: func() *pluginhost.Host {
			hosts.Add(1)
			return pluginhost.New(pluginhost.Options{HomeDir: homeDir, BinDir: binDir})
		},
		Version:      "test",
		PollInterval: 20 * time.Millisecond,
	})
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go func() { _ = srv.Run(ctx, st) }()
	var changed atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, &changed
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v", name, err)
	}
	return r
}

// auditRecords reads the audit log's records.
func auditRecords(t *testing.T, homeDir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(home.AuditDir(homeDir), "audit.jsonl"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// Without a config every call is refused by the kernel (not_set_up) as a
// tool error, and the server keeps serving, also after bad arguments.
func TestServeRefusesWithoutSetup(t *testing.T) {
	h := t.TempDir()
	install(t, h, toolpack("alpha-pack", "    - {name: echo, description: Echo, entrypoint: bin/tool, input_schema: {type: object}}\n"))
	var hosts atomic.Int32
	cs, _ := session(t, h, &hosts)
	if got := toolNames(t, cs); len(got) != 1 || got[0] != "alpha-pack__echo" {
		t.Fatalf("tools %v", got)
	}
	for i := 0; i < 2; i++ {
		r := call(t, cs, "alpha-pack__echo", map[string]any{"x": 1})
		if !r.IsError || !strings.HasPrefix(text(r), "deny not_set_up: ") {
			t.Fatalf("call %d: isError=%v %q", i, r.IsError, text(r))
		}
		if r.Meta["agentnode/code"] != "not_set_up" || r.Meta["agentnode/decision"] != "deny" {
			t.Fatalf("meta %v", r.Meta)
		}
	}
	for _, bad := range []any{"a string", []int{1, 2}, 7, json.RawMessage(`"x"`)} {
		r := call(t, cs, "alpha-pack__echo", bad)
		if !r.IsError || !strings.Contains(text(r), "bad arguments: toolio: input must be a JSON object") {
			t.Fatalf("arguments %v: isError=%v %q", bad, r.IsError, text(r))
		}
	}
	// Unknown tools are a protocol error (the SDK's), not a crash.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope__x"}); err == nil {
		t.Fatal("unknown tool accepted")
	}
	if got := toolNames(t, cs); len(got) != 1 {
		t.Fatalf("server state after bad calls: %v", got)
	}
	if recs := auditRecords(t, h); len(recs) != 0 {
		t.Fatalf("a machine that was never set up got audit records: %v", recs)
	}
}

// With a config but no plugins, a call reaches the trust stage and is
// refused (plugin_unavailable) with a durable audit deny record carrying the
// same request id; the plugin host is then replaced for the next call.
func TestServeDenyIsAuditedAndHostRetired(t *testing.T) {
	h := t.TempDir()
	if _, _, err := configedit.Setup(home.ConfigPath(h)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home.AuditDir(h), 0o700); err != nil {
		t.Fatal(err)
	}
	install(t, h, toolpack("alpha-pack", "    - {name: echo, description: Echo, entrypoint: bin/tool, action_type: read, input_schema: {type: object}}\n"))
	var hosts atomic.Int32
	cs, _ := session(t, h, &hosts)
	r := call(t, cs, "alpha-pack__echo", nil)
	if !r.IsError || !strings.HasPrefix(text(r), "deny plugin_") {
		t.Fatalf("isError=%v %q", r.IsError, text(r))
	}
	recs := auditRecords(t, h)
	if len(recs) != 1 {
		t.Fatalf("audit records: %v", recs)
	}
	rec := recs[0]
	if rec["event"] != "decision" || rec["decision"] != "deny" || rec["request_id"] != r.Meta["agentnode/request_id"] ||
		rec["package"] != "alpha-pack" || rec["tool"] != "echo" || rec["code"] != r.Meta["agentnode/code"] {
		t.Fatalf("audit record %v for result meta %v", rec, r.Meta)
	}
	if env, _ := rec["env"].(map[string]any); env["interactive"] != false {
		t.Fatalf("audit env %v: serve must never be interactive", rec["env"])
	}
	if n := hosts.Load(); n != 1 {
		t.Fatalf("%d plugin hosts after one call", n)
	}
	call(t, cs, "alpha-pack__echo", nil)
	if n := hosts.Load(); n != 2 {
		t.Fatalf("%d plugin hosts after a plugin refusal and another call, want 2 (retired and replaced)", n)
	}
}

// Installs and removes while serving reach the client: a list_changed
// notification, the new tool in tools/list, the removed one gone.
func TestServeFollowsStore(t *testing.T) {
	h := t.TempDir()
	var hosts atomic.Int32
	cs, changed := session(t, h, &hosts)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Fatalf("tools %v", got)
	}
	install(t, h, toolpack("late-pack", "    - {name: hello, description: Hi, entrypoint: bin/tool, input_schema: {type: object}}\n"))
	waitFor(t, "list_changed after install", func() bool { return changed.Load() >= 1 })
	if got := toolNames(t, cs); len(got) != 1 || got[0] != "late-pack__hello" {
		t.Fatalf("after install: %v", got)
	}
	if err := pkginstall.Open(home.PackagesDir(h)).Remove("late-pack"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "list_changed after remove", func() bool { return changed.Load() >= 2 })
	if got := toolNames(t, cs); len(got) != 0 {
		t.Fatalf("after remove: %v", got)
	}
}

// A tools/call of a tool installed after the last tools/list works without
// listing first (no poll: the call itself re-reads the store).
func TestServeCallsNewlyInstalledTool(t *testing.T) {
	h := t.TempDir()
	srv := New(Options{Kernel: dispatch.Kernel{HomeDir: h}, PollInterval: -1,
		NewPlugins: func() *pluginhost.Host { return pluginhost.New(pluginhost.Options{HomeDir: h, BinDir: t.TempDir()}) }})
	defer srv.Close()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	install(t, h, toolpack("new-pack", "    - {name: t1, description: T, entrypoint: bin/tool, input_schema: {type: object}}\n"))
	r := call(t, cs, "new-pack__t1", map[string]any{})
	if !r.IsError || !strings.HasPrefix(text(r), "deny not_set_up") {
		t.Fatalf("isError=%v %q", r.IsError, text(r))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestToResult(t *testing.T) {
	okTrue, okFalse := true, false
	r := toResult(&dispatch.Result{RequestID: "r1", Decision: "allow", OK: &okTrue, Output: json.RawMessage(`{"a":1}`)}, nil, nil)
	if r.IsError || text(r) != `{"a":1}` || string(r.StructuredContent.(json.RawMessage)) != `{"a":1}` {
		t.Fatalf("object result: %+v", r)
	}
	r = toResult(&dispatch.Result{Decision: "allow", OK: &okTrue, Output: json.RawMessage(`[1]`)}, nil, nil)
	if r.IsError || text(r) != `[1]` || r.StructuredContent != nil {
		t.Fatalf("array result: %+v", r)
	}
	r = toResult(&dispatch.Result{Decision: "allow", OK: &okFalse, Error: "boom"}, nil, nil)
	if !r.IsError || text(r) != "tool failed: boom" {
		t.Fatalf("tool failure: %+v", r)
	}
}

// The server's own answer is passed on as it came, agentnode's _meta keys
// added to the server's; a refused or failed run never shows it.
func TestToResultPassesServerAnswer(t *testing.T) {
	okTrue, okFalse := true, false
	raw := json.RawMessage(`{"content":[{"type":"text","text":"Echo: hi"},{"type":"image","data":"iVBORw==","mimeType":"image/png"}],"isError":true,"_meta":{"srv":1}}`)
	r := toResult(&dispatch.Result{RequestID: "r1", Decision: "allow", Placement: "sandbox", OK: &okFalse, Error: "x"}, nil, raw)
	img, isImg := r.Content[1].(*mcp.ImageContent)
	if !r.IsError || len(r.Content) != 2 || text(r) != "Echo: hi" || !isImg || img.MIMEType != "image/png" ||
		r.Meta["srv"] != float64(1) || r.Meta["agentnode/request_id"] != "r1" || r.Meta["agentnode/placement"] != "sandbox" {
		t.Fatalf("passed on: %+v", r)
	}
	r = toResult(&dispatch.Result{RequestID: "r2", Decision: "allow", OK: &okTrue}, errors.New("boom"), raw)
	if !r.IsError || len(r.Content) != 1 || !strings.HasPrefix(text(r), "error ") {
		t.Fatalf("failed run: %+v", r)
	}
}
