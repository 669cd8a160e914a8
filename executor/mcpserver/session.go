package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/egress"
	"github.com/agentnode/agentnode/executor/mcpproxy"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// SessionLifetime bounds how long a kept-alive MCP server runs
// (Servers); the next call after that starts a new one.
const SessionLifetime = time.Hour

// stopGrace is how long a server may take to exit after its stdin is
// closed before it is killed.
const stopGrace = 3 * time.Second

// maxResult bounds a tool result (the tool I/O output limit); one MCP
// frame may be a little larger (the JSON-RPC envelope, content twice).
const (
	maxResult = toolio.MaxOutput
	maxFrame  = 2*toolio.MaxOutput + 64<<10
)

// serverPath is the PATH of a server on the host (nothing else of the
// host's environment reaches it; hostexec adds HOME, TMPDIR, PACK_DIR).
const serverPath = "PATH=/usr/local/bin:/usr/bin:/bin"

// session is one running MCP server and the client session to it.
type session struct {
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

// startError is a server that did not start or initialize.
type startError struct {
	err        error
	stderr     string
	exitCode   *int
	cleanupErr error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// startSession starts p's server on b (the backend of p's placement) and
// initializes a session to it within initCtx (a declared tool the server
// does not offer is a warning in out). The server runs until stop, until lifetime passes,
// or until runCtx ends.
func startSession(initCtx, runCtx context.Context, p *plan.Plan, b backend.Backend, out *plan.Outcome, lifetime time.Duration, onUpdated func(context.Context, *mcp.ResourceUpdatedNotificationParams)) (*session, error) {
	notes := &mcpproxy.Notifications{ResourceUpdated: onUpdated}
	inR, inW := io.Pipe()   // → server stdin
	outR, outW := io.Pipe() // server stdout →
	rctx, kill := context.WithCancel(context.WithoutCancel(runCtx))
	stopRun := context.AfterFunc(runCtx, kill)
	// Sealed egress: a proxy for this server's lifetime, in the sandbox only
	// (placement never puts such a server on the host; refused here again).
	var eg *egress.Proxy
	if len(p.MCP.Domains) > 0 {
		var err error
		if p.Placement != plan.PlacementSandbox {
			err = reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", p.Package.ID, p.Placement)
		} else {
			eg, err = startEgress(rctx, p)
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
			<-eg.Failed()
			kill()
		}()
	}
	s := &session{inW: inW, kill: kill, stderr: &syncBuffer{max: toolio.MaxStderr}, done: make(chan struct{})}
	if p.Placement == plan.PlacementSandbox {
		s.host = p.Plugins
	}
	egressSock := ""
	if eg != nil {
		egressSock = eg.Socket()
	}
	go func() {
		defer close(s.done)
		defer stopRun()
		s.exitCode, s.cleanupErr = runServer(rctx, p, b, lifetime, egressSock, inR, outW, s.stderr)
		if eg != nil {
			// After the server: its proxy goes with it, teardown verified
			// (a proxy that failed while serving ended the server, and
			// says so here). The container's own unverified removal
			// takes precedence.
			if err := eg.Stop(); err != nil && s.cleanupErr == nil {
				s.cleanupErr = err
			}
		}
		_ = outW.CloseWithError(errors.New("the MCP server ended"))
		_ = inR.CloseWithError(errors.New("the MCP server ended"))
	}()

	cs, err := mcpproxy.Connect(initCtx, outR, inW, maxFrame, notes)
	if err == nil {
		s.cs = cs
		s.proxy, err = mcpproxy.New(initCtx, cs, mcpproxy.Options{Declared: p.MCP.Declared, Decide: forwardDecided, Notifications: notes})
	}
	if err != nil {
		s.stop()
		code := s.exitCode
		if initCtx.Err() != nil && runCtx.Err() == nil {
			err = reason.New(reason.Timeout, "the MCP server of %s did not initialize within %s", p.Package.ID, p.Timeout)
		}
		return nil, &startError{err: err, stderr: s.stderr.String(), exitCode: &code, cleanupErr: s.cleanupErr}
	}
	if missing := s.proxy.Missing(); len(missing) > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("MCP server %s does not offer the declared tools %v", p.Package.ID, missing))
	}
	return s, nil
}

// startEgress starts the sealed egress proxy of p's server, every event
// audited (egress.OpenAudit, opened with what the kernel gives for the run:
// plan.Services.EgressAudit) on a handle of the audit log of its own: under
// `agentnode mcp serve` the proxy outlives the run that started it.
func startEgress(ctx context.Context, p *plan.Plan) (*egress.Proxy, error) {
	if p.Services == nil {
		return nil, reason.New(reason.AuditUnavailable, "package %s: no kernel services to audit the egress proxy", p.Package.ID)
	}
	o, err := p.Services.EgressAudit()
	if err != nil {
		return nil, err
	}
	a, err := egress.OpenAudit(*o, p.MCP.Domains)
	if err != nil {
		return nil, err
	}
	return egress.Start(ctx, egress.Options{Plugins: p.Plugins, Audit: a, What: "package " + p.Package.ID, Domains: p.MCP.Domains})
}

// runServer runs the server process on b, the placement's backend, until it
// ends and reports its exit code and, for the sandbox, whether its removal
// was verified.
func runServer(ctx context.Context, p *plan.Plan, b backend.Backend, lifetime time.Duration, egressSock string, stdin io.Reader, stdout io.Writer, stderr io.Writer) (int, error) {
	if b == nil || (p.Placement == plan.PlacementSandbox && p.Image.Ref == "") {
		return -1, reason.New(reason.SandboxUnavailable, "no sandbox was placed for the MCP server of %s", p.Package.ID)
	}
	t := &backend.Task{
		RunID:      "an-mcp-" + p.RequestID,
		PackageDir: p.Package.Dir,
		Command: backend.Command{Exec: &backend.Exec{Entrypoint: p.MCP.Command.Path, Args: p.MCP.Command.Args,
			Interpreter: p.MCP.Command.Interpreter, HostInterpreter: p.MCP.HostInterpreter}},
		Limits:       p.Limits,
		Timeout:      lifetime,
		MaxStderr:    toolio.MaxStderr,
		StdinStream:  stdin,
		StdoutStream: stdout,
		// The sealed egress proxy's socket, or "" (loopback only); a
		// server with sealed mcp_allowed_domains never runs on the host.
		EgressSocket: egressSock,
		// The granted workspace (nil: none): the server's working
		// directory, mounted (sandbox) or opened to Landlock (host) as
		// the package's filesystem level grants, for the server's life.
		// The grant is the package's, the same for each of its calls, and
		// part of a kept server's launchKey.
		Workspace: p.Workspace,
	}
	if p.Placement == plan.PlacementHost {
		// No network at all, nothing of the host's environment but PATH.
		t.Env, t.HostConfinement = []string{serverPath}, p.HostConfinement
	}
	exit, err := b.Run(ctx, t)
	if exit == nil {
		if p.Placement == plan.PlacementHost {
			// Not started (refused entrypoint or confinement): its coded
			// error is the run's.
			return -1, fmt.Errorf("the MCP server of %s was not started: %w", p.Package.ID, err)
		}
		return -1, err
	}
	_, _ = stderr.Write(exit.Stderr)
	if !exit.CleanupVerified {
		return exit.ExitCode, reason.New(reason.SandboxUnavailable,
			"sandbox backend %s could not prove the MCP server's container was removed", p.BackendName)
	}
	return exit.ExitCode, nil
}

// stop ends the server: stdin closed (a server exits at EOF), killed after
// stopGrace, then the session closed. It returns when the server has
// ended; safe to call more than once.
func (s *session) stop() {
	s.stopOnce.Do(func() {
		_ = s.inW.Close()
		select {
		case <-s.done:
		case <-time.After(stopGrace):
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

func (s *session) alive() bool {
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
