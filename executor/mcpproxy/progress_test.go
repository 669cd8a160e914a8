package mcpproxy

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Each call that asks gets a token of its own; a notification reaches the
// call whose token it names while that call runs, and nothing else.
func TestNotificationsRouteProgress(t *testing.T) {
	n := &Notifications{}
	var a, b []float64
	ctxA := WithProgress(context.Background(), func(_ context.Context, p *mcp.ProgressNotificationParams) { a = append(a, p.Progress) })
	ctxB := WithProgress(context.Background(), func(_ context.Context, p *mcp.ProgressNotificationParams) { b = append(b, p.Progress) })
	ta, doneA := n.track(ctxA)
	tb, doneB := n.track(ctxB)
	if ta == "" || tb == "" || ta == tb {
		t.Fatalf("tokens %q %q", ta, tb)
	}
	if tok, done := n.track(context.Background()); tok != "" {
		t.Fatalf("a call that does not ask got token %q", tok)
	} else {
		done()
	}
	ctx := context.Background()
	n.progress(ctx, &mcp.ProgressNotificationParams{ProgressToken: ta, Progress: 1})
	n.progress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tb, Progress: 2})
	n.progress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "caller-token", Progress: 3}) // a token it never gave
	n.progress(ctx, &mcp.ProgressNotificationParams{ProgressToken: 7, Progress: 4})
	doneA()
	n.progress(ctx, &mcp.ProgressNotificationParams{ProgressToken: ta, Progress: 5}) // after the call
	doneB()
	if len(a) != 1 || a[0] != 1 || len(b) != 1 || b[0] != 2 {
		t.Fatalf("a %v, b %v", a, b)
	}
	var nilNotes *Notifications
	if tok, done := nilNotes.track(ctxA); tok != "" {
		t.Fatalf("no notifications, token %q", tok)
	} else {
		done()
	}
}
