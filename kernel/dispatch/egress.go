package dispatch

import (
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Sealed egress (specs/mcp.md, specs/egress.md): a server whose verified
// lockfile entry seals mcp_allowed_domains runs in the sandbox only, with a
// CONNECT proxy started for its session in a pinned plugin process of its
// own (agentnode-egress-proxy, plugins/egress/proxy), by the executor
// (executor/egress): everything the sandbox sends is parsed there, never in
// this process. Here stay the decision (the sealed allowlist, checked at
// placement; sealed egress for the sandbox alone) and what the proxy's
// audit is opened with. The executor's auditor (executor/egress.OpenAudit)
// builds an "egress" record for each connection the proxy reports,
// re-checking every allow against the sealed allowlist, and writes it
// through the audit log (kernel/audit) before the proxy goes on.

// EgressAudit is what the audit of the run's sealed egress proxy is opened
// with: the records' fixed part is taken now (the run that started the
// server goes on changing its state while the proxy serves, and a kept
// server's proxy outlives the run); the event and the rest are the
// auditor's.
func (s *services) EgressAudit() (*plan.EgressAudit, error) {
	st := s.st
	if st.res.Placement != PlacementSandbox {
		return nil, reason.New(reason.EgressDenied, "package %s: sealed egress exists only in the sandbox, not on placement %q", st.pkg.ID, st.res.Placement)
	}
	return &plan.EgressAudit{AuditDir: home.AuditDir(st.k.HomeDir), Audit: st.k.auditOptions(st), Base: *st.k.baseRecord(st, "")}, nil
}
