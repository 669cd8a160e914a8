package mcpserver

import (
	"context"
	"encoding/json"
	"sync"
)

// Passthrough receives the server's own answer to the call made under the
// context WithPassthrough returned: the CallToolResult of a tools/call
// (every content item, isError, structuredContent, _meta), or the result
// of a resources or prompts request (plan.MCPReadMethods), as JSON of at
// most the tool output limit. `agentnode mcp serve` hands it to its client
// as the server sent it; the outcome (and `agentnode run`) keeps the tool
// I/O result. Nothing is set when the call was refused, failed or its
// answer was over the limit.
type Passthrough struct {
	mu     sync.Mutex
	result json.RawMessage
}

type passthroughKey struct{}

// WithPassthrough returns ctx carrying a new Passthrough, and it.
func WithPassthrough(ctx context.Context) (context.Context, *Passthrough) {
	pt := &Passthrough{}
	return context.WithValue(ctx, passthroughKey{}, pt), pt
}

// Result is the server's answer as JSON, or nil.
func (pt *Passthrough) Result() json.RawMessage {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.result
}

// passingOn reports whether ctx carries a Passthrough.
func passingOn(ctx context.Context) bool {
	_, ok := ctx.Value(passthroughKey{}).(*Passthrough)
	return ok
}

// passOn hands the server's answer to ctx's Passthrough, if any.
func passOn(ctx context.Context, result json.RawMessage) {
	if pt, ok := ctx.Value(passthroughKey{}).(*Passthrough); ok {
		pt.mu.Lock()
		pt.result = result
		pt.mu.Unlock()
	}
}
