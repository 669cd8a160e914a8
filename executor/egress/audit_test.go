package egress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// Every allow the proxy reports is checked against the sealed allowlist
// again: an allow for another host or port is recorded as a deny, refused
// (the proxy then contacts nothing) and fails the session.
func TestAuditAllowOutsideAllowlistRefused(t *testing.T) {
	h := &testHome{dir: auditHome(t)}
	a := h.audit(t, runBase, []string{"api.example.com"})
	defer a.Close()
	if err := a.Audit(egress.Event{Decision: egress.Allow, Host: "api.example.com", Port: 443, Addr: netip.MustParseAddr("93.184.215.14")}); err != nil {
		t.Fatalf("control: %v", err)
	}
	select {
	case <-a.Violated():
		t.Fatal("control: the session failed on an allowed connection")
	default:
	}
	for _, e := range []egress.Event{
		{Decision: egress.Allow, Host: "evil.example.net", Port: 443},
		{Decision: egress.Allow, Host: "api.example.com", Port: 8443},
	} {
		if err := a.Audit(e); err == nil {
			t.Errorf("%+v accepted", e)
		}
	}
	select {
	case <-a.Violated():
	default:
		t.Fatal("the session was not failed")
	}
	if a.Violation() == nil {
		t.Fatal("no violation reported")
	}
	recs := h.records(t)
	if len(recs) != 3 || recs[0].Decision != "allow" || recs[0].Event != "egress" || recs[0].RequestID != "req-egress" ||
		recs[0].Action != "network_egress" || recs[0].Tool != "" || recs[0].Backend != "libcontainer" || recs[1].Decision != "deny" || recs[2].Decision != "deny" ||
		!strings.Contains(recs[1].Reason, "refused by agentnode") || recs[1].Code != string(reason.EgressDenied) ||
		!strings.Contains(recs[0].Reason, "(address 93.184.215.14)") {
		t.Fatalf("records %+v", recs)
	}
}

// A record that cannot be written refuses the connection: the proxy is
// told no and contacts nothing.
func TestAuditUnwritableRefuses(t *testing.T) {
	h := &testHome{dir: auditHome(t)}
	a := h.audit(t, runBase, []string{"api.example.com"})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Audit(egress.Event{Decision: egress.Allow, Host: "api.example.com", Port: 443}); err == nil {
		t.Fatal("an allow whose record was not written was acknowledged")
	}
	if recs := h.records(t); len(recs) != 0 {
		t.Fatalf("records %+v", recs)
	}
}
