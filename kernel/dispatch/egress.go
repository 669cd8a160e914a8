package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// Sealed egress of MCP servers (specs/mcp.md, specs/egress.md): a server
// whose verified lockfile entry seals mcp_allowed_domains runs in the
// sandbox only, with a CONNECT proxy started for its session. The proxy
// runs in a pinned plugin process of its own (agentnode-egress-proxy,
// plugins/egress/proxy), started for this session alone: everything the
// sandbox sends is parsed there, never in this process. Here stay the
// decision (the sealed allowlist, checked again on every allow the proxy
// reports) and the audit: the proxy reports each connection over its
// session (sdk/egress), an "egress" audit record is written and only then
// acknowledged (the proxy contacts nothing before), and a record that
// cannot be written refuses the connection. The proxy's socket is
// bind-mounted into the sandbox (sandbox.Spec.EgressSocket); the proxy is
// closed after the server. A proxy process that dies, breaks the protocol
// or reports an allow outside the sealed allowlist ends the session, and a
// teardown that is not verified (by the plugin, then here: no socket, no
// directory) fails the run closed (egress_denied).

// Audit events of the egress proxy: one egress record per connection
// (decision allow or deny, written before the destination is contacted) and,
// for an allowed one, an egress_closed record when the tunnel ends.
const (
	eventEgress       = "egress"
	eventEgressClosed = "egress_closed"
)

// egressProxyName is the egress plugin a session starts:
// agentnode-egress-proxy. egresstest builds (mcp_egresstest.go) start
// agentnode-egress-proxy-egresstest, the same plugin built with the tag.
var egressProxyName = "proxy"

// egressTestDestinations, when set, gives the test-only destinations the
// proxy is started with (egress.StartRequest.TestHosts, TestPermit). Only
// egresstest builds set it; in every other build nothing can change the
// proxy's resolver or its public-address check (and a release plugin
// refuses such a request anyway).
var egressTestDestinations func() (hosts, permit string)

// egressCloseTimeout bounds the wait for the plugin's answer to close (its
// own teardown waits at most a few seconds for connections to end).
const egressCloseTimeout = 15 * time.Second

// egressSocketDir is where the proxy creates its private 0700 directory:
// the temporary directory, or /tmp when that path would make the socket
// path longer than a unix socket path may be.
func egressSocketDir() string {
	dir := os.TempDir()
	// egress-NNNNNNNNNN/proxy.sock below it; 107 bytes at most in all.
	if !filepath.IsAbs(dir) || len(dir)+len("/"+egress.DirPrefix+"0123456789/")+len(egress.SocketName) > 107 {
		return "/tmp"
	}
	return dir
}

// mcpEgressProxy is the running proxy of one server session.
type mcpEgressProxy struct {
	// sock is the socket to bind-mount into the sandbox.
	sock string
	// stop closes the proxy and its plugin process; it returns
	// egress_denied unless the teardown was verified and the session
	// went as it should.
	stop func() error
	// failed is closed when the proxy failed while serving (the plugin
	// died or broke the protocol, or reported an allow outside the
	// allowlist): the session must end. It is also closed by stop.
	failed <-chan struct{}
	// pid is the plugin process.
	pid int
	// auditor records the events.
	auditor *egressAuditor
}

// startMCPEgress is mcpEgress: it starts the proxy plugin for st's server
// with the sealed domains, auditing each event on its own handle of the
// audit log (the proxy outlives the run that started it under agentnode
// mcp serve).
func startMCPEgress(ctx context.Context, st *state, domains []string) (*mcpEgressProxy, error) {
	if st.res.Placement != PlacementSandbox {
		return nil, reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", st.pkg.ID, st.res.Placement)
	}
	if st.k.Plugins == nil {
		return nil, reason.New(reason.PluginUnavailable, "package %s: no plugin host for the egress proxy", st.pkg.ID)
	}
	// The records' fixed part, taken now: the run that started the server
	// goes on changing its state while the proxy serves.
	base := *st.k.baseRecord(st, eventEgress)
	return startEgress(ctx, st.k.Plugins, home.AuditDir(st.k.HomeDir), st.k.auditOptions(st), base,
		"package "+st.pkg.ID, domains)
}

// EgressOptions are the inputs of StartEgress.
type EgressOptions struct {
	// Plugins starts the egress plugin process.
	Plugins *pluginhost.Host
	// AuditDir and Audit name the audit log the events are recorded in
	// (its anchor included), opened on a handle of the proxy's own.
	AuditDir string
	Audit    audit.Options
	// Base is the fixed part of each record (request id — a fresh one
	// when empty —, package, version, trust, placement, backend, env);
	// the event, action, decision, code and reason are the proxy's.
	Base audit.Record
	// What names the caller in errors ("package pack-id").
	What string
	// Domains are the hosts allowed, on port 443: each must pass
	// manifest's allowed-domain checks (specs/egress.md).
	Domains []string
}

// EgressProxy is a running sealed egress proxy (StartEgress).
type EgressProxy struct{ p *mcpEgressProxy }

// Socket is the proxy's unix socket, to pass as sandbox.Spec.EgressSocket.
func (e *EgressProxy) Socket() string { return e.p.sock }

// Failed is closed when the proxy failed while serving (its plugin died,
// broke the protocol, or reported an allow outside the allowlist): what
// uses it must stop. Stop closes it too.
func (e *EgressProxy) Failed() <-chan struct{} { return e.p.failed }

// Denied lists the connections the proxy refused so far, as their audit
// records' reasons ("host:port: why"), the first maxDeniedKept of them.
func (e *EgressProxy) Denied() []string {
	a := e.p.auditor
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.denied)
}

// maxDeniedKept bounds what Denied keeps.
const maxDeniedKept = 8

// Stop closes the proxy and ends its plugin process; it returns
// egress_denied unless the teardown was verified and the proxy did its
// job (no allow outside the allowlist).
func (e *EgressProxy) Stop() error { return e.p.stop() }

// StartEgress starts a sealed egress proxy for one sandbox outside a tool
// run — `agentnode install` resolving Python dependencies from an index
// (cmd/agentnode/pydeps) — with the same plugin, checks and audit as an MCP
// server's (specs/egress.md): one plugin process of its own, every event an
// "egress" or "egress_closed" audit record written before it is
// acknowledged, every allow checked against Domains.
func StartEgress(ctx context.Context, o EgressOptions) (*EgressProxy, error) {
	if o.Plugins == nil {
		return nil, reason.New(reason.PluginUnavailable, "%s: no plugin host for the egress proxy", o.What)
	}
	base := o.Base
	base.Event = eventEgress
	if base.RequestID == "" {
		base.RequestID = newRequestID()
	}
	p, err := startEgress(ctx, o.Plugins, o.AuditDir, o.Audit, base, o.What, o.Domains)
	if err != nil {
		return nil, err
	}
	return &EgressProxy{p: p}, nil
}

// startEgress starts the proxy plugin with domains, auditing each event on
// its own handle of the audit log in auditDir.
func startEgress(ctx context.Context, plugins *pluginhost.Host, auditDir string, auditOpts audit.Options,
	base audit.Record, what string, domains []string) (*mcpEgressProxy, error) {
	log, err := audit.Open(auditDir, auditOpts)
	if err != nil {
		return nil, reason.Wrap(reason.AuditUnavailable, err, "open the audit log for the egress proxy")
	}
	base.Tool, base.Action, base.GuardChain = "", "network_egress", nil
	base.Decision, base.Code, base.Reason = "", "", ""

	client, proc, err := plugins.EgressProxy(egressProxyName)
	if err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("%s: sealed egress: %w", what, err)
	}
	a := newEgressAuditor(base, log, domains)
	req := &egress.StartRequest{Allowed: domains, SocketDir: egressSocketDir()}
	if egressTestDestinations != nil {
		req.TestHosts, req.TestPermit = egressTestDestinations()
	}
	// startCtx bounds the start only: the session lives until stop (which
	// after the server ended still learns whether the teardown was
	// verified).
	startCtx, cancelStart := context.WithTimeout(ctx, plugins.CallTimeout())
	sess, err := client.Start(startCtx, req, a.audit)
	cancelStart()
	if err != nil {
		proc.Stop()
		_ = log.Close()
		return nil, reason.New(reason.EgressDenied, "%s: start the egress proxy: %w", what, err)
	}
	failed := make(chan struct{})
	go func() {
		select {
		case <-sess.Done():
		case <-a.violated:
		}
		close(failed)
	}()
	sock := sess.SocketPath()
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), egressCloseTimeout)
		defer cancel()
		var errs []error
		if err := sess.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		// The process and its group go in any case; nothing of the
		// proxy can be left running after this.
		proc.Stop()
		if err := a.violation(); err != nil {
			errs = append(errs, err)
		}
		if err := removeEgressLeftovers(sock); err != nil {
			errs = append(errs, err)
		}
		_ = log.Close()
		if len(errs) > 0 {
			return reason.New(reason.EgressDenied, "%s: the egress proxy could not prove its teardown: %w", what, errors.Join(errs...))
		}
		return nil
	}
	return &mcpEgressProxy{sock: sock, stop: stop, failed: failed, pid: proc.PID(), auditor: a}, nil
}

// removeEgressLeftovers checks, with the plugin process gone, that neither
// the socket nor its directory is left (sdk/egress checked that sock is
// egress.SocketName in an egress.DirPrefix directory under the socket
// directory). What a crashed plugin left is removed — the socket and the
// empty directory, nothing else — and reported.
func removeEgressLeftovers(sock string) error {
	var errs []error
	dir := filepath.Dir(sock)
	if _, err := os.Lstat(sock); err == nil {
		errs = append(errs, fmt.Errorf("socket %s was left", sock))
		if err := os.Remove(sock); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		errs = append(errs, fmt.Errorf("socket directory %s was left", dir))
		if err := os.Remove(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// egressAuditor writes the audit record of each event the proxy reports.
type egressAuditor struct {
	base    audit.Record
	log     *audit.Log
	allowed map[string]bool

	mu       sync.Mutex
	bad      error // the first allow outside the allowlist
	violated chan struct{}
	denied   []string // the reasons of the first maxDeniedKept denials
}

func newEgressAuditor(base audit.Record, log *audit.Log, domains []string) *egressAuditor {
	a := &egressAuditor{base: base, log: log, allowed: make(map[string]bool, len(domains)), violated: make(chan struct{})}
	for _, d := range domains {
		a.allowed[d] = true
	}
	return a
}

// audit records e; an error refuses the connection. An allow the sealed
// allowlist does not permit (another host, another port) is recorded as a
// deny and refused, and ends the session: the proxy is not doing its job.
func (a *egressAuditor) audit(e egress.Event) error {
	if e.Decision == egress.Allow && (!a.allowed[e.Host] || e.Port != 443) {
		why := fmt.Sprintf("the egress proxy reported an allow outside the sealed allowlist (%.300q port %d)", e.Host, e.Port)
		a.mu.Lock()
		first := a.bad == nil
		if first {
			a.bad = errors.New(why)
			close(a.violated)
		}
		a.mu.Unlock()
		d := e
		d.Decision, d.Reason = egress.Deny, "refused by agentnode: "+why
		if err := a.log.Append(egressRecord(a.base, d)); err != nil {
			return fmt.Errorf("%s; audit: %w", why, err)
		}
		return errors.New(why)
	}
	r := egressRecord(a.base, e)
	if e.Decision == egress.Deny {
		a.mu.Lock()
		if len(a.denied) < maxDeniedKept {
			a.denied = append(a.denied, r.Reason)
		}
		a.mu.Unlock()
	}
	return a.log.Append(r)
}

// violation is the first allow outside the allowlist, or nil.
func (a *egressAuditor) violation() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bad
}

// egressRecord is the audit record of one proxy event: host, port, address,
// decision and why, never payload or headers.
func egressRecord(base audit.Record, e egress.Event) *audit.Record {
	r := base
	target := truncate(e.Host, 255)
	if e.Port != 0 {
		target = fmt.Sprintf("%s:%d", target, e.Port)
	}
	if target == "" {
		target = "(no target)"
	}
	why := e.Reason
	if e.Addr.IsValid() && !strings.Contains(why, e.Addr.String()) {
		why = fmt.Sprintf("%s (address %s)", why, e.Addr)
	}
	switch e.Decision {
	case egress.Deny:
		r.Decision, r.Code = "deny", string(reason.EgressDenied)
	case egress.Closed:
		r.Event, r.Decision = eventEgressClosed, "allow"
		why = fmt.Sprintf("%s; %d bytes out, %d bytes in, %d ms", why, e.BytesOut, e.BytesIn, e.Duration.Milliseconds())
	default:
		r.Decision = "allow"
	}
	r.Reason = truncate(target+": "+why, 512)
	return &r
}
