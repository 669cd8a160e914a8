package dispatch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/egress"
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

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// egressState is a run's state placed in the sandbox, for startMCPEgress.
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

// connect sends one request line (and headers) to the proxy socket and
// returns the status code.
func connect(t *testing.T, sock, request string) int {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The proxy of a session, from the sandbox's side: what the allowlist does
// not name, other ports, IP literals and names resolving to private
// addresses are refused, each one an egress deny record (host and why,
// never payload or headers); stop tears it down and leaves no directory.
func TestMCPEgressProxyAudited(t *testing.T) {
	saved := egressResolver
	egressResolver = func() (egress.Resolver, error) {
		return mapResolver{"api.example.com": {netip.MustParseAddr("10.1.2.3")}}, nil
	}
	t.Cleanup(func() { egressResolver = saved })
	st := egressState(t)
	sock, stop, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sock)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir %v %v", fi, err)
	}
	const secret = "PAYLOAD-SECRET-7f3a"
	for _, c := range []struct{ req, host string }{
		{"CONNECT other.example.com:443 HTTP/1.1\r\nProxy-Authorization: " + secret + "\r\n\r\n", "other.example.com:443"},
		{"CONNECT api.example.com:8443 HTTP/1.1\r\n\r\n", "api.example.com:8443"},
		{"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n", "127.0.0.1"},
		{"CONNECT api.example.com:443 HTTP/1.1\r\nX-Leak: " + secret + "\r\n\r\n", "api.example.com:443"}, // 10.1.2.3: private
		{"GET http://api.example.com/" + secret + " HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "api.example.com"},
	} {
		if code := connect(t, sock, c.req); code < 400 {
			t.Errorf("%q: status %d, want a refusal", c.req, code)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("socket dir left after stop: %v", err)
	}
	recs := auditRecords(t, st.k)
	if len(recs) != 5 {
		t.Fatalf("%d audit records, want 5: %+v", len(recs), recs)
	}
	wants := []string{"other.example.com:443", "api.example.com:8443", "127.0.0.1", "api.example.com:443: ", "api.example.com"}
	for i, r := range recs {
		if r.Event != "egress" || r.Decision != "deny" || r.Code != string(reason.EgressDenied) ||
			r.Package != "echo-mcp" || r.Version != "1.0.0" || r.Placement != PlacementSandbox || r.Backend != "libcontainer" ||
			r.RequestID != "req-egress" || !strings.HasPrefix(r.Reason, wants[i]) {
			t.Errorf("record %d: %+v", i, r)
		}
		if strings.Contains(fmt.Sprintf("%+v", r), secret) {
			t.Errorf("record %d holds request payload: %+v", i, r)
		}
	}
	if !strings.Contains(recs[3].Reason, "10.1.2.3") {
		t.Errorf("the private-address refusal does not name the address: %q", recs[3].Reason)
	}
	if _, err := audit.Verify(home.AuditDir(st.k.HomeDir)); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
}

// A teardown the proxy cannot verify fails closed: something left in the
// proxy's directory (here a file an attacker on the host planted) makes
// stop an egress_denied error.
func TestMCPEgressTeardownUnverified(t *testing.T) {
	st := egressState(t)
	sock, stop, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(sock), "planted")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(sock)) })
	if err := stop(); reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "teardown") {
		t.Fatalf("stop: %v", err)
	}
}

// Sealed egress is never started for a server on the host.
func TestMCPEgressHostRefused(t *testing.T) {
	st := egressState(t)
	st.res.Placement = PlacementHost
	if _, _, err := startMCPEgress(context.Background(), st, []string{"api.example.com"}); reason.CodeOf(err) != reason.EgressDenied {
		t.Fatal(err)
	}
	// startMCPSession refuses it before any hook or process.
	called := false
	saved := mcpEgress
	mcpEgress = func(context.Context, *state, []string) (string, func() error, error) {
		called = true
		return "", nil, nil
	}
	t.Cleanup(func() { mcpEgress = saved })
	st.mcp = &mcpPlan{domains: []string{"api.example.com"}}
	if _, err := startMCPSession(context.Background(), context.Background(), st, time.Second); reason.CodeOf(err) != reason.EgressDenied || called {
		t.Fatalf("%v (hook called %v)", err, called)
	}
}
