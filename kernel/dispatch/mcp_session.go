package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/kernel/mcpproxy"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/toolio"
)

// MCPSessionLifetime bounds how long a kept-alive MCP server runs
// (Kernel.MCPServers); the next call after that starts a new one.
const MCPSessionLifetime = time.Hour

// mcpStopGrace is how long a server may take to exit after its stdin is
// closed before it is killed.
const mcpStopGrace = 3 * time.Second

// maxMCPResult bounds a tool result (the tool I/O output limit); one MCP
// frame may be a little larger (the JSON-RPC envelope, content twice).
const (
	maxMCPResult = toolio.MaxOutput
	maxMCPFrame  = 2*toolio.MaxOutput + 64<<10
)

// mcpServerPath is the PATH of a server on the host (nothing else of the
// host's environment reaches it; hostexec adds HOME, TMPDIR, PACK_DIR).
const mcpServerPath = "PATH=/usr/local/bin:/usr/bin:/bin"

// mcpSession is one running MCP server and the client session to it.
type mcpSession struct {
	proxy *mcpproxy.Proxy
	cs    *mcp.ClientSession
	inW   *io.PipeWriter // the server's stdin
	kill  context.CancelFunc
	// host is the plugin host whose sandbox backend runs the server (nil
	// on the host): when it is retired, the session is stopped first.
	host *pluginhost.Host

	stderr *syncBuffer
	// done is closed when the server has ended; then exitCode and
	// cleanupErr are set: nil when the server ran and its end (for the
	// sandbox: the container's removal) was verified, else why not.
	done       chan struct{}
	exitCode   int
	cleanupErr error
	stopOnce   sync.Once
}

// mcpStartError is a server that did not start or initialize.
type mcpStartError struct {
	err        error
	stderr     string
	exitCode   *int
	cleanupErr error
}

func (e *mcpStartError) Error() string { return e.err.Error() }
func (e *mcpStartError) Unwrap() error { return e.err }

// startMCPSession starts st's server where placement said and initializes
// a session to it within initCtx. The server runs until stop, until
// lifetime passes, or until runCtx ends.
func startMCPSession(initCtx, runCtx context.Context, st *state, lifetime time.Duration) (*mcpSession, error) {
	inR, inW := io.Pipe()   // → server stdin
	outR, outW := io.Pipe() // server stdout →
	rctx, kill := context.WithCancel(context.WithoutCancel(runCtx))
	stopRun := context.AfterFunc(runCtx, kill)
	// Sealed egress: a proxy for this server's lifetime, in the sandbox only
	// (placement never puts such a server on the host; refused here again).
	var eg *mcpEgressProxy
	if len(st.mcp.domains) > 0 {
		var err error
		switch {
		case mcpEgress == nil:
			err = reason.New(reason.EgressDenied, "package %s: MCP server egress is not available", st.pkg.ID)
		case st.res.Placement != PlacementSandbox:
			err = reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", st.pkg.ID, st.res.Placement)
		default:
			eg, err = mcpEgress(rctx, st, st.mcp.domains)
		}
		if err != nil {
			stopRun()
			kill()
			return nil, err
		}
		// A proxy that fails while serving (its process died) ends the
		// server: the session fails closed, and stop below says why.
		// failed is closed by stop in any case, so this ends.
		go func() {
			<-eg.failed
			kill()
		}()
	}
	s := &mcpSession{inW: inW, kill: kill, stderr: &syncBuffer{max: toolio.MaxStderr}, done: make(chan struct{})}
	if st.res.Placement == PlacementSandbox {
		s.host = st.k.Plugins
	}
	egressSock := ""
	if eg != nil {
		egressSock = eg.sock
	}
	go func() {
		defer close(s.done)
		defer stopRun()
		s.exitCode, s.cleanupErr = runMCPServer(rctx, st, lifetime, egressSock, inR, outW, s.stderr)
		if eg != nil {
			// After the server: its proxy goes with it, teardown verified
			// (a proxy that failed while serving ended the server, and
			// says so here). The container's own unverified removal
			// takes precedence.
			if err := eg.stop(); err != nil && s.cleanupErr == nil {
				s.cleanupErr = err
			}
		}
		_ = outW.CloseWithError(errors.New("the MCP server ended"))
		_ = inR.CloseWithError(errors.New("the MCP server ended"))
	}()

	cs, err := mcpproxy.Connect(initCtx, outR, inW, maxMCPFrame)
	if err == nil {
		s.cs = cs
		s.proxy, err = mcpproxy.New(initCtx, cs, mcpproxy.Options{Declared: st.mcp.declared, Decide: forwardDecided})
	}
	if err != nil {
		s.stop()
		code := s.exitCode
		if initCtx.Err() != nil && runCtx.Err() == nil {
			err = reason.New(reason.Timeout, "the MCP server of %s did not initialize within %s", st.pkg.ID, st.set.timeout)
		}
		return nil, &mcpStartError{err: err, stderr: s.stderr.String(), exitCode: &code, cleanupErr: s.cleanupErr}
	}
	if missing := s.proxy.Missing(); len(missing) > 0 {
		st.k.warn(st, fmt.Sprintf("MCP server %s does not offer the declared tools %v", st.pkg.ID, missing))
	}
	return s, nil
}

// runMCPServer runs the server process on the placement's backend until
// it ends and reports its exit code and, for the sandbox, whether its
// removal was verified.
func runMCPServer(ctx context.Context, st *state, lifetime time.Duration, egressSock string, stdin io.Reader, stdout io.Writer, stderr io.Writer) (int, error) {
	if st.res.Placement == PlacementSandbox && (st.sandbox == nil || st.img == nil) {
		return -1, reason.New(reason.SandboxUnavailable, "no sandbox was placed for the MCP server of %s", st.pkg.ID)
	}
	b, err := st.backend()
	if err != nil {
		return -1, err
	}
	t := &plan.Task{
		RunID:      "an-mcp-" + st.res.RequestID,
		PackageDir: st.pkg.Dir,
		Command: plan.Command{Exec: &plan.Exec{Entrypoint: st.mcp.cmd.Path, Args: st.mcp.cmd.Args,
			Interpreter: st.mcp.cmd.Interpreter, HostInterpreter: st.mcp.interpreter}},
		Limits:       st.set.limits,
		Timeout:      lifetime,
		MaxStderr:    toolio.MaxStderr,
		StdinStream:  stdin,
		StdoutStream: stdout,
		// The sealed egress proxy's socket, or "" (loopback only); a
		// server with sealed mcp_allowed_domains never runs on the host.
		EgressSocket: egressSock,
	}
	if st.res.Placement == PlacementHost {
		// No network at all, nothing of the host's environment but PATH.
		t.Env, t.HostConfinement = []string{mcpServerPath}, st.set.hostConfinement
	}
	exit, err := b.Run(ctx, t)
	if exit == nil {
		if st.res.Placement == PlacementHost {
			// Not started (refused entrypoint or confinement): its coded
			// error is the run's.
			return -1, fmt.Errorf("the MCP server of %s was not started: %w", st.pkg.ID, err)
		}
		return -1, err
	}
	_, _ = stderr.Write(exit.Stderr)
	if !exit.CleanupVerified {
		return exit.ExitCode, reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the MCP server's container was removed", st.set.backend)
	}
	return exit.ExitCode, nil
}

// stop ends the server: stdin closed (a server exits at EOF), killed after
// mcpStopGrace, then the session closed. It returns when the server has
// ended; safe to call more than once.
func (s *mcpSession) stop() {
	s.stopOnce.Do(func() {
		_ = s.inW.Close()
		select {
		case <-s.done:
		case <-time.After(mcpStopGrace):
			s.kill()
			<-s.done
		}
		s.kill()
		if s.cs != nil {
			_ = s.cs.Close()
		}
	})
	<-s.done
}

func (s *mcpSession) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// syncBuffer keeps the first max bytes written, safely across goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// MCPServers keeps one running server per mcp_server package across calls
// (agentnode mcp serve): every call still goes through the whole pipeline;
// only the server process and its MCP session are reused. A server is
// replaced when anything its launch depends on changes (version, artifact,
// placement, backend, image, limits, confinement, command, sealed
// domains), when it has
// died, when a call on it failed or timed out, and after
// MCPSessionLifetime. Create with NewMCPServers; Close stops them all.
type MCPServers struct {
	mu       sync.Mutex
	sessions map[string]*pooled // by package id
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
}

type pooled struct {
	id    string // the package
	key   string
	ready chan struct{} // closed when started (sess or err set)
	sess  *mcpSession
	err   error
	refs  int
	// retired sessions get no new calls; stopped when refs reach 0.
	retired bool
}

// NewMCPServers returns an empty set of kept-alive servers.
func NewMCPServers() *MCPServers {
	ctx, cancel := context.WithCancel(context.Background())
	return &MCPServers{sessions: map[string]*pooled{}, ctx: ctx, cancel: cancel}
}

// errMCPServersClosed refuses calls after Close.
var errMCPServersClosed = reason.New(reason.PluginUnavailable, "the MCP server sessions are closed (shutting down)")

// launchKey fingerprints everything a running server depends on.
func launchKey(st *state) string {
	b, _ := json.Marshal([]any{st.pkg.ID, st.pkg.Version, st.pkg.ArtifactHash, st.res.Placement, st.res.Backend,
		imageRef(st), st.set.limits, st.set.hostConfinement, st.mcp.cmd.Argv(), st.mcp.interpreter, st.mcp.domains,
		fmt.Sprintf("%p", st.k.Plugins)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func imageRef(st *state) string {
	if st.img == nil {
		return ""
	}
	return st.img.Ref + " " + st.img.ConfigDigest
}

// acquire returns a running session for st's package, starting one if
// needed; call release(broken) when the call is done (broken: the call
// failed, the server is replaced).
func (p *MCPServers) acquire(ctx context.Context, st *state) (*mcpSession, func(broken bool), error) {
	key := launchKey(st)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, errMCPServersClosed
	}
	e := p.sessions[st.pkg.ID]
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
		e = &pooled{id: st.pkg.ID, key: key, ready: make(chan struct{})}
		p.sessions[st.pkg.ID] = e
		starter = true
	}
	e.refs++
	p.mu.Unlock()

	if starter {
		e.sess, e.err = startMCPSession(ctx, p.ctx, st, MCPSessionLifetime)
		close(e.ready)
	} else {
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(e, false)
			return nil, nil, reason.New(reason.Timeout, "waiting for the MCP server of %s to start: %w", st.pkg.ID, ctx.Err())
		}
	}
	if e.err != nil {
		err := e.err
		p.release(e, true)
		if !starter {
			// Another call's start failed; say so without its details.
			err = &mcpStartError{err: fmt.Errorf("the MCP server of %s failed to start for a concurrent call: %w", st.pkg.ID, err)}
		}
		return nil, nil, err
	}
	return e.sess, func(broken bool) { p.release(e, broken) }, nil
}

// retireLocked takes e out of service; it is stopped when unused.
func (p *MCPServers) retireLocked(e *pooled) {
	e.retired = true
	if p.sessions[e.id] == e {
		delete(p.sessions, e.id)
	}
	if e.refs == 0 {
		go e.stop()
	}
}

func (p *MCPServers) release(e *pooled, broken bool) {
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
func (p *MCPServers) StopFor(h *pluginhost.Host) {
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

// Close stops every server and waits for them; later calls are refused.
func (p *MCPServers) Close() {
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
func (p *MCPServers) Running() int {
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
