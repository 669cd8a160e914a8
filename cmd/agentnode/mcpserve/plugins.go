package mcpserve

import (
	"sync"

	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// pluginPool hands out the plugin host shared by all calls. A pluginhost.Host
// caches a plugin's failed start for its lifetime, which is right for one
// command but not for a server that lives for hours: after a call refused
// for a plugin or sandbox reason the host is retired, the next call gets a
// fresh one (plugins start again, pins are checked again) and the old one
// is closed, with its plugin processes, when its last call has returned.
type pluginPool struct {
	newHost func() *pluginhost.Host
	// beforeClose, if set, runs before a host is closed (to stop what
	// runs through its plugins).
	beforeClose func(*pluginhost.Host)

	mu     sync.Mutex
	cur    *generation
	closed bool
	open   sync.WaitGroup // hosts not closed yet
}

type generation struct {
	host    *pluginhost.Host
	refs    int
	retired bool
}

// acquire returns the current host (started lazily); release it when done.
// ok is false once the pool is closed.
func (p *pluginPool) acquire() (g *generation, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if p.cur == nil {
		p.cur = &generation{host: p.newHost()}
		p.open.Add(1)
	}
	p.cur.refs++
	return p.cur, true
}

// release ends one call's use of g. stale retires g if it is still current.
func (p *pluginPool) release(g *generation, stale bool) {
	p.mu.Lock()
	if stale && p.cur == g {
		p.cur, g.retired = nil, true
	}
	g.refs--
	closeIt := g.retired && g.refs == 0
	p.mu.Unlock()
	if closeIt {
		p.closeHost(g)
	}
}

// closeHost closes a retired host nobody uses any more.
func (p *pluginPool) closeHost(g *generation) {
	if p.beforeClose != nil {
		p.beforeClose(g.host)
	}
	g.host.Close()
	p.open.Done()
}

// close retires the current host; it is closed now or when its last call
// returns. Later acquires fail. Wait for every host to be closed with
// p.open.Wait().
func (p *pluginPool) close() {
	p.mu.Lock()
	p.closed = true
	g := p.cur
	p.cur = nil
	closeIt := false
	if g != nil {
		g.retired = true
		closeIt = g.refs == 0
	}
	p.mu.Unlock()
	if closeIt {
		p.closeHost(g)
	}
}

// staleCodes are refusals after which the plugin host is replaced: the
// plugin may have failed to start (cached by the host), hung, or been
// re-pinned since.
var staleCodes = map[reason.Code]bool{
	reason.PluginUnavailable:  true,
	reason.PluginUnpinned:     true,
	reason.TrustUnavailable:   true,
	reason.SandboxUnavailable: true,
}
