package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
)

// upstream is a real go-sdk MCP server (in memory) that counts the calls it
// receives: a refusal must leave the count unchanged.
type upstream struct {
	calls atomic.Int64
	last  atomic.Value // string: the last arguments it received
}

func (u *upstream) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	echo := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.calls.Add(1)
		u.last.Store(string(req.Params.Arguments))
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}},
			StructuredContent: json.RawMessage(req.Params.Arguments),
		}, nil
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, echo)
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such record"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "exfiltrate", InputSchema: json.RawMessage(`{"type":"object"}`)}, echo)
	return s
}

// connect serves u in memory and returns a client session to it.
func connect(t testing.TB, u *upstream) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := u.server().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

var declared = map[string]string{"echo": "echo", "lookup": "fail", "gone": "not_on_server"}

func TestProxyExposesOnlyDeclaredAndOffered(t *testing.T) {
	p, err := New(context.Background(), connect(t, &upstream{}), Options{Declared: declared})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range p.Tools() {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"echo", "lookup"}) {
		t.Fatalf("exposed %v", names)
	}
	if !slices.Equal(p.Undeclared(), []string{"exfiltrate"}) || !slices.Equal(p.Missing(), []string{"gone"}) {
		t.Fatalf("undeclared %v, missing %v", p.Undeclared(), p.Missing())
	}
}

// From the caller's side: undeclared, missing, malformed and denied calls
// are refused with their codes and never reach the server; allowed ones
// do, with exactly the arguments decided.
func TestProxyCall(t *testing.T) {
	u := &upstream{}
	var decided []string
	p, err := New(context.Background(), connect(t, u), Options{
		Declared: declared,
		Decide: func(ctx context.Context, tool string, args json.RawMessage) error {
			decided = append(decided, tool+" "+string(args))
			if strings.Contains(string(args), "rm -rf") {
				return reason.New(reason.InputDenied, "inspector builtin: dangerous input")
			}
			if strings.Contains(string(args), "plain") {
				return errors.New("no code")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refused := []struct {
		tool, args string
		code       reason.Code
		want       string
	}{
		{"exfiltrate", `{}`, reason.PolicyDenied, "does not declare"},
		{"nope", `{}`, reason.PolicyDenied, "does not declare"},
		{"gone", `{}`, reason.PolicyDenied, "does not offer"},
		{"echo", `[1]`, reason.InputDenied, "JSON object"},
		{"echo", `"x"`, reason.InputDenied, "JSON object"},
		{"echo", `{"cmd":"rm -rf /"}`, reason.InputDenied, "dangerous input"},
		{"echo", `{"plain":1}`, reason.PolicyDenied, "no code"},
	}
	for _, c := range refused {
		res, err := p.Call(ctx, c.tool, json.RawMessage(c.args))
		if err == nil || res != nil || reason.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, %v [%s]; want %s containing %q", c.tool, c.args, res, err, reason.CodeOf(err), c.code, c.want)
		}
		r := Refusal(err)
		if !r.IsError || !strings.HasPrefix(r.Content[0].(*mcp.TextContent).Text, "deny "+string(c.code)+": ") {
			t.Errorf("refusal %+v", r.Content[0])
		}
	}
	if n := u.calls.Load(); n != 0 {
		t.Fatalf("the server got %d refused calls", n)
	}
	if !slices.Equal(decided, []string{`echo {"cmd":"rm -rf /"}`, `echo {"plain":1}`}) {
		t.Fatalf("decided %q: undeclared or malformed calls must not even be decided", decided)
	}

	res, err := p.Call(ctx, "echo", json.RawMessage(`{"x":1}`))
	if err != nil || u.calls.Load() != 1 || u.last.Load() != `{"x":1}` {
		t.Fatalf("allowed call: %+v, %v (server calls %d, args %v)", res, err, u.calls.Load(), u.last.Load())
	}
	if ok, out, _ := ToolResult(res); !ok || string(out) != `{"x":1}` {
		t.Fatalf("tool result %v %s", ok, out)
	}
	res, err = p.Call(ctx, "echo", nil)
	if err != nil || u.last.Load() != `{}` {
		t.Fatalf("no arguments: %v, server got %v", err, u.last.Load())
	}
	res, err = p.Call(ctx, "lookup", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, msg := ToolResult(res); ok || msg != "no such record" {
		t.Fatalf("server tool error: ok=%v %q", ok, msg)
	}
}

func TestToolResult(t *testing.T) {
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, c := range []struct {
		r    *mcp.CallToolResult
		want string
	}{
		{text(`{"a":1}`), `{"a":1}`},
		{text(`42`), `42`},
		{text(`hello world`), `"hello world"`},
		{text(``), `""`},
		{&mcp.CallToolResult{StructuredContent: map[string]any{"b": true}, Content: []mcp.Content{&mcp.TextContent{Text: "ignored"}}}, `{"b":true}`},
	} {
		ok, got, _ := ToolResult(c.r)
		if !ok || string(got) != c.want {
			t.Errorf("%+v: %v %s, want %s", c.r, ok, got, c.want)
		}
	}
	if ok, _, msg := ToolResult(&mcp.CallToolResult{IsError: true}); ok || msg == "" {
		t.Errorf("empty error: %v %q", ok, msg)
	}
}

// NewServer puts the proxy on a transport: a client sees only the declared
// tools, and a refusal is a tool error.
func TestNewServer(t *testing.T) {
	u := &upstream{}
	p, err := New(context.Background(), connect(t, u), Options{Declared: declared,
		Decide: func(ctx context.Context, tool string, args json.RawMessage) error {
			if strings.Contains(string(args), "deny") {
				return reason.New(reason.PolicyDenied, "denied by the test")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	cs := clientOf(t, NewServer(p, &mcp.Implementation{Name: "guard"}))
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"echo", "lookup"}) {
		t.Fatalf("tools/list through the proxy: %v", names)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"deny": 1}})
	if err != nil || !r.IsError || !strings.HasPrefix(r.Content[0].(*mcp.TextContent).Text, "deny policy_denied: ") || u.calls.Load() != 0 {
		t.Fatalf("denied: %+v, %v (server calls %d)", r, err, u.calls.Load())
	}
	r, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"y": 2}})
	if err != nil || r.IsError || u.calls.Load() != 1 {
		t.Fatalf("allowed: %+v, %v", r, err)
	}
}

func clientOf(t testing.TB, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// policyDecide is the decision hook of the benchmarks: the in-process Guard
// policy engine, as the pipeline calls it.
func policyDecide(ctx context.Context, tool string, args json.RawMessage) error {
	d := policy.Decide(policy.Input{
		Package:     "bench-mcp",
		Tool:        tool,
		Actions:     policy.Classify(policy.ClassifyInput{ToolName: tool, DeclaredAction: "read", NetworkLevel: "none", CodeExecutionLevel: "none"}),
		TrustLevel:  "verified",
		Permissions: policy.Permissions{Network: "none", Filesystem: "none", CodeExecution: "none"},
	})
	if d.Verdict != policy.Allow {
		return reason.New(reason.PolicyDenied, "%s", d.Reason())
	}
	return nil
}

// BenchmarkDirectCall is the raw thing: a go-sdk client calling the
// in-memory server.
func BenchmarkDirectCall(b *testing.B) {
	cs := connect(b, &upstream{})
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProxyCall is the same call through Proxy.Call with the policy
// engine deciding: the Guard proxy's per-call overhead is the difference.
func BenchmarkProxyCall(b *testing.B) {
	p, err := New(context.Background(), connect(b, &upstream{}), Options{Declared: declared, Decide: policyDecide})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"x":1}`)
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Call(ctx, "echo", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProxyServerCall adds the proxy's own MCP hop: client → guard
// server (NewServer) → upstream, all in memory.
func BenchmarkProxyServerCall(b *testing.B) {
	p, err := New(context.Background(), connect(b, &upstream{}), Options{Declared: declared, Decide: policyDecide})
	if err != nil {
		b.Fatal(err)
	}
	cs := clientOf(b, NewServer(p, &mcp.Implementation{Name: "guard"}))
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}
