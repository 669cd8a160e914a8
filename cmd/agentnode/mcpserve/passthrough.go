package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/executor/mcpproxy"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// isMCPServer reports whether pkg is installed as an mcp_server package
// (read when serve starts: its resources and prompts are advertised).
func isMCPServer(homeDir, pkg string) bool {
	p, err := store.Open(home.PackagesDir(homeDir)).WithVerdicts(validcache.Open(home.VerdictsDir(homeDir))).Get(pkg)
	return err == nil && p.Manifest != nil && p.Manifest.PackageType == manifest.TypeMCPServer
}

// passingThrough answers, with --package of an mcp_server package, the resources and prompts
// requests of the MCP spec (plan.MCPReadMethods) with the served package's
// server's own answers: each is one request through the kernel, decided as
// a read tool named after the method (Guard policy, rate limit,
// inspectors, audit: the decision and outcome records name the method as
// the tool), forwarded by the Guard proxy of the package's kept server.
// Without --package (many packages at once) the SDK's own handlers answer
// them with empty lists.
func (s *Server) passingThrough(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !s.passResources {
			return next(ctx, method, req)
		}
		if method == "tools/call" {
			if res := s.undeclared(req); res != nil {
				return res, nil
			}
		}
		if plan.MCPReadMethods[method] == "" || subscriptions[method] {
			return next(ctx, method, req)
		}
		return s.forward(ctx, method, req.GetParams())
	}
}

// undeclared answers, with --package of an mcp_server package, a
// tools/call of a name the server does not declare the way servers built
// on the MCP SDKs (TypeScript and Python) answer it, so that agentnode in
// front of one server answers as the server would: a tool error (isError)
// naming the tool, not the JSON-RPC -32602 of the catalogue. Nothing is
// forwarded, decided or run. It returns nil for a declared tool (the call
// goes on) and for params the SDK itself refuses.
func (s *Server) undeclared(req mcp.Request) *mcp.CallToolResult {
	p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
	if !ok || p == nil {
		return nil
	}
	s.mu.Lock()
	_, known := s.registered[p.Name]
	s.mu.Unlock()
	if known {
		return nil
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("unknown tool %q: the MCP server of package %s does not declare it", p.Name, s.opts.Package)}},
	}
}

// subscriptions are the requests the SDK's subscribe handlers pass on
// (subscribe, unsubscribe), so that it keeps track of which session
// subscribed to what.
var subscriptions = map[string]bool{"resources/subscribe": true, "resources/unsubscribe": true}

// subscribe passes a resources/subscribe through the kernel to the
// server (any URI: an update names only the URI, a read is checked
// again); the SDK then sends the session the server's
// notifications/resources/updated for it (resourceUpdated).
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	_, err := s.forward(ctx, "resources/subscribe", req.Params)
	return err
}

// unsubscribe passes a resources/unsubscribe through like subscribe.
func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	_, err := s.forward(ctx, "resources/unsubscribe", req.Params)
	return err
}

// resourceUpdated forwards the served package's server's
// notifications/resources/updated to the sessions subscribed to the URI.
func (s *Server) resourceUpdated(ctx context.Context, pkg string, params *mcp.ResourceUpdatedNotificationParams) {
	if pkg != s.opts.Package {
		return
	}
	if err := s.mcp.ResourceUpdated(ctx, params); err != nil {
		s.logf("notifications/resources/updated %s: %v", params.URI, err)
	}
}

// forward runs one resources or prompts request through the kernel and
// returns the server's result, agentnode's _meta keys added, or a
// JSON-RPC error saying why not: mcp.CodeResourceNotFound (-32602, the
// MCP spec's resource-not-found) for a resources/read of a URI the server
// does not list, -32602 for a prompts/get of a prompt it does not list or
// params refused as input, -32603 for any other refusal or failure, each
// "deny <code>: …", "error <code>: …" or "tool failed: …" with agentnode's
// _meta keys (the request id of the audit records) as the error's data.
func (s *Server) forward(ctx context.Context, method string, params mcp.Params) (mcp.Result, error) {
	in := json.RawMessage(`{}`)
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: %v", err)}
		}
		if string(b) != "null" {
			in = b
		}
	}
	out, raw, runErr := s.run(ctx, s.opts.Package, method, in)
	if out == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "deny " + string(reason.PluginUnavailable) + ": the server is shutting down"}
	}
	if runErr == nil && raw != nil {
		if r, err := asSent(method, raw, out); err == nil {
			return r, nil
		}
	}
	// The text of a tool error (toResult), as a JSON-RPC error.
	msg := "failed: the MCP server's answer could not be passed on"
	if tr := toResult(out, runErr, nil); len(tr.Content) > 0 {
		if tc, ok := tr.Content[0].(*mcp.TextContent); ok {
			msg = tc.Text
		}
	}
	data, _ := json.Marshal(resultMeta(out, nil))
	code := int64(jsonrpc.CodeInternalError)
	switch {
	case errors.Is(runErr, mcpproxy.ErrNoCompletions):
		code = jsonrpc.CodeMethodNotFound
	case errors.Is(runErr, mcpproxy.ErrNotListed) && method == "resources/read":
		code = mcp.CodeResourceNotFound
	case errors.Is(runErr, mcpproxy.ErrNotListed), reason.CodeOf(runErr) == reason.InputDenied:
		code = jsonrpc.CodeInvalidParams
	}
	return nil, &jsonrpc.Error{Code: code, Message: msg, Data: data}
}

// sentResult is a server's result passed on as the JSON it came in (its
// own fields, agentnode's _meta keys added), not re-encoded from the SDK's
// type, which would add fields the server did not send (the go-sdk
// writes "ttlMs" and "cacheScope" always). The SDK sees the typed result.
type sentResult struct {
	mcp.Result
	json json.RawMessage
}

func (r sentResult) MarshalJSON() ([]byte, error) { return r.json, nil }

// asSent checks that raw is a result of method's type and returns it as
// sent, with agentnode's _meta keys about res added.
func asSent(method string, raw json.RawMessage, res *dispatch.Result) (mcp.Result, error) {
	typed := resultOf(method)
	if typed == nil {
		return nil, fmt.Errorf("no result type for %s", method)
	}
	if err := json.Unmarshal(raw, typed); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	meta := resultMeta(res, typed.GetMeta())
	typed.SetMeta(meta)
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = b
	if b, err = json.Marshal(fields); err != nil {
		return nil, err
	}
	return sentResult{Result: typed, json: b}, nil
}

// resultOf is a new result of method's type.
func resultOf(method string) mcp.Result {
	switch method {
	case "resources/list":
		return &mcp.ListResourcesResult{}
	case "resources/templates/list":
		return &mcp.ListResourceTemplatesResult{}
	case "resources/read":
		return &mcp.ReadResourceResult{}
	case "prompts/list":
		return &mcp.ListPromptsResult{}
	case "prompts/get":
		return &mcp.GetPromptResult{}
	case "completion/complete":
		return &mcp.CompleteResult{}
	case "resources/subscribe", "resources/unsubscribe":
		return &mcp.ListResourcesResult{} // {} and _meta: only whether it failed is passed on
	}
	return nil
}
