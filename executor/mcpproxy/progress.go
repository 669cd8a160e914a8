package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

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
	cond  *sync.Cond              // signalled when a notification was handled
	calls map[string]ProgressFunc // the proxy's progress token -> the call's receiver
	// seen counts the server's notifications/progress per token as the
	// lines are read (Reader), before the SDK parses them; handled counts
	// them as they are passed on. The SDK answers a call on its reading
	// goroutine but handles notifications on another, so a call's answer
	// can overtake its last progress: a call ends only once every progress
	// read before its answer was handled (track's done).
	seen, handled map[string]int
}

// drainWait bounds how long a call's end waits for its progress.
const drainWait = 2 * time.Second

// Reader returns r (a server's stdout) counting the progress notifications
// it carries for the calls being tracked.
func (n *Notifications) Reader(r io.ReadCloser) io.ReadCloser {
	if n == nil {
		return r
	}
	return &progressReader{ReadCloser: r, n: n}
}

// progressReader passes a server's stdout through, noting each complete
// line that is a notifications/progress (Notifications.saw) before the
// bytes that end it are returned.
type progressReader struct {
	io.ReadCloser
	n    *Notifications
	line []byte // the current line so far (up to maxNoted bytes)
}

// maxNoted bounds what of a line is kept to find its token: a progress
// notification is small; a longer line is not one agentnode tracks.
const maxNoted = 64 << 10

func (p *progressReader) Read(b []byte) (int, error) {
	k, err := p.ReadCloser.Read(b)
	rest := b[:k]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			p.keep(rest)
			break
		}
		p.keep(rest[:i])
		p.n.saw(p.line)
		p.line = p.line[:0]
		rest = rest[i+1:]
	}
	return k, err
}

func (p *progressReader) keep(b []byte) {
	if len(p.line) <= maxNoted {
		p.line = append(p.line, b[:min(len(b), maxNoted+1-len(p.line))]...)
	}
}

// saw notes line if it is a notifications/progress for a tracked call.
func (n *Notifications) saw(line []byte) {
	if len(line) > maxNoted || !bytes.Contains(line, []byte(`"notifications/progress"`)) {
		return
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Token any `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Method != "notifications/progress" {
		return
	}
	token, _ := msg.Params.Token.(string)
	n.mu.Lock()
	if _, ok := n.calls[token]; ok {
		n.seen[token]++
	}
	n.mu.Unlock()
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
		n.calls, n.seen, n.handled = map[string]ProgressFunc{}, map[string]int{}, map[string]int{}
		n.cond = sync.NewCond(&n.mu)
	}
	n.calls[token] = f
	n.mu.Unlock()
	return token, func() {
		// Every progress read before the answer is passed on first.
		deadline := time.AfterFunc(drainWait, func() {
			n.mu.Lock()
			n.cond.Broadcast()
			n.mu.Unlock()
		})
		defer deadline.Stop()
		start := time.Now()
		n.mu.Lock()
		for n.handled[token] < n.seen[token] && time.Since(start) < drainWait {
			n.cond.Wait()
		}
		delete(n.calls, token)
		delete(n.seen, token)
		delete(n.handled, token)
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
		n.mu.Lock()
		if _, ok := n.calls[token]; ok {
			n.handled[token]++
			n.cond.Broadcast()
		}
		n.mu.Unlock()
	}
}
