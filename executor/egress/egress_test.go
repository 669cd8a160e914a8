package egress

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// The proxy of these tests is the real egress plugin (both builds, pinned
// in a set-up home), and its events are audited by the real auditor
// (OpenAudit) into the home's anchored audit log.

// TestMain removes the egress plugins' build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var binDir string

// pluginBin holds both builds of the egress plugin, built once:
// agentnode-egress-proxy and, with the egresstest tag,
// agentnode-egress-proxy-egresstest.
var pluginBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "egress-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	for file, tags := range map[string]string{"agentnode-egress-proxy": "seccomp", "agentnode-egress-proxy-egresstest": "seccomp egresstest"} {
		cmd := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(dir, file), "github.com/agentnode/agentnode/plugins/egress/proxy")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", file, err, out)
		}
	}
	return dir, nil
})

// testHome is a set-up home with both egress plugins pinned and a plugin
// host for them.
type testHome struct {
	dir     string
	plugins *pluginhost.Host
}

func newTestHome(t *testing.T) *testHome {
	t.Helper()
	bin, err := pluginBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := auditHome(t)
	if _, err := plugincat.PinBundled(dir, bin); err != nil {
		t.Fatal(err)
	}
	h := &testHome{dir: dir, plugins: pluginhost.New(pluginhost.Options{HomeDir: dir, BinDir: bin, Logger: hclog.NewNullLogger()})}
	t.Cleanup(h.plugins.Close)
	return h
}

// auditHome is a set-up home with its audit directory.
func auditHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := configedit.Setup(home.ConfigPath(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home.AuditDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runBase is the fixed part of a run's egress records.
var runBase = audit.Record{RequestID: "req-egress", Package: "echo-mcp", Version: "1.0.0", Tool: "fetch", Trust: "verified",
	Placement: plan.PlacementSandbox, Backend: "libcontainer", Decision: "allow"}

// audit opens the audit of a proxy allowing domains.
func (h *testHome) audit(t *testing.T, base audit.Record, domains []string) Auditor {
	t.Helper()
	a, err := OpenAudit(plan.EgressAudit{AuditDir: home.AuditDir(h.dir),
		Audit: audit.Options{Anchor: audit.HomeAnchor(home.AuditAnchorPath(h.dir))}, Base: base}, domains)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// start starts a proxy for the run allowing api.example.com.
func (h *testHome) start(t *testing.T) (*Proxy, error) {
	t.Helper()
	domains := []string{"api.example.com"}
	return Start(context.Background(), Options{Plugins: h.plugins, Audit: h.audit(t, runBase, domains),
		What: "package echo-mcp", Domains: domains})
}

func (h *testHome) records(t *testing.T) []audit.Record {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(h.dir), 100)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// withEgressTest makes Start start the egresstest plugin with these test
// hosts, as an egresstest agentnode does.
func withEgressTest(t *testing.T, hosts, permit string) {
	savedName, savedDest := proxyName, testDestinations
	proxyName = "proxy-egresstest"
	testDestinations = func() (string, string) { return hosts, permit }
	t.Cleanup(func() { proxyName, testDestinations = savedName, savedDest })
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
// process of its own; Stop tears it down, ends the process and leaves no
// directory.
func TestProxyAudited(t *testing.T) {
	withEgressTest(t, "api.example.com=10.1.2.3", "")
	h := newTestHome(t)
	eg, err := h.start(t)
	if err != nil {
		t.Fatal(err)
	}
	sock := eg.Socket()
	dir := filepath.Dir(sock)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir %v %v", fi, err)
	}
	if eg.PID() <= 0 || eg.PID() == os.Getpid() || !alive(eg.PID()) {
		t.Fatalf("the proxy does not run in a process of its own (pid %d)", eg.PID())
	}
	// A second session gets a second process.
	eg2, err := h.start(t)
	if err != nil {
		t.Fatal(err)
	}
	if eg2.PID() == eg.PID() || eg2.Socket() == sock {
		t.Fatalf("two sessions share the proxy process %d / socket %s", eg.PID(), sock)
	}
	if err := eg2.Stop(); err != nil {
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
	if err := eg.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("socket dir left after stop: %v", err)
	}
	if alive(eg.PID()) || alive(eg2.PID()) {
		t.Fatalf("a proxy process outlived its session")
	}
	select {
	case <-eg.Failed():
	default:
		t.Error("Failed is not closed after Stop")
	}
	// A session whose proxy is never stopped: closing the plugin host
	// (the end of the agentnode process) ends its process too.
	eg3, err := h.start(t)
	if err != nil {
		t.Fatal(err)
	}
	h.plugins.Close()
	if alive(eg3.PID()) {
		t.Fatalf("the plugin host's Close left the proxy process %d", eg3.PID())
	}
	os.RemoveAll(filepath.Dir(eg3.Socket()))
	recs := h.records(t)
	if len(recs) != 5 {
		t.Fatalf("%d audit records, want 5: %+v", len(recs), recs)
	}
	wants := []string{"other.example.com:443", "api.example.com:8443", "127.0.0.1", "api.example.com:443: ", "api.example.com"}
	for i, r := range recs {
		if r.Event != "egress" || r.Decision != "deny" || r.Code != string(reason.EgressDenied) ||
			r.Package != "echo-mcp" || r.Version != "1.0.0" || r.Placement != plan.PlacementSandbox || r.Backend != "libcontainer" ||
			r.RequestID != "req-egress" || r.Tool != "" || r.Action != "network_egress" || !strings.HasPrefix(r.Reason, wants[i]) {
			t.Errorf("record %d: %+v", i, r)
		}
		if strings.Contains(fmt.Sprintf("%+v", r), secret) {
			t.Errorf("record %d holds request payload: %+v", i, r)
		}
	}
	if !strings.Contains(recs[3].Reason, "10.1.2.3") {
		t.Errorf("the private-address refusal does not name the address: %q", recs[3].Reason)
	}
	if _, err := auditverify.Verify(home.AuditDir(h.dir)); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
}

// A teardown the proxy cannot verify fails closed: something left in the
// proxy's directory (here a file an attacker on the host planted) makes
// Stop an egress_denied error.
func TestTeardownUnverified(t *testing.T) {
	h := newTestHome(t)
	eg, err := h.start(t)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(eg.Socket()), "planted")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(eg.Socket())) })
	if err := eg.Stop(); reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "teardown") {
		t.Fatalf("stop: %v", err)
	}
}

// The proxy process killed in the middle of a session (as a crash or an
// exploit of its parser would): the session learns at once (Failed), the
// socket no longer answers, Stop is an egress_denied error, and what the
// dead process left (socket, directory) is removed.
func TestPluginCrashFailsClosed(t *testing.T) {
	h := newTestHome(t)
	eg, err := h.start(t)
	if err != nil {
		t.Fatal(err)
	}
	if code := connect(t, eg.Socket(), "CONNECT other.example.com:443 HTTP/1.1\r\n\r\n"); code != 403 {
		t.Fatalf("control: status %d, want 403", code)
	}
	if err := syscall.Kill(eg.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-eg.Failed() // no timeout: the test's deadline is the bound
	if c, err := net.Dial("unix", eg.Socket()); err == nil {
		c.Close()
		t.Fatal("the socket still accepts connections after the proxy died")
	}
	err = eg.Stop()
	if reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "session broken") {
		t.Fatalf("stop after the crash: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(eg.Socket())); !os.IsNotExist(err) {
		t.Fatalf("the dead proxy's directory was not removed: %v", err)
	}
}

// A release build of the plugin refuses test destinations: only the
// egresstest build honours them.
func TestReleasePluginRefusesTestDestinations(t *testing.T) {
	withEgressTest(t, "api.example.com=127.0.0.1", "127.0.0.1/32")
	proxyName = "proxy"
	h := newTestHome(t)
	_, err := h.start(t)
	if reason.CodeOf(err) != reason.EgressDenied || !strings.Contains(err.Error(), "egresstest") {
		t.Fatalf("start: %v", err)
	}
}

// Without a plugin host nothing starts, and the audit handle is closed.
func TestStartWithoutPlugins(t *testing.T) {
	h := newTestHome(t)
	a := &closeWatch{Auditor: h.audit(t, runBase, []string{"api.example.com"})}
	_, err := Start(context.Background(), Options{Audit: a, What: "package p",
		Domains: []string{"api.example.com"}})
	if reason.CodeOf(err) != reason.PluginUnavailable {
		t.Fatalf("start: %v", err)
	}
	if a.closed != 1 {
		t.Fatalf("the audit handle was closed %d times, want once", a.closed)
	}
}

// closeWatch counts the Close calls of an Auditor.
type closeWatch struct {
	Auditor
	closed int
}

func (c *closeWatch) Close() error { c.closed++; return c.Auditor.Close() }

// Outside a run (agentnode install from a package index): the same proxy
// and audit — a fresh request id, the caller's package, the refused
// connections listed by Denied, no socket left after Stop.
func TestStartOutsideRun(t *testing.T) {
	withEgressTest(t, "idx.example.com=10.1.2.3", "")
	h := newTestHome(t)
	domains := []string{"idx.example.com"}
	a := h.audit(t, audit.Record{Package: "quad-pack", Version: "1.0.0", Placement: plan.PlacementSandbox, Backend: "libcontainer"}, domains)
	eg, err := Start(context.Background(), Options{Plugins: h.plugins, Audit: a, What: "installing quad-pack", Domains: domains})
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
	recs := h.records(t)
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
