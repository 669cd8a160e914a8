package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// ErrNotListed refuses a resources/read of a URI the server did not list
// (no listed resource has it and no listed resource template matches it)
// and a prompts/get of a prompt it did not list (reason code
// policy_denied): only what the server announces is passed on.
var ErrNotListed = errors.New("the MCP server did not list it")

// ErrNotMethod refuses a request that is not one of the resources,
// prompts and completion requests passed through (plan.MCPReadMethods).
var ErrNotMethod = errors.New("not a resources, prompts or completion request agentnode passes through")

// ErrNoCompletions refuses a completion/complete to a server that does not
// declare the completions capability.
var ErrNoCompletions = errors.New("the MCP server does not offer completions")

// Request decides and forwards one resources or prompts request of the
// MCP spec (method one of plan.MCPReadMethods, params its JSON params) and
// returns the server's result as JSON. It asks Decide with the method as
// the tool name. A resources/read of a URI the server does not list, or a
// prompts/get of a prompt it does not list, is refused (ErrNotListed)
// without reaching the server with it. Only the params' known fields are
// sent (decoded into the SDK's params type and encoded again).
func (p *Proxy) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if plan.MCPReadMethods[method] == "" {
		return nil, reason.New(reason.PolicyDenied, "%s: %w", method, ErrNotMethod)
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	if p.decide != nil {
		if err := p.decide(ctx, method, params); err != nil {
			if reason.CodeOf(err) == "" {
				err = reason.Wrap(reason.PolicyDenied, err, method)
			}
			return nil, err
		}
	}
	var (
		res any
		err error
	)
	switch method {
	case "resources/list":
		var prm mcp.ListResourcesParams
		if err = decodeParams(method, params, &prm); err == nil {
			res, err = p.session.ListResources(ctx, &prm)
		}
	case "resources/templates/list":
		var prm mcp.ListResourceTemplatesParams
		if err = decodeParams(method, params, &prm); err == nil {
			res, err = p.session.ListResourceTemplates(ctx, &prm)
		}
	case "resources/read":
		var prm mcp.ReadResourceParams
		if err = decodeParams(method, params, &prm); err == nil {
			if err = p.resourceListed(ctx, prm.URI); err == nil {
				res, err = p.session.ReadResource(ctx, &prm)
			}
		}
	case "resources/subscribe":
		// Any URI, listed or not: an update names only the URI, and a
		// read of it is checked again.
		var prm mcp.SubscribeParams
		if err = decodeParams(method, params, &prm); err == nil {
			res, err = struct{}{}, p.session.Subscribe(ctx, &prm)
		}
	case "resources/unsubscribe":
		var prm mcp.UnsubscribeParams
		if err = decodeParams(method, params, &prm); err == nil {
			res, err = struct{}{}, p.session.Unsubscribe(ctx, &prm)
		}
	case "prompts/list":
		var prm mcp.ListPromptsParams
		if err = decodeParams(method, params, &prm); err == nil {
			res, err = p.session.ListPrompts(ctx, &prm)
		}
	case "prompts/get":
		var prm mcp.GetPromptParams
		if err = decodeParams(method, params, &prm); err == nil {
			if err = p.promptListed(ctx, prm.Name); err == nil {
				res, err = p.session.GetPrompt(ctx, &prm)
			}
		}
	case "completion/complete":
		var prm mcp.CompleteParams
		if err = decodeParams(method, params, &prm); err == nil {
			if err = p.completable(ctx, prm.Ref); err == nil {
				res, err = p.session.Complete(ctx, &prm)
			}
		}
	}
	if err != nil {
		if reason.CodeOf(err) != "" {
			return nil, err
		}
		return nil, fmt.Errorf("mcpproxy: %s: %w", method, err)
	}
	return asReceived(res)
}

// asReceived is res as JSON without the fields the go-sdk's types write
// even when the server did not send them ("ttlMs": 0, "cacheScope": "";
// a server that sent them at these values meant the same).
func asReceived(res any) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for k, zero := range map[string]string{"ttlMs": "0", "cacheScope": `""`} {
		if string(fields[k]) == zero {
			delete(fields, k)
		}
	}
	return json.Marshal(fields)
}

func decodeParams(method string, params json.RawMessage, v any) error {
	if err := json.Unmarshal(params, v); err != nil {
		return reason.New(reason.InputDenied, "%s: params: %w", method, err)
	}
	return nil
}

// resourceListed refuses uri unless the server lists a resource with it
// or a resource template matching it (every page of both lists).
func (p *Proxy) resourceListed(ctx context.Context, uri string) error {
	for r, err := range p.session.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("resources/list: %w", err)
		}
		if r.URI == uri {
			return nil
		}
	}
	for t, err := range p.session.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("resources/templates/list: %w", err)
		}
		if tmpl, err := uritemplate.New(t.URITemplate); err == nil && tmpl.Regexp().MatchString(uri) {
			return nil
		}
	}
	return reason.New(reason.PolicyDenied, "resources/read %q: %w (neither a listed resource nor a match of a listed resource template)", uri, ErrNotListed)
}

// completable refuses a completion/complete unless the server declares
// completions and ref names what it lists: a prompt of prompts/list
// (ref/prompt), a resource template's URI template of
// resources/templates/list or a resource's URI of resources/list
// (ref/resource).
func (p *Proxy) completable(ctx context.Context, ref *mcp.CompleteReference) error {
	if init := p.session.InitializeResult(); init == nil || init.Capabilities == nil || init.Capabilities.Completions == nil {
		return reason.New(reason.PolicyDenied, "completion/complete: %w", ErrNoCompletions)
	}
	if ref == nil {
		return reason.New(reason.InputDenied, "completion/complete: params: no ref")
	}
	switch ref.Type {
	case "ref/prompt":
		err := p.promptListed(ctx, ref.Name)
		if errors.Is(err, ErrNotListed) {
			return reason.New(reason.PolicyDenied, "completion/complete of prompt %q: %w", ref.Name, ErrNotListed)
		}
		return err
	case "ref/resource":
		for t, err := range p.session.ResourceTemplates(ctx, nil) {
			if err != nil {
				return fmt.Errorf("resources/templates/list: %w", err)
			}
			if t.URITemplate == ref.URI {
				return nil
			}
		}
		for r, err := range p.session.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("resources/list: %w", err)
			}
			if r.URI == ref.URI {
				return nil
			}
		}
		return reason.New(reason.PolicyDenied, "completion/complete of resource %q: %w", ref.URI, ErrNotListed)
	}
	return reason.New(reason.InputDenied, "completion/complete: params: ref type %q is neither ref/prompt nor ref/resource", ref.Type)
}

// promptListed refuses a prompt the server does not list.
func (p *Proxy) promptListed(ctx context.Context, name string) error {
	var names []string
	for pr, err := range p.session.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("prompts/list: %w", err)
		}
		names = append(names, pr.Name)
	}
	if slices.Contains(names, name) {
		return nil
	}
	return reason.New(reason.PolicyDenied, "prompts/get %q: %w", name, ErrNotListed)
}
