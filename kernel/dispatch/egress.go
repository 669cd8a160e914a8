package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// Sealed egress (specs/mcp.md, specs/egress.md): a server whose verified
// lockfile entry seals mcp_allowed_domains runs in the sandbox only, with a
// CONNECT proxy started for its session in a pinned plugin process of its
// own (agentnode-egress-proxy, plugins/egress/proxy), by the executor
// (executor/egress): everything the sandbox sends is parsed there, never in
// this process. Here stay the decision (the sealed allowlist, checked at
// placement and again on every allow the proxy reports) and the audit: the
// proxy reports each connection over its session (sdk/egress), an "egress"
// audit record is written here and only then acknowledged (the proxy
// contacts nothing before), and a record that cannot be written refuses
// the connection (plan.EgressAudit).

// Audit events of the egress proxy: one egress record per connection
// (decision allow or deny, written before the destination is contacted) and,
// for an allowed one, an egress_closed record when the tunnel ends.
const (
	eventEgress       = "egress"
	eventEgressClosed = "egress_closed"
)

// EgressAudit opens the audit of the run's sealed egress proxy: the
// records' fixed part is taken now (the run that started the server goes
// on changing its state while the proxy serves, and a kept server's proxy
// outlives the run), on a handle of the audit log of its own.
func (s *services) EgressAudit(domains []string) (plan.EgressAudit, error) {
	st := s.st
	if st.res.Placement != PlacementSandbox {
		return nil, reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", st.pkg.ID, st.res.Placement)
	}
	return OpenEgressAudit(EgressAuditOptions{AuditDir: home.AuditDir(st.k.HomeDir), Audit: st.k.auditOptions(st),
		Base: *st.k.baseRecord(st, eventEgress), Domains: domains})
}

// EgressAuditOptions are the inputs of OpenEgressAudit.
type EgressAuditOptions struct {
	// AuditDir and Audit name the audit log the events are recorded in
	// (its anchor included), opened on a handle of the proxy's own.
	AuditDir string
	Audit    audit.Options
	// Base is the fixed part of each record (request id — a fresh one
	// when empty —, package, version, trust, placement, backend, env);
	// the event, action, decision, code and reason are the proxy's.
	Base audit.Record
	// Domains are the hosts allowed, on port 443.
	Domains []string
}

// OpenEgressAudit opens the audit of one sealed egress proxy: for a run's
// MCP server (services.EgressAudit) or outside a run — `agentnode install`
// resolving Python dependencies from an index (cmd/agentnode/pydeps) —
// with the same checks and records (specs/egress.md).
func OpenEgressAudit(o EgressAuditOptions) (plan.EgressAudit, error) {
	log, err := audit.Open(o.AuditDir, o.Audit)
	if err != nil {
		return nil, reason.Wrap(reason.AuditUnavailable, err, "open the audit log for the egress proxy")
	}
	base := o.Base
	if base.RequestID == "" {
		base.RequestID = newRequestID()
	}
	base.Event, base.Tool, base.Action, base.GuardChain = eventEgress, "", "network_egress", nil
	base.Decision, base.Code, base.Reason = "", "", ""
	return newEgressAuditor(base, log, o.Domains), nil
}

// maxDeniedKept bounds what Denied keeps.
const maxDeniedKept = 8

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

// Audit records e; an error refuses the connection. An allow the sealed
// allowlist does not permit (another host, another port) is recorded as a
// deny and refused, and ends the session: the proxy is not doing its job.
func (a *egressAuditor) Audit(e egress.Event) error {
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

func (a *egressAuditor) Violated() <-chan struct{} { return a.violated }

// Violation is the first allow outside the allowlist, or nil.
func (a *egressAuditor) Violation() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bad
}

// Denied lists the connections the proxy refused so far, as their audit
// records' reasons ("host:port: why"), the first maxDeniedKept of them.
func (a *egressAuditor) Denied() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.denied)
}

func (a *egressAuditor) Close() error { return a.log.Close() }

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
