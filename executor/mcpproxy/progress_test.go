package mcpproxy

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestProgressReadBeforeTheAnswerIsPassedOn: a progress notification the
// proxy has read from the server (Reader) but the SDK has not yet handed
// to the handler holds the call's end until it is passed on, so the
// client gets every progress before the answer; one never handled holds it
// at most drainWait.
func TestProgressReadBeforeTheAnswerIsPassedOn(t *testing.T) {
	n := &Notifications{}
	var mu sync.Mutex
	var got []float64
	ctx := WithProgress(context.Background(), func(_ context.Context, p *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, p.Progress)
		mu.Unlock()
	})
	token, done := n.track(ctx)
	line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":4,"total":4}}`, token)
	r := n.Reader(io.NopCloser(strings.NewReader(line[:20] + "\n" + line[20:] + "\n" + line + "\n")))
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	// The first "line" was cut in two by a newline: it is not a message.
	// The handler runs late, on another goroutine, as the SDK's does.
	go func() {
		time.Sleep(100 * time.Millisecond)
		n.progress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 4})
	}()
	done()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != 4 {
		t.Fatalf("the call ended before its progress was passed on: %v", got)
	}

	// Read and never handled: the end waits drainWait, then goes on.
	token2, done2 := n.track(ctx)
	line2 := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":1}}`+"\n", token2)
	if _, err := io.ReadAll(n.Reader(io.NopCloser(strings.NewReader(line2)))); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { done2(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(drainWait + 30*time.Second):
		t.Fatal("the call's end hung on a progress never handled")
	}
}
