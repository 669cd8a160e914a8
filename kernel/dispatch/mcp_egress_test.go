package dispatch

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/egress"
)

// withDomains is the test manifest with sealed-egress domains.
func withDomains(domains string) string {
	m := strings.Replace(mcpTestManifest, "  network: {level: none}", "  network: {level: restricted, allowed_domains: ["+domains+"]}", 1)
	return strings.Replace(m, "  command: [/pack/bin/server]", "  command: [/pack/bin/server]\n  allowed_domains: ["+domains+"]", 1)
}

// mcp_allowed_domains that no verified lockfile entry seals are refused
// at placement: egress_denied, audited, nothing runs.
func TestMCPAllowedDomainsUnsealed(t *testing.T) {
	k, _ := mcpHome(t, withDomains("api.example.com"))
	res, err := mcpRun(t, k, "echo", `{}`)
	if reason.CodeOf(err) != reason.EgressDenied || res.Ran ||
		!strings.Contains(err.Error(), "mcp_allowed_domains must be sealed in agentnode.lock") {
		t.Fatalf("%+v, %v", res, err)
	}
	recs := auditRecords(t, k)
	if len(recs) != 1 || recs[0].Decision != "deny" || recs[0].Code != string(reason.EgressDenied) {
		t.Fatalf("audit %+v", recs)
	}
}

// Sealed domains put the server in the sandbox whatever its trust: the
// tier (curated) and host_trust_policy would say host, where the seccomp
// filter allows no proxy socket. Here no sandbox image is set up, so the
// run is refused at the sandbox check — but on placement sandbox, never
// on the host, and never run.
func TestMCPAllowedDomainsSandboxOnly(t *testing.T) {
	k, p := mcpHome(t, withDomains("api.example.com"))
	writeLock(t, os.Getenv("AGENTNODE_LOCKFILE"), p, "", false, nil, false)
	res, err := mcpRun(t, k, "echo", `{}`)
	if err == nil || res.Ran || res.Placement != PlacementSandbox {
		t.Fatalf("placement %q ran %v: %v", res.Placement, res.Ran, err)
	}
	if c := reason.CodeOf(err); c == reason.EgressDenied || c == "" {
		t.Fatalf("the sealed domains were refused (%v); want a sandbox refusal", err)
	}
	// Without sealed domains the same package goes to the host.
	k2, p2 := mcpHome(t, mcpTestManifest)
	writeLock(t, os.Getenv("AGENTNODE_LOCKFILE"), p2, "", false, nil, false)
	if res, err := mcpRun(t, k2, "echo", `{}`); err != nil || res.Placement != PlacementHost {
		t.Fatalf("control: %+v, %v", res, err)
	}
}

// Sealed domains that are not valid allowlist entries are refused.
func TestMCPAllowedDomainsInvalid(t *testing.T) {
	st := &state{pkg: &store.Package{ID: "p", Dir: t.TempDir(), Manifest: &manifest.Manifest{PackageID: "p",
		MCP: &manifest.MCP{Command: []string{"/pack/bin/server"}, Install: &manifest.MCPInstall{Manager: "npm", Package: "x", Version: "1.0.0"},
			AllowedDomains: []string{"localhost"}}}}}
	// No lockfile entry: unsealed before anything else.
	if err := checkMCPLaunch(st); reason.CodeOf(err) != reason.EgressDenied {
		t.Fatal(err)
	}
}

// egressState is a run's state placed in the sandbox, for the kernel's
// side of sealed egress (services.EgressAudit).
func egressState(t *testing.T) *state {
	t.Helper()
	k := newHome(t)
	set, err := loadSettings(home.ConfigPath(k.HomeDir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &state{k: k, set: set, pkg: &store.Package{ID: "echo-mcp", Version: "1.0.0"},
		res: &Result{RequestID: "req-egress", Package: "echo-mcp", Version: "1.0.0", Tool: "fetch", Trust: "verified",
			Placement: PlacementSandbox, Backend: "libcontainer", Decision: "allow"}}
}

// The kernel checks every allow the proxy reports against the sealed
// allowlist: an allow for another host or port is recorded as a deny,
// refused (the proxy then contacts nothing) and fails the session.
func TestMCPEgressAllowOutsideAllowlistRefused(t *testing.T) {
	st := egressState(t)
	ea, err := (&services{st}).EgressAudit([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	a := ea.(*egressAuditor)
	if err := a.Audit(egress.Event{Decision: egress.Allow, Host: "api.example.com", Port: 443, Addr: netip.MustParseAddr("93.184.215.14")}); err != nil {
		t.Fatalf("control: %v", err)
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
	recs := auditRecords(t, st.k)
	if len(recs) != 3 || recs[0].Decision != "allow" || recs[0].Event != "egress" || recs[0].RequestID != "req-egress" ||
		recs[0].Action != "network_egress" || recs[0].Tool != "" || recs[0].Backend != "libcontainer" || recs[1].Decision != "deny" || recs[2].Decision != "deny" ||
		!strings.Contains(recs[1].Reason, "refused by agentnode") || recs[1].Code != string(reason.EgressDenied) {
		t.Fatalf("records %+v", recs)
	}
}

// Sealed egress is never audited, so never started, for a server on the
// host: the kernel refuses to open its audit (the executor refuses it
// before that, executor/mcpserver).
func TestMCPEgressHostRefused(t *testing.T) {
	st := egressState(t)
	st.res.Placement = PlacementHost
	if _, err := (&services{st}).EgressAudit([]string{"api.example.com"}); reason.CodeOf(err) != reason.EgressDenied {
		t.Fatal(err)
	}
}

// A record that cannot be written refuses the connection: the proxy is
// told no and contacts nothing.
func TestMCPEgressAuditUnwritableRefuses(t *testing.T) {
	st := egressState(t)
	ea, err := (&services{st}).EgressAudit([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ea.Audit(egress.Event{Decision: egress.Allow, Host: "api.example.com", Port: 443}); err == nil {
		t.Fatal("an allow whose record was not written was acknowledged")
	}
	if recs := auditRecords(t, st.k); len(recs) != 0 {
		t.Fatalf("records %+v", recs)
	}
}
