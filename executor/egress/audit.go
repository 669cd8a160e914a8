package egress

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// Audit events of the egress proxy: one egress record per connection
// (decision allow or deny, written before the destination is contacted) and,
// for an allowed one, an egress_closed record when the tunnel ends.
const (
	eventEgress       = "egress"
	eventEgressClosed = "egress_closed"
)

// Auditor is the audit of one sealed egress proxy (specs/egress.md): the
// proxy reports each connection, its record is written, and only then
// does the proxy go on. Every allow the proxy reports is checked again
// against the sealed allowlist.
type Auditor interface {
	// Audit writes the record of one event before the proxy acknowledges
	// it; an error refuses the connection. An allow outside the
	// allowlist (another host or port) is recorded as a deny, refused,
	// and fails the session (Violated).
	Audit(e egress.Event) error
	// Violated is closed at the first allow outside the allowlist;
	// Violation is that allow, or nil.
	Violated() <-chan struct{}
	Violation() error
	// Denied lists the reasons of the first refused connections
	// ("host:port: why").
	Denied() []string
	// Close closes the audit log handle.
	Close() error
}

// OpenAudit opens the audit of one sealed egress proxy allowing domains
// (on port 443): for a run's MCP server (o from plan.Services.EgressAudit,
// executor/mcpserver) or outside a run — `agentnode install` resolving
// Python dependencies from an index (cmd/agentnode/pydeps) — with the same
// checks and records, on a handle of the audit log of its own.
func OpenAudit(o plan.EgressAudit, domains []string) (Auditor, error) {
	log, err := audit.Open(o.AuditDir, o.Audit)
	if err != nil {
		return nil, reason.Wrap(reason.AuditUnavailable, err, "open the audit log for the egress proxy")
	}
	base := o.Base
	if base.RequestID == "" {
		base.RequestID = audit.NewRequestID()
	}
	base.Event, base.Tool, base.Action, base.GuardChain = eventEgress, "", "network_egress", nil
	base.Decision, base.Code, base.Reason = "", "", ""
	return newAuditor(base, log, domains), nil
}

// maxDeniedKept bounds what Denied keeps.
const maxDeniedKept = 8

// auditor writes the audit record of each event the proxy reports.
type auditor struct {
	base    audit.Record
	log     *audit.Log
	allowed map[string]bool

	mu       sync.Mutex
	bad      error // the first allow outside the allowlist
	violated chan struct{}
	denied   []string // the reasons of the first maxDeniedKept denials
}

func newAuditor(base audit.Record, log *audit.Log, domains []string) *auditor {
	a := &auditor{base: base, log: log, allowed: make(map[string]bool, len(domains)), violated: make(chan struct{})}
	for _, d := range domains {
		a.allowed[d] = true
	}
	return a
}

// Audit records e; an error refuses the connection. An allow the sealed
// allowlist does not permit (another host, another port) is recorded as a
// deny and refused, and ends the session: the proxy is not doing its job.
func (a *auditor) Audit(e egress.Event) error {
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
		if err := a.log.Append(record(a.base, d)); err != nil {
			return fmt.Errorf("%s; audit: %w", why, err)
		}
		return errors.New(why)
	}
	r := record(a.base, e)
	if e.Decision == egress.Deny {
		a.mu.Lock()
		if len(a.denied) < maxDeniedKept {
			a.denied = append(a.denied, r.Reason)
		}
		a.mu.Unlock()
	}
	return a.log.Append(r)
}

func (a *auditor) Violated() <-chan struct{} { return a.violated }

// Violation is the first allow outside the allowlist, or nil.
func (a *auditor) Violation() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bad
}

// Denied lists the connections the proxy refused so far, as their audit
// records' reasons ("host:port: why"), the first maxDeniedKept of them.
func (a *auditor) Denied() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.denied)
}

func (a *auditor) Close() error { return a.log.Close() }

// record is the audit record of one proxy event: host, port, address,
// decision and why, never payload or headers.
func record(base audit.Record, e egress.Event) *audit.Record {
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

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
