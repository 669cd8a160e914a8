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
// (even one it lists nowhere) and counts the reads and gets it receives.
func resourceServer(t *testing.T, reads *atomic.Int64) *mcp.ClientSession {
	t.Helper()
	subscribed := func(context.Context, *mcp.SubscribeRequest) error { return nil }
	unsubscribed := func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	s := mcp.NewServer(&mcp.Implementation{Name: "resources", Version: "1.0.0"},
		&mcp.ServerOptions{SubscribeHandler: subscribed, UnsubscribeHandler: unsubscribed})
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
			if method == "resources/read" || method == "prompts/get" {
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
	p, err := New(context.Background(), resourceServer(t, &reads), Options{
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
		{"completion/complete", `{}`, "", ErrNotMethod, 3},
		// Subscribing to any URI is passed on (an update names only it).
		{"resources/subscribe", `{"uri":"mem://anything"}`, "{}", nil, 3},
		{"resources/unsubscribe", `{"uri":"mem://anything"}`, "{}", nil, 3},
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
	if len(decided) != 11 || decided[0] != "resources/list {}" || decided[1] != "resources/templates/list {}" {
		t.Errorf("decided: %q", decided)
	}
	if _, err := p.Request(ctx, "resources/read", json.RawMessage(`{"uri":"mem://a","x":"refuse-me"}`)); reason.CodeOf(err) != reason.PolicyDenied || reads.Load() != 3 {
		t.Errorf("refused read: %v, reads %d", err, reads.Load())
	}
	if _, err := p.Request(ctx, "resources/read", json.RawMessage(`{"uri":5}`)); reason.CodeOf(err) != reason.InputDenied {
		t.Errorf("bad params: %v", err)
	}
}
