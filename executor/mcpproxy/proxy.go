// Package mcpproxy is the Guard proxy in front of an MCP server that
// agentnode started (an mcp_server package): every tools/call passes a
// decision before it reaches the server, and only the tools the package
// declares are ever called or exposed.
//
// A Proxy wraps an MCP client session to the server (the official Go SDK,
// github.com/modelcontextprotocol/go-sdk). New lists the server's tools and
// compares them with the declared ones: a declared tool the server offers
// is exposed under its declared name; a tool the server offers but the
// package does not declare is never exposed nor called (Undeclared); a
// declared tool the server does not offer cannot be called (Missing).
// Call refuses an undeclared or missing tool, then asks the Decide hook —
// the kernel pipeline's decision (Guard policy, rate limit, inspectors) —
// and forwards the call only when it allows. A refusal never reaches the
// server.
//
// Used by the mcp_server executor (executor/mcpserver) for `agentnode
// run` (one call per server session) and `agentnode mcp serve` (a session
// kept alive per package across calls), after the kernel decided the call.
// It sits with the executors because it runs on the server session, which
// only an executor holds; the kernel never imports it. NewServer turns a
// Proxy into an MCP server, for callers that want the guarded server
// itself on a transport.
package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Decide is the decision hook: nil allows the call; an error refuses it
// (give it a reason code, e.g. with reason.New).
type Decide func(ctx context.Context, tool string, args json.RawMessage) error

// Options configure a Proxy.
type Options struct {
	// Declared maps every tool the package declares (the name callers use)
	// to the name of the tool on the server. Nothing else is exposed.
	Declared map[string]string
	// Decide decides each call; nil allows every declared tool (the caller
	// decided before, as the kernel pipeline does).
	Decide Decide
	// Notifications is the session's (given to Connect): a call made
	// under WithProgress gets its progress through it. Nil: none.
	Notifications *Notifications
}

// Proxy guards calls to one MCP server session. It is safe for concurrent
// use (the session is).
type Proxy struct {
	session    *mcp.ClientSession
	decide     Decide
	notes      *Notifications
	exposed    map[string]*mcp.Tool // declared name -> the server's tool, renamed
	serverName map[string]string    // declared name -> server tool name
	undeclared []string
	missing    []string
}

// ErrNotDeclared refuses a call to a tool the package does not declare
// (reason code policy_denied).
var ErrNotDeclared = errors.New("the package does not declare this tool")

// ErrNotOffered refuses a call to a declared tool the server does not
// offer.
var ErrNotOffered = errors.New("the MCP server does not offer this declared tool")

// New lists the server's tools (every page) and returns the proxy.
func New(ctx context.Context, session *mcp.ClientSession, opts Options) (*Proxy, error) {
	offered := map[string]*mcp.Tool{}
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcpproxy: tools/list: %w", err)
		}
		offered[t.Name] = t
	}
	p := &Proxy{session: session, decide: opts.Decide, notes: opts.Notifications, exposed: map[string]*mcp.Tool{}, serverName: map[string]string{}}
	onServer := map[string]bool{}
	for name, srv := range opts.Declared {
		onServer[srv] = true
		t, ok := offered[srv]
		if !ok {
			p.missing = append(p.missing, name)
			continue
		}
		c := *t
		c.Name = name
		p.exposed[name] = &c
		p.serverName[name] = srv
	}
	for name := range offered {
		if !onServer[name] {
			p.undeclared = append(p.undeclared, name)
		}
	}
	sort.Strings(p.missing)
	sort.Strings(p.undeclared)
	return p, nil
}

// Tools returns the exposed tools (declared and offered) under their
// declared names, sorted.
func (p *Proxy) Tools() []*mcp.Tool {
	out := make([]*mcp.Tool, 0, len(p.exposed))
	for _, t := range p.exposed {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Undeclared returns the server's tools the package does not declare: never
// exposed, never called.
func (p *Proxy) Undeclared() []string { return slices.Clone(p.undeclared) }

// Missing returns the declared tools the server does not offer.
func (p *Proxy) Missing() []string { return slices.Clone(p.missing) }

// Call checks and decides one call and, if allowed, forwards it. The error
// is non-nil exactly when no result came from the server: a refusal
// (ErrNotDeclared and ErrNotOffered as policy_denied, or Decide's error; the
// server saw nothing) or a failed call (the session broke, ctx ended). A
// tool error of the server is a result with IsError, not an error.
func (p *Proxy) Call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	srv, ok := p.serverName[tool]
	if !ok {
		if slices.Contains(p.missing, tool) {
			return nil, reason.New(reason.PolicyDenied, "tool %q: %w", tool, ErrNotOffered)
		}
		return nil, reason.New(reason.PolicyDenied, "tool %q: %w", tool, ErrNotDeclared)
	}
	args, err := toolio.Arguments(args)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", tool, err) // input_denied
	}
	if p.decide != nil {
		if err := p.decide(ctx, tool, args); err != nil {
			if reason.CodeOf(err) == "" {
				err = reason.Wrap(reason.PolicyDenied, err, "tool "+tool)
			}
			return nil, err
		}
	}
	params := &mcp.CallToolParams{Name: srv, Arguments: args}
	token, done := p.notes.track(ctx)
	defer done()
	if token != "" {
		params.SetProgressToken(token)
	}
	res, err := p.session.CallTool(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: tools/call %s: %w", srv, err)
	}
	return res, nil
}

// Refusal is the MCP form of a refused or failed Call: a tool error
// "deny <code>: <reason>" (the form cmd/agentnode/mcpserve uses too).
func Refusal(err error) *mcp.CallToolResult {
	code := string(reason.CodeOf(err))
	if code == "" {
		code = "error"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deny " + code + ": " + err.Error()}}}
}

// NewServer returns an MCP server exposing p's tools; each tools/call goes
// through p.Call, and a refusal is a tool error (Refusal).
func NewServer(p *Proxy, impl *mcp.Implementation) *mcp.Server {
	s := mcp.NewServer(impl, nil)
	for _, t := range p.Tools() {
		name := t.Name
		s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args json.RawMessage
			if req != nil && req.Params != nil {
				args = req.Params.Arguments
			}
			res, err := p.Call(ctx, name, args)
			if err != nil {
				return Refusal(err), nil
			}
			return res, nil
		})
	}
	return s
}

// Connect starts an MCP client session over a server's stdio: r is the
// server's stdout, w its stdin. Frames are bounded by maxFrame bytes (0:
// the SDK's default). The client offers the server nothing (no roots,
// sampling or elicitation), so a server cannot call back into agentnode.
// n (nil: none) routes the server's notifications/resources/updated (of
// resources subscribed with Request) and notifications/progress (of calls
// made under WithProgress).
func Connect(ctx context.Context, r io.ReadCloser, w io.WriteCloser, maxFrame int, n *Notifications) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if n != nil {
		opts.ResourceUpdatedHandler = func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req != nil && req.Params != nil && n.ResourceUpdated != nil {
				n.ResourceUpdated(ctx, req.Params)
			}
		}
		opts.ProgressNotificationHandler = func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req != nil && req.Params != nil {
				n.progress(ctx, req.Params)
			}
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agentnode", Title: "agentnode Guard proxy"}, opts)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: n.Reader(r), Writer: w, MaxLineLength: maxFrame}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: initialize: %w", err)
	}
	return cs, nil
}

// ToolResult converts a server's result to the tool I/O result: ok is
// !IsError; result is the structuredContent when present, else the text
// content as JSON when it is one JSON value, else as a JSON string; errText
// is the text of an error result.
func ToolResult(r *mcp.CallToolResult) (ok bool, result json.RawMessage, errText string) {
	var text strings.Builder
	for _, c := range r.Content {
		if tc, isText := c.(*mcp.TextContent); isText {
			text.WriteString(tc.Text)
		}
	}
	if r.IsError {
		t := text.String()
		if t == "" {
			t = "the MCP server reported an error without text"
		}
		return false, nil, t
	}
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			return true, b, ""
		}
	}
	t := strings.TrimSpace(text.String())
	if t != "" && json.Valid([]byte(t)) {
		return true, json.RawMessage(t), ""
	}
	b, _ := json.Marshal(text.String())
	return true, b, ""
}
