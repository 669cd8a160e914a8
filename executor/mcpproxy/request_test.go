package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/kernel/reason"
)

// resourceServer is a real go-sdk server (in memory) with a resource, a
// resource template and a prompt; it answers a resources/read of any URI
// (even one it lists nowhere) and counts the reads, gets and completions it
// receives. With complete it offers completions of anything.
func resourceServer(t *testing.T, reads *atomic.Int64, complete bool) *mcp.ClientSession {
	t.Helper()
	subscribed := func(context.Context, *mcp.SubscribeRequest) error { return nil }
	unsubscribed := func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	opts := &mcp.ServerOptions{SubscribeHandler: subscribed, UnsubscribeHandler: unsubscribed}
	if complete {
		opts.CompletionHandler = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-done"}}}, nil
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "resources", Version: "1.0.0"}, opts)
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "body of " + req.Params.URI}}}, nil
	}
	s.AddResource(&mcp.Resource{Name: "a", URI: "mem://a"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "day", URITemplate: "mem://logs/{day}"}, read)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi " + req.Params.Arguments["name"]}}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/read" || method == "prompts/get" || method == "completion/complete" {
				reads.Add(1)
			}
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok && p.URI == "mem://unlisted" {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: p.URI, Text: "LEAKED"}}}, nil
			}
			return next(ctx, method, req)
		}
	})
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

func TestProxyRequest(t *testing.T) {
	var reads atomic.Int64
	var decided []string
	p, err := New(context.Background(), resourceServer(t, &reads, true), Options{
		Decide: func(ctx context.Context, tool string, args json.RawMessage) error {
			decided = append(decided, tool+" "+string(args))
			if strings.Contains(string(args), "refuse-me") {
				return reason.New(reason.PolicyDenied, "refused")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		method, params string
		want           string // in the result
		wantErr        error
		reads          int64
	}{
		{"resources/list", `{}`, `"uri":"mem://a"`, nil, 0},
		{"resources/templates/list", ``, `"uriTemplate":"mem://logs/{day}"`, nil, 0},
		{"resources/read", `{"uri":"mem://a"}`, `"text":"body of mem://a"`, nil, 1},
		{"resources/read", `{"uri":"mem://logs/monday"}`, `"text":"body of mem://logs/monday"`, nil, 2},
		{"prompts/list", `{}`, `"name":"greet"`, nil, 2},
		{"prompts/get", `{"name":"greet","arguments":{"name":"Ada"}}`, `"text":"hi Ada"`, nil, 3},
		// From the attacker's side: what the server does not list never
		// reaches it, though it would answer.
		{"resources/read", `{"uri":"mem://unlisted"}`, "", ErrNotListed, 3},
		{"resources/read", `{"uri":"mem://logs/a/b"}`, "", ErrNotListed, 3},
		{"prompts/get", `{"name":"steal"}`, "", ErrNotListed, 3},
		{"tools/call", `{}`, "", ErrNotMethod, 3},
		{"logging/setLevel", `{"level":"debug"}`, "", ErrNotMethod, 3},
		// Completions of what the server lists: a prompt's argument, a
		// resource template's variable; of anything else never.
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"Ad"}}`, `"values":["Ad-done"]`, nil, 4},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"mem://logs/{day}"},"argument":{"name":"day","value":"mon"}}`, `"values":["mon-done"]`, nil, 5},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"steal"},"argument":{"name":"x","value":""}}`, "", ErrNotListed, 5},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"mem://secret/{x}"},"argument":{"name":"x","value":""}}`, "", ErrNotListed, 5},
		// Subscribing to any URI is passed on (an update names only it).
		{"resources/subscribe", `{"uri":"mem://anything"}`, "{}", nil, 5},
		{"resources/unsubscribe", `{"uri":"mem://anything"}`, "{}", nil, 5},
	} {
		got, err := p.Request(ctx, c.method, json.RawMessage(c.params))
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) || reason.CodeOf(err) != reason.PolicyDenied || got != nil {
				t.Errorf("%s %s: %s, %v; want %v (policy_denied)", c.method, c.params, got, err, c.wantErr)
			}
		} else if err != nil || !strings.Contains(string(got), c.want) {
			t.Errorf("%s %s: %s, %v; want %s", c.method, c.params, got, err, c.want)
		}
		if strings.Contains(string(got), "LEAKED") || strings.Contains(string(got), `"ttlMs":0`) || strings.Contains(string(got), `"cacheScope":""`) {
			t.Errorf("%s %s: %s", c.method, c.params, got)
		}
		if n := reads.Load(); n != c.reads {
			t.Errorf("%s %s: the server saw %d reads and gets, want %d", c.method, c.params, n, c.reads)
		}
	}
	// The decision hook decides each request, with the method as the tool;
	// a refusal reaches nothing.
	if len(decided) != 15 || decided[0] != "resources/list {}" || decided[1] != "resources/templates/list {}" {
		t.Errorf("decided: %q", decided)
	}
	if _, err := p.Request(ctx, "resources/read", json.RawMessage(`{"uri":"mem://a","x":"refuse-me"}`)); reason.CodeOf(err) != reason.PolicyDenied || reads.Load() != 5 {
		t.Errorf("refused read: %v, reads %d", err, reads.Load())
	}
	if _, err := p.Request(ctx, "resources/read", json.RawMessage(`{"uri":5}`)); reason.CodeOf(err) != reason.InputDenied {
		t.Errorf("bad params: %v", err)
	}
	for _, bad := range []string{`{"argument":{"name":"x","value":""}}`, `{"ref":{"type":"ref/tool","name":"greet"},"argument":{"name":"x","value":""}}`} {
		if _, err := p.Request(ctx, "completion/complete", json.RawMessage(bad)); reason.CodeOf(err) != reason.InputDenied || reads.Load() != 5 {
			t.Errorf("completion/complete %s: %v, reads %d", bad, err, reads.Load())
		}
	}
}

// TestProxyCompletionsNotOffered: a server that does not declare the
// completions capability is not asked for any.
func TestProxyCompletionsNotOffered(t *testing.T) {
	var reads atomic.Int64
	p, err := New(context.Background(), resourceServer(t, &reads, false), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Request(context.Background(), "completion/complete", json.RawMessage(`{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"A"}}`))
	if !errors.Is(err, ErrNoCompletions) || reads.Load() != 0 {
		t.Errorf("completion/complete without the capability: %v, reads %d", err, reads.Load())
	}
}
