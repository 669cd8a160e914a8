package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// `agentnode mcp serve --package PKG` in front of an MCP server passes the
// server's answers through as it sent them: every content item of a
// tools/call result, isError, structuredContent and _meta, and the
// server's resources and prompts, each decided and audited like a call.

// tsRun runs test/mcpclient/client.mjs with plan (command, args, calls,
// requests) and returns its output as generic JSON.
func tsRun(t *testing.T, env []string, dir string, plan map[string]any) map[string]any {
	t.Helper()
	node, script := requireNode(t)
	b, _ := json.Marshal(plan)
	cmd := exec.Command(node, script, string(b))
	cmd.Env, cmd.Dir = env, dir
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	return res
}

// createdAt is the time server-everything writes into its dynamic
// resources when it makes them: not the same twice.
var createdAt = regexp.MustCompile(`created at [0-9:]+ [AP]M`)

// comparable drops agentnode's own _meta keys (and a _meta left empty)
// and the creation times from v, a result as JSON.
func comparable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = comparable(e)
			if b, err := base64.StdEncoding.DecodeString(fmt.Sprint(e)); k == "blob" && err == nil {
				out[k] = createdAt.ReplaceAllString(string(b), "created at TIME")
			}
		}
		// The go-sdk's types (agentnode's side) omit a false "required"
		// of a prompt argument and a false "hasMore" of a completion,
		// their defaults.
		for _, k := range []string{"required", "hasMore"} {
			if out[k] == false {
				delete(out, k)
			}
		}
		// The go-sdk's server (agentnode) adds to a result of the newest
		// protocol (2026-07-28, which the Go client asks for and the
		// TypeScript servers do not speak) its serverInfo and resultType:
		// the envelope, not the server's answer.
		if out["resultType"] == "complete" {
			delete(out, "resultType")
		}
		if m, ok := out["_meta"].(map[string]any); ok {
			for k := range m {
				if strings.HasPrefix(k, "agentnode/") || k == "io.modelcontextprotocol/serverInfo" {
					delete(m, k)
				}
			}
			if len(m) == 0 {
				delete(out, "_meta")
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = comparable(e)
		}
		return out
	case string:
		return createdAt.ReplaceAllString(x, "created at TIME")
	}
	return v
}

// everythingCalls are tool calls of server-everything whose answers are
// not a tool I/O result: text that is not JSON, an image, an embedded
// text and blob resource, resource links, annotations, structuredContent.
var everythingCalls = []map[string]any{
	{"name": "echo", "arguments": map[string]any{"message": "hi"}},
	{"name": "get-tiny-image", "arguments": map[string]any{}},
	{"name": "get-resource-reference", "arguments": map[string]any{"resourceType": "Text", "resourceId": 3}},
	{"name": "get-resource-reference", "arguments": map[string]any{"resourceType": "Blob", "resourceId": 2}},
	{"name": "get-resource-links", "arguments": map[string]any{"count": 3}},
	{"name": "get-annotated-message", "arguments": map[string]any{"messageType": "error", "includeImage": true}},
	{"name": "get-structured-content", "arguments": map[string]any{"location": "New York"}},
	{"name": "get-sum", "arguments": map[string]any{"a": 2, "b": 40}},
	// A tool the server does not declare: its SDK answers a tool error;
	// so does agentnode in front of it, without forwarding the call.
	{"name": "no-such-tool", "arguments": map[string]any{}},
}

// everythingRequests are resources and prompts requests of
// server-everything.
var everythingRequests = []map[string]any{
	{"method": "resources/list", "params": map[string]any{}},
	{"method": "resources/templates/list", "params": map[string]any{}},
	{"method": "resources/read", "params": map[string]any{"uri": "demo://resource/static/document/features.md"}},
	{"method": "resources/read", "params": map[string]any{"uri": "demo://resource/dynamic/text/2"}},
	{"method": "resources/read", "params": map[string]any{"uri": "demo://resource/dynamic/blob/1"}},
	{"method": "prompts/list", "params": map[string]any{}},
	{"method": "prompts/get", "params": map[string]any{"name": "simple-prompt"}},
	{"method": "prompts/get", "params": map[string]any{"name": "args-prompt", "arguments": map[string]any{"city": "Oslo"}}},
	{"method": "prompts/get", "params": map[string]any{"name": "resource-prompt", "arguments": map[string]any{"resourceType": "Text", "resourceId": "1"}}},
	// Completions of a listed prompt's argument (with the context of the
	// one before it) and of a listed resource template's variable.
	{"method": "completion/complete", "params": map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
		"argument": map[string]any{"name": "name", "value": "A"}, "context": map[string]any{"arguments": map[string]any{"department": "Engineering"}}}},
	{"method": "completion/complete", "params": map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
		"argument": map[string]any{"name": "resourceId", "value": "1"}}},
}

// The official TypeScript client gets the same answers from
// server-everything started directly and from the same server installed as
// a community package, sandboxed on libcontainer in the Node image, behind
// `agentnode mcp serve --package everything` (stdio and Streamable HTTP).
func TestMCPServePassesThroughEverything(t *testing.T) {
	node, _, everything := conformanceTools(t)
	requireNPM(t)
	requireRoot(t)
	e := newMCPEnv(t)
	pkg := everythingPackage(t, e.dir)
	e.cli(t, "setup")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.everything", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	e.cli(t, "install", pkg)
	e.cli(t, "sandbox", "build", "--node")

	direct := tsRun(t, os.Environ(), e.dir, map[string]any{"command": node, "args": []string{everything, "stdio"},
		"calls": everythingCalls, "requests": everythingRequests})
	through := tsRun(t, e.env, e.dir, map[string]any{"command": filepath.Join(binDir, "agentnode"),
		"args": []string{"mcp", "serve", "--package", "everything"}, "calls": everythingCalls, "requests": everythingRequests})

	caps, _ := through["capabilities"].(map[string]any)
	if caps["resources"] == nil || caps["prompts"] == nil {
		t.Errorf("capabilities through agentnode: %v", caps)
	}
	dr, _ := direct["results"].([]any)
	tr, _ := through["results"].([]any)
	if len(dr) != len(everythingCalls) || len(tr) != len(everythingCalls) {
		t.Fatalf("results: direct %v, through agentnode %v", dr, tr)
	}
	for i, c := range everythingCalls {
		d, th := dr[i].(map[string]any), tr[i].(map[string]any)
		if d["protocolError"] != nil || th["protocolError"] != nil {
			t.Errorf("%v: direct %v, through agentnode %v", c, d, th)
			continue
		}
		if c["name"] == "no-such-tool" {
			if d["isError"] != true || th["isError"] != true || !strings.Contains(fmt.Sprint(th["text"]), `unknown tool "no-such-tool"`) {
				t.Errorf("undeclared tool: direct %v, through agentnode %v", d, th)
			}
			continue
		}
		if !reflect.DeepEqual(comparable(d["raw"]), comparable(th["raw"])) {
			t.Errorf("%v:\n direct:  %s\n through: %s", c, jsonOf(comparable(d["raw"])), jsonOf(comparable(th["raw"])))
		}
		meta, _ := th["meta"].(map[string]any)
		if meta["agentnode/placement"] != "sandbox" || meta["agentnode/decision"] != "allow" {
			t.Errorf("%v through agentnode: _meta %v", c, meta)
		}
	}
	// The content items as they came: an image, an embedded resource.
	if img := contentTypes(tr[1]); !reflect.DeepEqual(img, []string{"text", "image", "text"}) {
		t.Errorf("get-tiny-image content types %v", img)
	}
	if res := contentTypes(tr[2]); !reflect.DeepEqual(res, []string{"text", "resource", "text"}) {
		t.Errorf("get-resource-reference content types %v", res)
	}
	if tr[0].(map[string]any)["text"] != "Echo: hi" {
		t.Errorf("echo through agentnode: %v", tr[0])
	}

	dq, _ := direct["requests"].([]any)
	tq, _ := through["requests"].([]any)
	if len(dq) != len(everythingRequests) || len(tq) != len(everythingRequests) {
		t.Fatalf("requests: direct %v, through agentnode %v", dq, tq)
	}
	for i, q := range everythingRequests {
		d, th := dq[i].(map[string]any), tq[i].(map[string]any)
		if d["result"] == nil || th["result"] == nil {
			t.Errorf("%v: direct %v, through agentnode %v", q, d, th)
			continue
		}
		if !reflect.DeepEqual(comparable(d["result"]), comparable(th["result"])) {
			t.Errorf("%v:\n direct:  %s\n through: %s", q, jsonOf(comparable(d["result"])), jsonOf(comparable(th["result"])))
		}
	}
	// Each request is decided and audited like a call of a read tool
	// named after the method.
	read := tq[2].(map[string]any)["result"].(map[string]any)
	id, _ := read["_meta"].(map[string]any)["agentnode/request_id"].(string)
	if recs := e.auditRecords(t, id); len(recs) != 2 || recs[0]["tool"] != "resources/read" || recs[0]["decision"] != "allow" ||
		recs[0]["action"] != "read" || recs[1]["event"] != "outcome" || recs[1]["backend"] != "libcontainer" {
		t.Errorf("audit of resources/read %s: %v", id, recs)
	}

	// Streamable HTTP: the same answers.
	srv := e.serveHTTP(t, "--package", "everything")
	cs := connectHTTP(t, srv.url, e.token(t))
	img := callTool(t, cs, "get-tiny-image", map[string]any{})
	if b, _ := json.Marshal(img); !reflect.DeepEqual(comparable(generic(t, b)), comparable(tr[1].(map[string]any)["raw"])) {
		t.Errorf("get-tiny-image over HTTP: %s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/features.md"})
	if err != nil {
		t.Fatalf("resources/read over HTTP: %v\nstderr: %s", err, srv.stderr)
	}
	// (the Go client's own types add "ttlMs" and "cacheScope": compare the contents)
	if b, _ := json.Marshal(rr.Contents); !reflect.DeepEqual(comparable(generic(t, b)), comparable(tq[2].(map[string]any)["result"].(map[string]any)["contents"])) {
		t.Errorf("resources/read over HTTP: %s", b)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Oslo"}})
	if err != nil || len(gp.Messages) == 0 || !strings.Contains(jsonOf(gp), "Oslo") {
		t.Errorf("prompts/get over HTTP: %v %v", jsonOf(gp), err)
	}

	// A subscription reaches the server, and its
	// notifications/resources/updated reach the subscribed client.
	updated := make(chan string, 16)
	var httpProgress progressLog
	sub, err := mcp.NewClient(&mcp.Implementation{Name: "agentnode-e2e-subscriber", Version: "1.0.0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- r.Params.URI:
			default:
			}
		},
		ProgressNotificationHandler: httpProgress.handler,
	}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: &http.Client{Transport: bearer{e.token(t)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const watched = "demo://resource/dynamic/text/7"
	if err := sub.Subscribe(ctx, &mcp.SubscribeParams{URI: watched}); err != nil {
		t.Fatalf("resources/subscribe: %v\nstderr: %s", err, srv.stderr)
	}
	if r := callTool(t, sub, "toggle-subscriber-updates", map[string]any{}); r.IsError {
		t.Fatalf("toggle-subscriber-updates: %s", jsonOf(r))
	}
	select {
	case uri := <-updated:
		if uri != watched {
			t.Errorf("notifications/resources/updated for %q, subscribed to %q", uri, watched)
		}
	case <-ctx.Done():
		t.Errorf("no notifications/resources/updated (server-everything sends one every 5 s)\nstderr: %s", srv.stderr)
	}
	if err := sub.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: watched}); err != nil {
		t.Errorf("resources/unsubscribe: %v", err)
	}

	// The progress of a call reaches the caller, under its own token, over
	// HTTP and stdio.
	httpProgress.check(t, "HTTP", sub)
	var stdioProgress progressLog
	cs2, _, stderr := e.serveArgs(t, &mcp.ClientOptions{ProgressNotificationHandler: stdioProgress.handler}, "--package", "everything")
	stdioProgress.check(t, "stdio", cs2)
	if t.Failed() {
		t.Logf("stdio serve stderr: %s", stderr)
	}
}

// progressLog keeps the progress notifications a client received.
type progressLog struct {
	mu  sync.Mutex
	got []string
}

func (l *progressLog) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf("%v %v/%v", r.Params.ProgressToken, r.Params.Progress, r.Params.Total))
}

// check calls server-everything's trigger-long-running-operation (4 steps)
// with a progress token and requires its 4 notifications under it.
func (l *progressLog) check(t *testing.T, how string, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 4}}
	params.SetProgressToken("caller-token-7")
	r, err := cs.CallTool(ctx, params)
	if err != nil || r.IsError {
		t.Fatalf("trigger-long-running-operation over %s: %v %s", how, err, jsonOf(r))
	}
	want := []string{"caller-token-7 1/4", "caller-token-7 2/4", "caller-token-7 3/4", "caller-token-7 4/4"}
	// Notifications and the answer travel apart: wait for the last one.
	for i := 0; i < 100; i++ {
		l.mu.Lock()
		n := len(l.got)
		l.mu.Unlock()
		if n >= len(want) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(l.got, want) {
		t.Errorf("progress over %s: %q, want %q", how, l.got, want)
	}
}

func contentTypes(result any) []string {
	raw, _ := result.(map[string]any)["raw"].(map[string]any)
	items, _ := raw["content"].([]any)
	var out []string
	for _, c := range items {
		out = append(out, fmt.Sprint(c.(map[string]any)["type"]))
	}
	return out
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func generic(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// hostileManifest serves test/mcpservers/hostile as a community package.
const hostileManifest = `manifest_version: "0.2"
package_id: hostile
package_type: mcp_server
name: A hostile MCP server
publisher: e2e
version: 1.0.0
summary: Answers more than it should
runtime: mcp
mcp_server:
  command: [/pack/bin/server]
  install: {manager: npm, package: "@agentnode-e2e/hostile-mcp", version: 1.0.0}
capabilities:
  tools:
    - {name: image, description: An image, entrypoint: image, action_type: read, input_schema: {type: object}}
    - {name: oops, description: Fails, entrypoint: oops, action_type: read, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// From the attacker's side: a sandboxed server whose answers are over the
// output limit, whose resource is a huge blob, or that would answer a
// resource it never listed, gets its answers bounded and refused, each
// with a clear error and its audit records.
func TestMCPServeHostileServerPassthrough(t *testing.T) {
	e := newMCPEnv(t)
	requireRoot(t)
	e.cli(t, "setup")
	e.cli(t, "sandbox", "build")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.hostile", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	pkg := filepath.Join(e.dir, "hostile")
	if err := os.MkdirAll(filepath.Join(pkg, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(extraDir, "mcpserver-hostile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "bin", "server"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "agentnode.yaml"), []byte(hostileManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cli(t, "install", pkg)
	cs, _, stderr := e.serveArgs(t, nil, "--package", "hostile")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outcome := func(meta mcp.Meta) map[string]any {
		t.Helper()
		id, _ := meta["agentnode/request_id"].(string)
		recs := e.auditRecords(t, id)
		if len(recs) != 2 || recs[0]["decision"] != "allow" || recs[1]["event"] != "outcome" {
			t.Fatalf("audit of %s: %v", id, recs)
		}
		return recs[1]
	}

	// A small image passes as sent, the server's _meta kept.
	r := callTool(t, cs, "image", map[string]any{"bytes": 64})
	if img, ok := r.Content[1].(*mcp.ImageContent); r.IsError || len(r.Content) != 2 || !ok || len(img.Data) != 64 ||
		img.MIMEType != "image/png" || r.Meta["hostile/size"] != float64(64) || r.Meta["agentnode/placement"] != "sandbox" {
		t.Fatalf("image of 64 bytes: %s\nstderr: %s", jsonOf(r), stderr)
	}
	// A tool error comes back as the server sent it, image included.
	r = callTool(t, cs, "oops", map[string]any{})
	if _, ok := r.Content[1].(*mcp.ImageContent); !r.IsError || len(r.Content) != 2 || !ok || resultText(r) != "it broke" {
		t.Fatalf("oops: %s", jsonOf(r))
	}
	outcome(r.Meta)
	// Over the output limit: a tool error, never the image.
	r = callTool(t, cs, "image", map[string]any{"bytes": 5 << 20})
	if !r.IsError || len(r.Content) != 1 || resultText(r) != "tool failed: tool output exceeded 4194304 bytes" {
		t.Fatalf("image of 5 MiB: isError %v %q", r.IsError, resultText(r))
	}
	outcome(r.Meta)

	// Resources and prompts it lists are passed on.
	lr, err := cs.ListResources(ctx, nil)
	if err != nil || len(lr.Resources) != 2 {
		t.Fatalf("resources/list: %v %v", jsonOf(lr), err)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "hostile://logs/monday.txt"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "log of monday" {
		t.Fatalf("resources/read of a template's URI: %v %v", jsonOf(rr), err)
	}
	outcome(rr.Meta)
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada" {
		t.Fatalf("prompts/get: %v %v", jsonOf(gp), err)
	}

	// refused requires a JSON-RPC error of code whose message has want and
	// whose data names the request, audited with outcome code.
	refused := func(what string, err error, code int64, want, auditCode string) {
		t.Helper()
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != code || !strings.Contains(we.Message, want) || strings.Contains(we.Message, "LEAKED") {
			t.Fatalf("%s: %v, want code %d and %q", what, err, code, want)
		}
		var data map[string]any
		if err := json.Unmarshal(we.Data, &data); err != nil {
			t.Fatalf("%s: data %q: %v", what, we.Data, err)
		}
		if rec := outcome(mcp.Meta(data)); rec["code"] != auditCode {
			t.Errorf("%s outcome: %v", what, rec)
		}
	}
	// A resource it did not list: refused before the server sees it.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "hidden://secret"})
	refused("resources/read hidden://secret", err, mcp.CodeResourceNotFound, "error policy_denied: ", "policy_denied")
	// A 5 MiB blob: over the output limit.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "hostile://huge.bin"})
	refused("resources/read hostile://huge.bin", err, jsonrpc.CodeInternalError, "exceeded 4194304 bytes", "")
	// A prompt it did not list.
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "steal"})
	refused("prompts/get steal", err, jsonrpc.CodeInvalidParams, "did not list it", "policy_denied")

	// Guard policy applies: with read actions denied, listing is refused
	// in the decision (one deny record), nothing reaches the server.
	e.cli(t, "config", "set", "guard.read", "deny")
	_, err = cs.ListResources(ctx, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || !strings.HasPrefix(we.Message, "deny policy_denied: ") {
		t.Fatalf("resources/list with guard.read deny: %v", err)
	}
	var data map[string]any
	_ = json.Unmarshal(we.Data, &data)
	if recs := e.auditRecords(t, fmt.Sprint(data["agentnode/request_id"])); len(recs) != 1 || recs[0]["decision"] != "deny" || recs[0]["tool"] != "resources/list" {
		t.Errorf("audit of the refused resources/list: %v", recs)
	}
}

// server-memory (the reference knowledge-graph server) behind `mcp serve
// --package memory-mcp`, sandboxed on libcontainer in the Node image, over
// stdio and Streamable HTTP, answers create_entities and read_graph
// exactly as the same server started directly with the host's node does
// (content and structuredContent as the server sent them).
func TestMCPServePassesThroughMemory(t *testing.T) {
	e := newMCPEnv(t)
	pkg := nodeSandboxEnv(t, e)
	var entities map[string]any
	if err := json.Unmarshal([]byte(memoryEntities), &entities); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	answers := func(cs *mcp.ClientSession) []any {
		t.Helper()
		var out []any
		for _, c := range []struct {
			tool string
			args any
		}{{"create_entities", entities}, {"read_graph", map[string]any{}}} {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			b, _ := json.Marshal(r)
			out = append(out, comparable(generic(t, b)))
		}
		return out
	}
	direct := answers(directSession(t, pkg, workspace(t)))
	cs, _, stderr := e.serveArgs(t, nil, "--package", "memory-mcp", "--workspace", workspace(t))
	stdio := answers(cs)
	if !reflect.DeepEqual(direct, stdio) {
		t.Errorf("direct:\n %s\nthrough agentnode (stdio):\n %s\nstderr: %s", jsonOf(direct), jsonOf(stdio), stderr)
	}
	srv := e.serveHTTP(t, "--package", "memory-mcp", "--workspace", workspace(t))
	if http := answers(connectHTTP(t, srv.url, e.token(t))); !reflect.DeepEqual(direct, http) {
		t.Errorf("direct:\n %s\nthrough agentnode (HTTP):\n %s\nstderr: %s", jsonOf(direct), jsonOf(http), srv.stderr)
	}
	// Its text is the server's own (not a tool I/O result re-encoded).
	if s := jsonOf(stdio[1]); !strings.Contains(s, `"structuredContent"`) || !strings.Contains(s, `"type":"text"`) {
		t.Errorf("read_graph through agentnode: %s", s)
	}
}
