package dispatch

import (
	"os"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
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

// The kernel gives the sealed egress proxy's audit the run's audit log
// (its anchor included) and the records' fixed part, taken when asked:
// what the run changes later does not reach it. (The auditor that builds
// and checks each record is executor/egress's, tested there.)
func TestMCPEgressAuditBase(t *testing.T) {
	st := egressState(t)
	o, err := (&services{st}).EgressAudit()
	if err != nil {
		t.Fatal(err)
	}
	st.res.Backend, st.res.RequestID = "docker", "req-later"
	b := o.Base
	if b.RequestID != "req-egress" || b.Package != "echo-mcp" || b.Version != "1.0.0" || b.Trust != "verified" ||
		b.Placement != PlacementSandbox || b.Backend != "libcontainer" || o.Audit.Anchor == nil {
		t.Fatalf("%+v", o)
	}
	// The options name the run's anchored log: a record appended with
	// them verifies with the home's anchor.
	l, err := audit.Open(o.AuditDir, o.Audit)
	if err != nil {
		t.Fatal(err)
	}
	b.Event, b.Decision = "egress", "allow"
	if err := l.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if recs := auditRecords(t, st.k); len(recs) != 1 || recs[0].RequestID != "req-egress" || recs[0].Event != "egress" {
		t.Fatalf("records %+v", recs)
	}
}

// Sealed egress is never audited, so never started, for a server on the
// host: the kernel refuses to give its audit (the executor refuses it
// before that, executor/mcpserver).
func TestMCPEgressHostRefused(t *testing.T) {
	st := egressState(t)
	st.res.Placement = PlacementHost
	if _, err := (&services{st}).EgressAudit(); reason.CodeOf(err) != reason.EgressDenied {
		t.Fatal(err)
	}
}
