package dispatch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/pluginhost"
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

// TestMain removes the egress plugins' build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if egressBinDir != "" {
		os.RemoveAll(egressBinDir)
	}
	os.Exit(code)
}

var egressBinDir string

// egressBin holds both builds of the egress plugin, built once:
// agentnode-egress-proxy and, with the egresstest tag,
// agentnode-egress-proxy-egresstest.
var egressBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dispatch-egress-bin-")
	if err != nil {
		return "", err
	}
	egressBinDir = dir
	for file, tags := range map[string]string{"agentnode-egress-proxy": "seccomp", "agentnode-egress-proxy-egresstest": "seccomp egresstest"} {
		cmd := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(dir, file), "github.com/agentnode/agentnode/plugins/egress/proxy")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", file, err, out)
		}
	}
	return dir, nil
})

// egressState is a run's state placed in the sandbox, for startMCPEgress,
// with a plugin host that has both egress plugins pinned.
func egressState(t *testing.T) *state {
	t.Helper()
	bin, err := egressBin()
	if err != nil {
		t.Fatal(err)
	}
	k := newHome(t)
	if _, err := pluginhost.PinBundled(k.HomeDir, bin); err != nil {
		t.Fatal(err)
	}
	k.Plugins = pluginhost.New(pluginhost.Options{HomeDir: k.HomeDir, BinDir: bin, Logger: hclog.NewNullLogger()})
	t.Cleanup(k.Plugins.Close)
	set, err := loadSettings(home.ConfigPath(k.HomeDir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &state{k: k, set: set, pkg: &store.Package{ID: "echo-mcp", Version: "1.0.0"},
		res: &Result{RequestID: "req-egress", Package: "echo-mcp", Version: "1.0.0", Tool: "fetch", Trust: "verified",
			Placement: PlacementSandbox, Backend: "libcontainer", Decision: "allow"}}
}

// withEgressTest makes startMCPEgress start the egresstest plugin with
// these test hosts, as an egresstest agentnode does.
func withEgressTest(t *testing.T, hosts, permit string) {
	savedName, savedDest := egressProxyName, egressTestDestinations
	egressProxyName = "proxy-egresstest"
	egressTestDestinations = func() (string, string) { return hosts, permit }
	t.Cleanup(func() { egressProxyName, egressTestDestinations = savedName, savedDest })
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

// alive reports whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// The proxy of a session, from the sandbox's side: what the allowlist does
// not name, other ports, IP literals and names resolving to private
// addresses are refused, each one an egress deny record the kernel writes
// (host and why, never payload or headers); each session has a plugin
// process of its own; stop tears it down, ends the process and leaves no
// directory.
func TestMCPEgressProxyAudited(t *testing.T) {
	withEgressTest(t, "api.example.com=10.1.2.3", "")
	st := egressState(t)
	eg, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	sock := eg.sock
	dir := filepath.Dir(sock)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir %v %v", fi, err)
	}
	if eg.pid <= 0 || eg.pid == os.Getpid() || !alive(eg.pid) {
		t.Fatalf("the proxy does not run in a process of its own (pid %d)", eg.pid)
	}
	// A second session gets a second process.
	eg2, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if eg2.pid == eg.pid || eg2.sock == sock {
		t.Fatalf("two sessions share the proxy process %d / socket %s", eg.pid, sock)
	}
	if err := eg2.stop(); err != nil {
		t.Fatal(err)
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
	if err := eg.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("socket dir left after stop: %v", err)
	}
	if alive(eg.pid) || alive(eg2.pid) {
		t.Fatalf("a proxy process outlived its session")
	}
	select {
	case <-eg.failed:
	default:
		t.Error("failed is not closed after stop")
	}
	// A session whose proxy is never stopped: closing the plugin host
	// (the end of the agentnode process) ends its process too.
	eg3, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	st.k.Plugins.Close()
	if alive(eg3.pid) {
		t.Fatalf("the plugin host's Close left the proxy process %d", eg3.pid)
	}
	os.RemoveAll(filepath.Dir(eg3.sock))
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
	eg, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(eg.sock), "planted")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(eg.sock)) })
	if err := eg.stop(); reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "teardown") {
		t.Fatalf("stop: %v", err)
	}
}

// The proxy process killed in the middle of a session (as a crash or an
// exploit of its parser would): the session learns at once (failed), the
// socket no longer answers, stop is an egress_denied error, and what the
// dead process left (socket, directory) is removed.
func TestMCPEgressPluginCrashFailsClosed(t *testing.T) {
	st := egressState(t)
	eg, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if code := connect(t, eg.sock, "CONNECT other.example.com:443 HTTP/1.1\r\n\r\n"); code != 403 {
		t.Fatalf("control: status %d, want 403", code)
	}
	if err := syscall.Kill(eg.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-eg.failed // no timeout: the test's deadline is the bound
	if c, err := net.Dial("unix", eg.sock); err == nil {
		c.Close()
		t.Fatal("the socket still accepts connections after the proxy died")
	}
	err = eg.stop()
	if reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "session broken") {
		t.Fatalf("stop after the crash: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(eg.sock)); !os.IsNotExist(err) {
		t.Fatalf("the dead proxy's directory was not removed: %v", err)
	}
}

// A release build of the plugin refuses test destinations: only the
// egresstest build honours them.
func TestMCPEgressReleasePluginRefusesTestDestinations(t *testing.T) {
	withEgressTest(t, "api.example.com=127.0.0.1", "127.0.0.1/32")
	egressProxyName = "proxy"
	st := egressState(t)
	_, err := startMCPEgress(context.Background(), st, []string{"api.example.com"})
	if reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "egresstest") {
		t.Fatalf("start: %v", err)
	}
}

// The kernel checks every allow the proxy reports against the sealed
// allowlist: an allow for another host or port is recorded as a deny,
// refused (the proxy then contacts nothing) and fails the session.
func TestMCPEgressAllowOutsideAllowlistRefused(t *testing.T) {
	st := egressState(t)
	log, err := audit.Open(home.AuditDir(st.k.HomeDir), st.k.auditOptions(st))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	a := newEgressAuditor(*st.k.baseRecord(st, eventEgress), log, []string{"api.example.com"})
	if err := a.audit(egress.Event{Decision: egress.Allow, Host: "api.example.com", Port: 443, Addr: netip.MustParseAddr("93.184.215.14")}); err != nil {
		t.Fatalf("control: %v", err)
	}
	for _, e := range []egress.Event{
		{Decision: egress.Allow, Host: "evil.example.net", Port: 443},
		{Decision: egress.Allow, Host: "api.example.com", Port: 8443},
	} {
		if err := a.audit(e); err == nil {
			t.Errorf("%+v accepted", e)
		}
	}
	select {
	case <-a.violated:
	default:
		t.Fatal("the session was not failed")
	}
	if a.violation() == nil {
		t.Fatal("no violation reported")
	}
	recs := auditRecords(t, st.k)
	if len(recs) != 3 || recs[0].Decision != "allow" || recs[1].Decision != "deny" || recs[2].Decision != "deny" ||
		!strings.Contains(recs[1].Reason, "refused by agentnode") || recs[1].Code != string(reason.EgressDenied) {
		t.Fatalf("records %+v", recs)
	}
}

// Sealed egress is never started for a server on the host.
func TestMCPEgressHostRefused(t *testing.T) {
	st := egressState(t)
	st.res.Placement = PlacementHost
	if _, err := startMCPEgress(context.Background(), st, []string{"api.example.com"}); reason.CodeOf(err) != reason.EgressDenied {
		t.Fatal(err)
	}
	// startMCPSession refuses it before any hook or process.
	called := false
	saved := mcpEgress
	mcpEgress = func(context.Context, *state, []string) (*mcpEgressProxy, error) {
		called = true
		return nil, nil
	}
	t.Cleanup(func() { mcpEgress = saved })
	st.mcp = &mcpPlan{domains: []string{"api.example.com"}}
	if _, err := startMCPSession(context.Background(), context.Background(), st, time.Second); reason.CodeOf(err) != reason.EgressDenied || called {
		t.Fatalf("%v (hook called %v)", err, called)
	}
}

// StartEgress (agentnode install from a package index): the same proxy and
// audit outside a run — a fresh request id, the caller's package, the
// refused connections listed by Denied, no socket left after Stop.
func TestStartEgress(t *testing.T) {
	withEgressTest(t, "idx.example.com=10.1.2.3", "")
	st := egressState(t)
	k := st.k
	eg, err := StartEgress(context.Background(), EgressOptions{
		Plugins: k.Plugins, AuditDir: home.AuditDir(k.HomeDir),
		Base: audit.Record{Package: "quad-pack", Version: "1.0.0", Placement: PlacementSandbox, Backend: "libcontainer"},
		What: "installing quad-pack", Domains: []string{"idx.example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := eg.Socket()
	for _, req := range []string{"CONNECT other.example.com:443 HTTP/1.1\r\n\r\n", "CONNECT idx.example.com:443 HTTP/1.1\r\n\r\n"} {
		if code := connect(t, sock, req); code < 400 {
			t.Errorf("%q: status %d, want a refusal", req, code)
		}
	}
	denied := eg.Denied()
	if len(denied) != 2 || !strings.HasPrefix(denied[0], "other.example.com:443: host not in the allowlist") ||
		!strings.HasPrefix(denied[1], "idx.example.com:443: ") {
		t.Fatalf("Denied() = %q", denied)
	}
	if err := eg.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("socket dir left after Stop: %v", err)
	}
	recs := auditRecords(t, k)
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want 2: %+v", len(recs), recs)
	}
	for i, r := range recs {
		if r.Event != "egress" || r.Decision != "deny" || r.Package != "quad-pack" || r.Action != "network_egress" ||
			len(r.RequestID) != 24 || r.RequestID != recs[0].RequestID || r.Reason != denied[i] {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}
