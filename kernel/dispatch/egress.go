package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/egress"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Sealed egress of MCP servers (specs/mcp.md, specs/egress.md): a server
// whose verified lockfile entry seals mcp_allowed_domains runs in the
// sandbox only, with a kernel/egress CONNECT proxy started for its session.
// The proxy's socket is bind-mounted into the sandbox
// (sandbox.Spec.EgressSocket); every decision of the proxy is an "egress"
// audit record; the proxy is closed after the server ended, and a teardown
// it cannot verify fails the run closed (egress_denied).

// Audit events of the egress proxy: one egress record per connection
// (decision allow or deny, written before the destination is contacted) and,
// for an allowed one, an egress_closed record when the tunnel ends.
const (
	eventEgress       = "egress"
	eventEgressClosed = "egress_closed"
)

// egressResolver, when set, gives the proxy its resolver. Only egresstest
// builds set it (egress_egresstest.go); in every other build the proxy uses
// the system resolver and nothing can change that.
var egressResolver func() (egress.Resolver, error)

// egressSocketDir is where the proxy creates its private 0700 directory:
// the temporary directory, or /tmp when that path would make the socket
// path longer than a unix socket path may be.
func egressSocketDir() string {
	dir := os.TempDir()
	// egress-NNNNNNNNNN/proxy.sock below it; 107 bytes at most in all.
	if !filepath.IsAbs(dir) || len(dir)+len("/egress-0123456789/")+len(egress.SocketName) > 107 {
		return "/tmp"
	}
	return dir
}

// startMCPEgress is mcpEgress: it starts the proxy for st's server with the
// sealed domains, auditing each event on its own handle of the audit log
// (the proxy outlives the run that started it under agentnode mcp serve).
// stop closes the proxy and the log; it returns egress_denied unless the
// proxy verified its teardown.
func startMCPEgress(ctx context.Context, st *state, domains []string) (string, func() error, error) {
	if st.res.Placement != PlacementSandbox {
		return "", nil, reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", st.pkg.ID, st.res.Placement)
	}
	log, err := audit.Open(home.AuditDir(st.k.HomeDir), st.k.auditOptions(st))
	if err != nil {
		return "", nil, reason.Wrap(reason.AuditUnavailable, err, "open the audit log for the egress proxy")
	}
	// The records' fixed part, taken now: the run that started the server
	// goes on changing its state while the proxy serves.
	base := *st.k.baseRecord(st, eventEgress)
	base.Tool, base.Action, base.GuardChain = "", "network_egress", nil
	base.Decision, base.Code, base.Reason = "", "", ""
	cfg := egress.Config{
		Allowed:   domains,
		SocketDir: egressSocketDir(),
		Audit: func(e egress.Event) error {
			return log.Append(egressRecord(base, e))
		},
	}
	if egressResolver != nil {
		if cfg.Resolver, err = egressResolver(); err != nil {
			_ = log.Close()
			return "", nil, reason.New(reason.EgressDenied, "egress proxy resolver: %w", err)
		}
	}
	proxy, err := egress.Start(ctx, cfg)
	if err != nil {
		_ = log.Close()
		return "", nil, reason.New(reason.EgressDenied, "package %s: %w", st.pkg.ID, err)
	}
	stop := func() error {
		err := proxy.Close()
		_ = log.Close()
		if err != nil {
			return reason.New(reason.EgressDenied, "package %s: the egress proxy could not prove its teardown: %w", st.pkg.ID, err)
		}
		return nil
	}
	return proxy.SocketPath(), stop, nil
}

// egressRecord is the audit record of one proxy event: host, port, address,
// decision and why, never payload or headers.
func egressRecord(base audit.Record, e egress.Event) *audit.Record {
	r := base
	target := e.Host
	if e.Port != 0 {
		target = fmt.Sprintf("%s:%d", e.Host, e.Port)
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
