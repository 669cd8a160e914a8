package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Servers keeps one running server per mcp_server package across calls
// (agentnode mcp serve): it is the mcp_server executor the front end wires
// in, and every call still goes through the whole pipeline; only the
// server process and its MCP session are reused. A server is
// replaced when anything its launch depends on changes (version, artifact,
// placement, backend, image, limits, confinement, command, sealed
// domains), when it has
// died, when a call on it failed or timed out, and after
// SessionLifetime. Create with NewServers; Close stops them all.
type Servers struct {
	mu       sync.Mutex
	sessions map[string]*pooled // by package id
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	// backends builds the backend of a plan's placement (nil: backend.For).
	backends backend.Factory
	// onUpdated receives the servers' notifications/resources/updated
	// (OnResourceUpdated).
	onUpdated func(ctx context.Context, pkg string, params *mcp.ResourceUpdatedNotificationParams)
}

// OnResourceUpdated sets, before the first call, where the kept servers'
// notifications/resources/updated go, with the package id of the server
// that sent each (`mcp serve --package` forwards them to its subscribed
// clients). Unset, they are dropped.
func (p *Servers) OnResourceUpdated(f func(ctx context.Context, pkg string, params *mcp.ResourceUpdatedNotificationParams)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onUpdated = f
}

type pooled struct {
	id    string // the package
	key   string
	ready chan struct{} // closed when started (sess or err set)
	sess  *session
	err   error
	refs  int
	// retired sessions get no new calls; stopped when refs reach 0.
	retired bool
}

// NewServers returns an empty set of kept-alive servers.
func NewServers() *Servers {
	ctx, cancel := context.WithCancel(context.Background())
	return &Servers{sessions: map[string]*pooled{}, ctx: ctx, cancel: cancel}
}

// Execute makes p's decided tools/call on the package's kept server,
// starting one if needed.
func (p *Servers) Execute(ctx context.Context, pl *plan.Plan, out *plan.Outcome) error {
	b, err := p.backends.Build(pl)
	if err != nil {
		return err
	}
	return execute(ctx, pl, b, out, p)
}

// errServersClosed refuses calls after Close.
var errServersClosed = reason.New(reason.PluginUnavailable, "the MCP server sessions are closed (shutting down)")

// launchKey fingerprints everything a running server depends on.
func launchKey(p *plan.Plan) string {
	img := ""
	if p.Image.Ref != "" {
		img = p.Image.Ref + " " + p.Image.ConfigDigest
	}
	b, _ := json.Marshal([]any{p.Package.ID, p.Package.Version, p.Package.ArtifactHash, p.Placement, p.BackendName,
		img, p.Limits, p.HostConfinement, p.MCP.Command.Argv(), p.MCP.HostInterpreter, p.MCP.Domains,
		p.Workspace, fmt.Sprintf("%p", p.Plugins)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// acquire returns a running session for pl's package, starting one if
// needed; call release(broken) when the call is done (broken: the call
// failed, the server is replaced).
func (p *Servers) acquire(ctx context.Context, pl *plan.Plan, b backend.Backend, out *plan.Outcome) (*session, func(broken bool), error) {
	key := launchKey(pl)
	id := pl.Package.ID
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, errServersClosed
	}
	e := p.sessions[id]
	if e != nil && !e.retired {
		select {
		case <-e.ready:
			if e.key != key || e.err != nil || !e.sess.alive() {
				p.retireLocked(e)
				e = nil
			}
		default:
			if e.key != key {
				p.retireLocked(e)
				e = nil
			}
		}
	}
	starter := false
	if e == nil || e.retired {
		e = &pooled{id: id, key: key, ready: make(chan struct{})}
		p.sessions[id] = e
		starter = true
	}
	e.refs++
	p.mu.Unlock()

	if starter {
		var onUpdated func(context.Context, *mcp.ResourceUpdatedNotificationParams)
		p.mu.Lock()
		f := p.onUpdated
		p.mu.Unlock()
		if f != nil {
			onUpdated = func(ctx context.Context, prm *mcp.ResourceUpdatedNotificationParams) { f(ctx, id, prm) }
		}
		e.sess, e.err = startSession(ctx, p.ctx, pl, b, out, SessionLifetime, onUpdated)
		close(e.ready)
	} else {
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(e, false)
			return nil, nil, reason.New(reason.Timeout, "waiting for the MCP server of %s to start: %w", id, ctx.Err())
		}
	}
	if e.err != nil {
		err := e.err
		p.release(e, true)
		if !starter {
			// Another call's start failed; say so without its details.
			err = &startError{err: fmt.Errorf("the MCP server of %s failed to start for a concurrent call: %w", id, err)}
		}
		return nil, nil, err
	}
	return e.sess, func(broken bool) { p.release(e, broken) }, nil
}

// retireLocked takes e out of service; it is stopped when unused.
func (p *Servers) retireLocked(e *pooled) {
	e.retired = true
	if p.sessions[e.id] == e {
		delete(p.sessions, e.id)
	}
	if e.refs == 0 {
		go e.stop()
	}
}

func (p *Servers) release(e *pooled, broken bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.refs--
	if broken && !e.retired {
		p.retireLocked(e)
		return
	}
	if e.retired && e.refs == 0 {
		go e.stop()
	}
}

func (e *pooled) stop() {
	<-e.ready
	if e.sess != nil {
		e.sess.stop()
	}
}

// StopFor stops the servers whose sandbox runs through plugin host h and
// waits for them (call it before closing h, so no container is left to a
// dying backend).
func (p *Servers) StopFor(h *pluginhost.Host) {
	p.mu.Lock()
	var stop []*pooled
	for id, e := range p.sessions {
		select {
		case <-e.ready:
			if e.sess != nil && e.sess.host == h {
				e.retired = true
				delete(p.sessions, id)
				stop = append(stop, e)
			}
		default:
		}
	}
	p.mu.Unlock()
	for _, e := range stop {
		e.stop()
	}
}

// Stop stops package id's server, if one runs, and waits for it (the
// package's installed tree no longer verifies: the server started from it
// must not answer again). The next call of id starts a new one.
func (p *Servers) Stop(id string) {
	p.mu.Lock()
	e := p.sessions[id]
	if e != nil {
		e.retired = true
		delete(p.sessions, id)
	}
	p.mu.Unlock()
	if e != nil {
		e.stop()
	}
}

// Close stops every server and waits for them; later calls are refused.
func (p *Servers) Close() {
	p.mu.Lock()
	p.closed = true
	all := make([]*pooled, 0, len(p.sessions))
	for _, e := range p.sessions {
		all = append(all, e)
	}
	p.sessions = map[string]*pooled{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() { defer wg.Done(); e.stop() }()
	}
	wg.Wait()
	p.cancel()
}

// Running reports how many servers are running (tests, status).
func (p *Servers) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.sessions {
		select {
		case <-e.ready:
			if e.sess != nil && e.sess.alive() {
				n++
			}
		default:
		}
	}
	return n
}
