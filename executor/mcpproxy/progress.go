package mcpproxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProgressFunc receives the progress notifications of one call (its
// progress token is the caller's, not the server's).
type ProgressFunc func(ctx context.Context, p *mcp.ProgressNotificationParams)

type progressKey struct{}

// WithProgress returns ctx asking that the progress of the tools/call made
// under it be passed to f: Call then gives the server a progress token of
// the proxy's own, and the notifications/progress the server sends with it
// go to f until the call returns.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// Notifications routes what a server sends outside the answers to
// requests. Create one per server session, give it to Connect and to New
// (Options.Notifications).
type Notifications struct {
	// ResourceUpdated, if set, receives the server's
	// notifications/resources/updated.
	ResourceUpdated func(context.Context, *mcp.ResourceUpdatedNotificationParams)

	next  atomic.Int64
	mu    sync.Mutex
	calls map[string]ProgressFunc // the proxy's progress token -> the call's receiver
}

// track gives a call under ctx that wants its progress a token of its own
// and returns it ("" when ctx does not ask) and the function that ends it.
func (n *Notifications) track(ctx context.Context) (string, func()) {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	if n == nil || f == nil {
		return "", func() {}
	}
	token := fmt.Sprintf("agentnode-%d", n.next.Add(1))
	n.mu.Lock()
	if n.calls == nil {
		n.calls = map[string]ProgressFunc{}
	}
	n.calls[token] = f
	n.mu.Unlock()
	return token, func() {
		n.mu.Lock()
		delete(n.calls, token)
		n.mu.Unlock()
	}
}

// progress passes a server's notifications/progress to the call whose
// token it names; one naming no running call is dropped.
func (n *Notifications) progress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	token, _ := p.ProgressToken.(string)
	n.mu.Lock()
	f := n.calls[token]
	n.mu.Unlock()
	if f != nil {
		f(ctx, p)
	}
}
