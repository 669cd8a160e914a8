package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

func evaluate(ctx context.Context, c *trust.Client) (*trust.EvaluateResponse, error) {
	return c.Evaluate(ctx, &trust.EvaluateRequest{PackageID: "pkg", Version: "1.0.0"})
}

func TestTrustOK(t *testing.T) {
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	ctx := context.Background()
	c, err := h.Trust(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := evaluate(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Level != trust.LevelTrusted || resp.Reason != "ok pkg" {
		t.Fatalf("Evaluate = %+v", resp)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	if pid <= 0 || !alive(pid) {
		t.Fatalf("PID = %d, not a live process", pid)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("plugin pgid = %d, %v; want its own group %d", pgid, err, pid)
	}
	// Cached: the same client and process.
	c2, err := h.Trust(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if c2 != c || h.PID(plugin.KindTrust, "faulty") != pid {
		t.Errorf("second Trust started another plugin")
	}
	h.Close()
	waitGone(t, pid, safetyNet)
	if _, err := h.Trust(ctx, "faulty"); !errors.Is(err, reason.ErrPluginUnavailable) {
		t.Errorf("Trust after Close = %v, want ErrPluginUnavailable", err)
	}
}

func TestConcurrentDispenseStartsOnePlugin(t *testing.T) {
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	var wg sync.WaitGroup
	clients := make([]*trust.Client, 8)
	errs := make([]error, 8)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i], errs[i] = h.Trust(context.Background(), "faulty")
		}()
	}
	wg.Wait()
	for i := range clients {
		if errs[i] != nil || clients[i] != clients[0] {
			t.Fatalf("dispense %d: %p, %v; want %p", i, clients[i], errs[i], clients[0])
		}
	}
	if n := len(running(e.path)); n != 1 {
		t.Errorf("%d plugin processes running, want 1", n)
	}
}

func TestUnpinnedRefused(t *testing.T) {
	e := newEnv(t, "ok", false)
	h := e.host(t, Options{})
	_, err := h.Trust(context.Background(), "faulty")
	if !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Fatalf("Trust = %v, want ErrPluginUnpinned", err)
	}
	if !strings.Contains(err.Error(), "trust-faulty") || !strings.Contains(err.Error(), "not pinned") {
		t.Errorf("message %q should name the plugin and say it is not pinned", err)
	}
	if pids := running(e.path); len(pids) != 0 {
		t.Errorf("unpinned plugin was started: %v", pids)
	}
}

func TestReplacedAfterPinRefused(t *testing.T) {
	e := newEnv(t, "ok", true)
	// Different bytes, still a working plugin: only the pin can catch it.
	b, err := os.ReadFile(faultyBin)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, e.path, append(b, []byte("tampered")...))
	h := e.host(t, Options{})
	_, err = h.Trust(context.Background(), "faulty")
	if !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Fatalf("Trust = %v, want ErrPluginUnpinned", err)
	}
	if !strings.Contains(err.Error(), "trust-faulty") || !strings.Contains(err.Error(), "changed") {
		t.Errorf("message %q should name the plugin and say it changed", err)
	}
	if pids := running(e.path); len(pids) != 0 {
		t.Errorf("tampered plugin was started: %v", pids)
	}
}

func TestPinnedPathDiffersRefused(t *testing.T) {
	e := newEnv(t, "ok", false)
	// Pin a copy in the home plugins dir; the copy beside agentnode wins
	// discovery and is not the pinned file, though its bytes are identical.
	homeCopy := install(t, home.PluginsDir(e.home), "agentnode-trust-faulty", "ok")
	testPin(t, e.home, homeCopy)
	h := e.host(t, Options{})
	_, err := h.Trust(context.Background(), "faulty")
	if !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Fatalf("Trust = %v, want ErrPluginUnpinned", err)
	}
	if !strings.Contains(err.Error(), "pinned at "+homeCopy) {
		t.Errorf("message %q should name the pinned path", err)
	}
}

func TestHomePluginRuns(t *testing.T) {
	e := &env{home: t.TempDir(), bin: t.TempDir()}
	e.path = install(t, home.PluginsDir(e.home), "agentnode-trust-faulty", "ok")
	testPin(t, e.home, e.path)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func TestNotInstalled(t *testing.T) {
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	_, err := h.Trust(context.Background(), "absent")
	if !errors.Is(err, reason.ErrPluginUnavailable) || !strings.Contains(err.Error(), "trust-absent") {
		t.Fatalf("Trust(absent) = %v, want ErrPluginUnavailable naming trust-absent", err)
	}
	if _, err := h.Trust(context.Background(), "../faulty"); !errors.Is(err, reason.ErrPluginUnavailable) {
		t.Fatalf("Trust(../faulty) = %v, want ErrPluginUnavailable", err)
	}
}

func TestCrashMidCall(t *testing.T) {
	e := newEnv(t, "crash", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = evaluate(ctx, c)
	if err == nil {
		t.Fatal("Evaluate on a crashing plugin succeeded")
	}
	err = CallError("trust-faulty", err)
	if !errors.Is(err, reason.ErrPluginUnavailable) || reason.CodeOf(err) != reason.PluginUnavailable {
		t.Fatalf("CallError = %v (code %q), want plugin_unavailable", err, reason.CodeOf(err))
	}
	if !strings.Contains(err.Error(), "trust-faulty") {
		t.Errorf("message %q should name the plugin", err)
	}
	waitGone(t, pid, safetyNet)
	// The dead plugin is not handed out again: the next dispense starts a
	// new process.
	deadline := time.Now().Add(safetyNet)
	for h.PID(plugin.KindTrust, "faulty") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := h.Trust(context.Background(), "faulty"); err != nil {
		t.Fatal(err)
	}
	if p2 := h.PID(plugin.KindTrust, "faulty"); p2 == 0 || p2 == pid {
		t.Errorf("after crash PID = %d, want a new process (old %d)", p2, pid)
	}
}

func TestHangHonoursDeadline(t *testing.T) {
	e := newEnv(t, "hang", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// The plugin never answers: the call returning at all, with the
	// deadline's error, is the proof that the deadline was honoured.
	_, err = evaluate(ctx, c)
	err = CallError("trust-faulty", err)
	if !errors.Is(err, reason.ErrPluginUnavailable) {
		t.Fatalf("Evaluate on a hanging plugin = %v, want ErrPluginUnavailable", err)
	}
	if !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("message %q should say the plugin timed out", err)
	}
	h.Close()
	waitGone(t, pid, safetyNet)
}

func TestStartFailures(t *testing.T) {
	// A failed start returns with its error (the slow and mute plugins
	// would otherwise keep the call waiting for good).
	for _, tc := range []struct {
		mode, want string
	}{
		{"badhandshake", "did not start"},
		{"slowstart", "did not start"},
		{"wrongkind", `reports kind "guard"`},
		{"badversion", "speaks plugin API versions [99]"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			e := newEnv(t, tc.mode, true)
			h := e.host(t, Options{StartTimeout: time.Second})
			_, err := h.Trust(context.Background(), "faulty")
			if !errors.Is(err, reason.ErrPluginUnavailable) {
				t.Fatalf("Trust = %v, want ErrPluginUnavailable", err)
			}
			if !strings.Contains(err.Error(), "trust-faulty") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q should name the plugin and contain %q", err, tc.want)
			}
			// Nothing is left running, even before Close.
			waitNoneRunning(t, e.path, safetyNet)
		})
	}
}

func TestCloseKillsProcessGroup(t *testing.T) {
	e := newEnv(t, "spawn", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	resp, err := evaluate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(resp.Reason)
	if err != nil || child <= 0 {
		t.Fatalf("spawn returned %q", resp.Reason)
	}
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != pid {
		t.Fatalf("grandchild %d pgid = %d, %v; want the plugin's group %d", child, pgid, err, pid)
	}
	h.Close()
	waitGone(t, pid, safetyNet)
	waitGone(t, child, safetyNet)
}

func TestPluginGetsNoHostEnv(t *testing.T) {
	t.Setenv("AGENTNODE_TEST_SECRET", "s3cret")
	t.Setenv("GOGC", "77") // the host's own value must not reach the plugin
	e := newEnv(t, "env", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := evaluate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range strings.Split(resp.Reason, "\x00") {
		name, _, _ := strings.Cut(v, "=")
		switch {
		case name == plugin.Handshake.MagicCookieKey, strings.HasPrefix(name, "PLUGIN_"):
			// go-plugin's own handshake variables
		case v == EvaluatorGOGC:
			// the host's fixed setting for trust and guard plugins
		default:
			t.Errorf("plugin saw host environment variable %q", v)
		}
	}
	if !strings.Contains(resp.Reason, EvaluatorGOGC) {
		t.Errorf("trust plugin env %q lacks %s", resp.Reason, EvaluatorGOGC)
	}
	if !strings.Contains(resp.Reason, plugin.Handshake.MagicCookieKey) {
		t.Errorf("plugin env %q lacks the handshake cookie; is the env mode working?", resp.Reason)
	}
}

// TestBrokerGetsOnlySessionBus: a broker plugin gets the D-Bus session bus
// address (to reach the OS keychain) and nothing else from the host; the
// same binary as a trust plugin, in the same host environment, gets none.
func TestBrokerGetsOnlySessionBus(t *testing.T) {
	const bus = "unix:path=/run/agentnode-test/bus"
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", bus)
	t.Setenv("XDG_RUNTIME_DIR", "/run/agentnode-test")
	t.Setenv("OPENAI_API_KEY", "sk-host-secret")
	t.Setenv("AGENTNODE_TEST_SECRET", "s3cret")
	e := newEnv(t, "env", true)
	bpath := install(t, e.bin, "agentnode-broker-faulty", "env")
	testPin(t, e.home, bpath)
	h := e.host(t, Options{})
	ctx := context.Background()
	b, err := h.Broker(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Chat(ctx, &broker.ChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sawBus bool
	for _, v := range strings.Split(resp.Message.Content, "\x00") {
		name, _, _ := strings.Cut(v, "=")
		switch {
		case v == "DBUS_SESSION_BUS_ADDRESS="+bus:
			sawBus = true
		case name == plugin.Handshake.MagicCookieKey, strings.HasPrefix(name, "PLUGIN_"):
		default:
			t.Errorf("broker plugin saw host environment variable %s", name)
		}
	}
	if !sawBus {
		t.Errorf("broker plugin env %q lacks DBUS_SESSION_BUS_ADDRESS", resp.Message.Content)
	}

	c, err := h.Trust(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := evaluate(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tr.Reason, plugin.Handshake.MagicCookieKey) {
		t.Fatalf("trust plugin env %q lacks the handshake cookie; is the env mode working?", tr.Reason)
	}
	for _, leak := range []string{"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "OPENAI_API_KEY", "AGENTNODE_TEST_SECRET"} {
		if strings.Contains(tr.Reason, leak) {
			t.Errorf("trust plugin saw %s", leak)
		}
	}
}

func TestPluginEnvByKind(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "autolaunch:")
	if env := pluginEnv(plugin.KindBroker); len(env) != 0 {
		t.Errorf("autolaunch: passed on as %q", env)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x")
	for _, kind := range plugin.Kinds {
		env := pluginEnv(kind)
		switch kind {
		case plugin.KindBroker:
			if len(env) != 1 || env[0] != "DBUS_SESSION_BUS_ADDRESS=unix:path=/x" {
				t.Errorf("broker env %q", env)
			}
		case plugin.KindTrust, plugin.KindGuard:
			if len(env) != 1 || env[0] != EvaluatorGOGC {
				t.Errorf("%s env %q, want only %s", kind, env, EvaluatorGOGC)
			}
		default:
			if env != nil {
				t.Errorf("%s env %q, want none", kind, env)
			}
		}
	}
}

func TestPluginStderrReachesHostLog(t *testing.T) {
	e := newEnv(t, "ok", true)
	var buf syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "agentnode", Level: hclog.Debug, Output: &buf})
	h := e.host(t, Options{Logger: logger})
	if _, err := h.Trust(context.Background(), "faulty"); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if s := buf.String(); !strings.Contains(s, "faulty plugin serving") || !strings.Contains(s, "mode=ok") {
		t.Errorf("host log lacks the plugin's log line:\n%s", s)
	}

	// At the default level (warn) the same start logs nothing.
	buf = syncBuffer{}
	quiet := hclog.New(&hclog.LoggerOptions{Name: "agentnode", Level: hclog.Warn, Output: &buf})
	h2 := e.host(t, Options{Logger: quiet})
	if _, err := h2.Trust(context.Background(), "faulty"); err != nil {
		t.Fatal(err)
	}
	h2.Close()
	if s := buf.String(); s != "" {
		t.Errorf("a clean start and stop logged at warn level:\n%s", s)
	}
}

// TestLogOutput: without a Logger the host logs to Options.LogOutput
// (plugin stderr included), and with neither it writes nothing to the
// process's stderr: raw plugin text never reaches a terminal on the
// host's own.
func TestLogOutput(t *testing.T) {
	e := newEnv(t, "ok", true)
	t.Setenv(LogEnv, "debug")
	start := func(opts Options) {
		opts.HomeDir, opts.BinDir = e.home, e.bin
		h := New(opts)
		if _, err := h.Trust(context.Background(), "faulty"); err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	var buf syncBuffer
	start(Options{LogOutput: &buf})
	if s := buf.String(); !strings.Contains(s, "faulty plugin serving") {
		t.Errorf("LogOutput lacks the plugin's log line:\n%s", s)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	saved := os.Stderr
	os.Stderr = w
	func() {
		defer func() { os.Stderr = saved }()
		start(Options{})
	}()
	w.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "faulty plugin serving") || strings.Contains(string(got), "mode=ok") {
		t.Errorf("the default logger wrote the plugin's stderr to the process's stderr:\n%s", got)
	}
}

func TestClientConfig(t *testing.T) {
	h := New(Options{HomeDir: t.TempDir(), BinDir: t.TempDir(), Logger: hclog.NewNullLogger(), StartTimeout: 3 * time.Second})
	sum := sha256.Sum256([]byte("x"))
	cfg, err := h.clientConfig(plugin.KindTrust, "faulty", "/bin/true", sum[:], &trust.GRPCPlugin{}, new(runnerCtl))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HandshakeConfig != plugin.Handshake {
		t.Error("handshake is not plugin.Handshake")
	}
	if len(cfg.AllowedProtocols) != 1 || cfg.AllowedProtocols[0] != goplugin.ProtocolGRPC {
		t.Errorf("AllowedProtocols = %v, want gRPC only", cfg.AllowedProtocols)
	}
	if cfg.AutoMTLS || !cfg.SkipHostEnv || cfg.Managed {
		t.Errorf("AutoMTLS=%v SkipHostEnv=%v Managed=%v", cfg.AutoMTLS, cfg.SkipHostEnv, cfg.Managed)
	}
	// Mutual TLS with host-issued certificates (mtls.go).
	if c := cfg.TLSConfig; c == nil || len(c.Certificates) != 1 || c.RootCAs == nil || c.MinVersion != tls.VersionTLS13 || c.ServerName != "localhost" {
		t.Errorf("TLSConfig = %+v, want a client certificate, the plugin's certificate as the only root, TLS 1.3", c)
	}
	if cfg.Cmd != nil || cfg.SecureConfig != nil || cfg.RunnerFunc == nil {
		t.Fatalf("Cmd=%v SecureConfig=%v RunnerFunc set=%v; want only RunnerFunc", cfg.Cmd, cfg.SecureConfig, cfg.RunnerFunc != nil)
	}
	spec := exec.Command("")
	spec.Env = []string{"PLUGIN_X=1"}
	rn, err := cfg.RunnerFunc(hclog.NewNullLogger(), spec, "")
	if err != nil {
		t.Fatal(err)
	}
	r := rn.(*pinnedRunner)
	if a := r.cmd.SysProcAttr; a == nil || !a.Setpgid || a.Pdeathsig != syscall.SIGKILL {
		t.Errorf("SysProcAttr = %+v, want Setpgid and Pdeathsig SIGKILL", a)
	}
	if r.cmd.Stdin != nil || r.cmd.Dir != "/" || len(r.cmd.Args) != 1 || r.cmd.Args[0] != "/bin/true" {
		t.Errorf("Stdin=%v Dir=%q Args=%q; want nil, /, [/bin/true]", r.cmd.Stdin, r.cmd.Dir, r.cmd.Args)
	}
	if len(r.cmd.Env) != 2 || r.cmd.Env[0] != EvaluatorGOGC || r.cmd.Env[1] != "PLUGIN_X=1" {
		t.Errorf("Env = %q, want the trust plugin's GOGC and go-plugin's only", r.cmd.Env)
	}
	// The runner checks the pin itself: /bin/true does not hash to sum.
	if err := r.Start(context.Background()); !errors.Is(err, reason.ErrPluginUnpinned) || !strings.Contains(err.Error(), "changed since it was pinned") {
		t.Errorf("Start of a binary with another hash = %v, want ErrPluginUnpinned", err)
	}
	if r.ID() != "" || r.cmd.Process != nil {
		t.Errorf("a binary with another hash was started (pid %s)", r.ID())
	}
	if cfg.StartTimeout != 3*time.Second {
		t.Errorf("StartTimeout = %v", cfg.StartTimeout)
	}
	if _, ok := cfg.VersionedPlugins[plugin.APIVersion][plugin.KindTrust]; !ok {
		t.Errorf("VersionedPlugins = %v", cfg.VersionedPlugins)
	}
	if h.CallTimeout() != DefaultCallTimeout {
		t.Errorf("CallTimeout = %v", h.CallTimeout())
	}
}

// The binary is swapped after locate checked it but before the runner
// opens it: the runner's hash of the opened file catches it, and go-plugin's
// socket directory does not outlive the failed start.
func TestRunnerRechecksBeforeExec(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // go-plugin creates its socket directory here
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	path, checksum, err := h.locate(plugin.KindTrust, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(faultyBin)
	replace(t, e.path, append(b, 'x'))
	cfg, err := h.clientConfig(plugin.KindTrust, "faulty", path, checksum, &trust.GRPCPlugin{}, new(runnerCtl))
	if err != nil {
		t.Fatal(err)
	}
	client := goplugin.NewClient(cfg)
	defer client.Kill()
	_, err = client.Start()
	if !errors.Is(err, reason.ErrPluginUnpinned) || !errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
		t.Fatalf("Start = %v, want ErrPluginUnpinned (ErrChecksumsDoNotMatch)", err)
	}
	want := hex.EncodeToString(checksum)
	if got := pinsOf(t, e.home)["trust-faulty"]["sha256"]; got != want {
		t.Errorf("checksum %s is not the pin %s", want, got)
	}
	if !strings.Contains(err.Error(), "pinned "+want) {
		t.Errorf("message %q should show the pinned sha256", err)
	}
	if pids := running(e.path); len(pids) != 0 {
		t.Errorf("swapped binary ran: %v", pids)
	}
	if des, _ := os.ReadDir(tmp); len(des) != 0 {
		t.Errorf("left behind in TMPDIR after a refused start: %v", des)
	}
}

// The attacker swaps the binary at the instant after the runner opened it,
// before the hash and the exec. Whatever lands at the path, the plugin that
// runs is the pinned file: the hash and the exec both go through the one
// open fd (/proc/self/fd/<n>), never through the path again.
func TestSwapAfterOpenCannotWin(t *testing.T) {
	e := newEnv(t, "ok", true)
	b, err := os.ReadFile(faultyBin)
	if err != nil {
		t.Fatal(err)
	}
	pinned := sha256.Sum256(b)
	// A working plugin with different bytes: if it ran, nothing else
	// would notice.
	evil := append(bytes.Clone(b), []byte("evil")...)
	swapped := false
	afterOpen = func(path string) {
		if path == e.path {
			replace(t, path, evil)
			swapped = true
		}
	}
	t.Cleanup(func() { afterOpen = nil })
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if !swapped {
		t.Fatal("the swap hook did not run")
	}
	if _, err := evaluate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	// /proc/<pid>/exe opens the executable the process runs.
	ran, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(ran) != pinned {
		t.Fatalf("plugin %d runs the swapped-in binary, not the pinned one", pid)
	}
	if now, _ := os.ReadFile(e.path); !bytes.Equal(now, evil) {
		t.Fatal("the path does not hold the swapped-in binary; the test proves nothing")
	}
	// The next start (after Close) sees the swapped file and refuses it.
	afterOpen = nil
	h.Close()
	h2 := e.host(t, Options{})
	if _, err := h2.Trust(context.Background(), "faulty"); !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Fatalf("Trust of the swapped binary = %v, want ErrPluginUnpinned", err)
	}
}

// agentnode's own stdin (the user's terminal under `agentnode run`, a
// caller's pipe) must not reach plugins. Here fd 0 of the host is a pipe with
// data in it; the plugin's fd 0 must be /dev/null, the data must still be
// there for the host, and no other descriptor of the plugin may be the pipe
// or the binary the host opened to verify it.
func TestPluginStdinIsDevNull(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	const secret = "y\nanswer to the prompt\n"
	if _, err := pw.WriteString(secret); err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(pr.Fd()), 0, 0); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Dup3(saved, 0, 0)
		_ = syscall.Close(saved)
	}()
	pipeLink, err := os.Readlink("/proc/self/fd/0")
	if err != nil || !strings.HasPrefix(pipeLink, "pipe:") {
		t.Fatalf("host fd 0 = %q, %v; want the test pipe", pipeLink, err)
	}

	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	if got, err := os.Readlink(fdDir + "/0"); err != nil || got != "/dev/null" {
		t.Errorf("plugin fd 0 = %q, %v; want /dev/null", got, err)
	}
	des, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		link, _ := os.Readlink(fdDir + "/" + de.Name())
		if link == pipeLink || link == e.path {
			t.Errorf("plugin fd %s is %s, a descriptor of the host", de.Name(), link)
		}
	}
	h.Close()
	// Nothing was read from the host's stdin.
	buf := make([]byte, len(secret)+1)
	n, err := pr.Read(buf)
	if err != nil || string(buf[:n]) != secret {
		t.Errorf("host stdin after the plugin ran: %q, %v; want %q unread", buf[:n], err, secret)
	}
}

// A goroutine that exits while locked to its OS thread takes the thread
// with it, and Pdeathsig fires when the thread that forked the plugin dies.
// Plugins are forked on launcher threads that never exit, so threads of
// this process coming and going must not kill them. The churn below ends
// every idle runtime thread, which includes the one that ran the fork if it
// were an ordinary thread.
func TestPluginSurvivesThreadChurn(t *testing.T) {
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	// Also dispense from a locked goroutine that exits while locked.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		_, err := h.Trust(context.Background(), "faulty")
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	var tids []int
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		n := 4 * runtime.GOMAXPROCS(0)
		ch := make(chan int, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // exits locked: the runtime ends this thread
				ch <- syscall.Gettid()
			}()
		}
		wg.Wait()
		close(ch)
		for tid := range ch {
			// The runtime parks the main thread instead of ending it.
			if tid != os.Getpid() {
				tids = append(tids, tid)
			}
		}
	}
	// Instead of sleeping: wait until those threads have really ended (a
	// parent-death signal goes out as a thread exits), proving the churn
	// this test is about happened; the Evaluate below cannot be answered by
	// a plugin with a SIGKILL pending.
	for deadline := time.Now().Add(safetyNet); ; time.Sleep(5 * time.Millisecond) {
		left := 0
		for _, tid := range tids {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err == nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d locked threads never ended", left, len(tids))
		}
	}
	if !alive(pid) {
		t.Fatalf("plugin %d died when threads of the host exited", pid)
	}
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if h.PID(plugin.KindTrust, "faulty") != pid {
		t.Fatal("plugin was restarted")
	}
	if _, err := evaluate(context.Background(), c); err != nil {
		t.Fatalf("Evaluate after the thread churn: %v", err)
	}
}

// The host is killed with SIGKILL: no Close, no deferred cleanup. The plugin
// must die with it (Pdeathsig; the sdk watchdog is the fallback).
func TestNoOrphansAfterHostKill(t *testing.T) {
	e := newEnv(t, "ok", true)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childHomeEnv+"="+e.home, childBinEnv+"="+e.bin)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	line := readLine(t, stdout, 30*time.Second)
	pidText, ok := strings.CutPrefix(line, "PID ")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		t.Fatalf("child host said %q; stderr:\n%s", line, stderr.String())
	}
	if !alive(pid) {
		t.Fatalf("plugin %d not running before the host is killed", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	status := waitGone(t, pid, safetyNet)
	// We are the subreaper, so the orphaned plugin was re-parented to us and
	// we reaped it: SIGKILL means Pdeathsig did it, exit 3 the sdk watchdog.
	if status == nil {
		t.Logf("plugin %d was reaped by someone else", pid)
	} else if !status.Signaled() || status.Signal() != syscall.SIGKILL {
		t.Errorf("plugin ended with %v (exit %d), want SIGKILL from Pdeathsig", *status, status.ExitStatus())
	}
	if pids := running(e.path); len(pids) != 0 {
		t.Errorf("plugin processes left: %v", pids)
	}
}

func TestEveryKindHasAnAdapter(t *testing.T) {
	for _, k := range plugin.Kinds {
		if adapters[k] == nil {
			t.Errorf("no adapter for plugin kind %q", k)
		}
	}
}

// A trust plugin installed under a guard name serves no Guard service: the
// Info check at start refuses it.
func TestWrongKindBinaryRefused(t *testing.T) {
	e := &env{home: t.TempDir(), bin: t.TempDir()}
	e.path = install(t, e.bin, "agentnode-guard-impostor", "ok")
	testPin(t, e.home, e.path)
	h := e.host(t, Options{})
	_, err := h.Guard(context.Background(), "impostor")
	if !errors.Is(err, reason.ErrPluginUnavailable) || !strings.Contains(err.Error(), "guard-impostor") {
		t.Fatalf("Guard(impostor) = %v, want ErrPluginUnavailable naming guard-impostor", err)
	}
	waitNoneRunning(t, e.path, safetyNet)
}

// A pinned binary that became writable by others could be swapped between
// the checks and exec: refused.
func TestWritableBinaryRefused(t *testing.T) {
	e := newEnv(t, "ok", false)
	b, err := os.ReadFile(faultyBin)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, e.path, b) // own inode: the chmod must not touch the shared build
	testPin(t, e.home, e.path)
	if err := os.Chmod(e.path, 0o757); err != nil {
		t.Fatal(err)
	}
	h := e.host(t, Options{})
	_, err = h.Trust(context.Background(), "faulty")
	if !errors.Is(err, reason.ErrPluginUnpinned) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("Trust = %v, want ErrPluginUnpinned about the file mode", err)
	}
}

// Exit (the end of a CLI command) kills trust and guard plugins with their
// process groups at once, removes their socket directories, and logs
// nothing: their SIGKILL is expected, not a crash.
func TestExitKillsAtOnceAndQuietly(t *testing.T) {
	e := newEnv(t, "spawn", true)
	var buf syncBuffer
	// Info, not Warn: go-plugin's notice that the process exited (Info for
	// an expected kill, Error for a crash) is the event the test waits for.
	quiet := hclog.New(&hclog.LoggerOptions{Name: "agentnode", Level: hclog.Info, Output: &buf})
	h := e.host(t, Options{Logger: quiet})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := h.PID(plugin.KindTrust, "faulty")
	resp, err := evaluate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(resp.Reason)
	if err != nil || child <= 0 {
		t.Fatalf("spawn returned %q", resp.Reason)
	}
	h.mu.Lock()
	socketDir := h.slots[Key(plugin.KindTrust, "faulty")].proc.ctl.getSocketDir()
	h.mu.Unlock()
	if socketDir == "" {
		t.Fatal("no socket directory recorded for the plugin")
	}
	if _, err := os.Stat(socketDir); err != nil {
		t.Fatalf("socket directory before Exit: %v", err)
	}
	h.Exit()
	if _, err := os.Stat(socketDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket directory after Exit: %v, want it removed", err)
	}
	// Killed, not merely asked: SIGKILL went to the whole group already
	// (the plugin may still await reaping by go-plugin's goroutine).
	for _, p := range []int{pid, child} {
		deadline := time.Now().Add(safetyNet)
		for alive(p) && !strings.Contains(procState(p), ") Z ") {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still running after Exit: %s", p, procState(p))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitGone(t, child, safetyNet)
	if _, err := h.Trust(context.Background(), "faulty"); err == nil {
		t.Error("dispense after Exit succeeded")
	}
	// Wait until go-plugin's goroutine has noticed the exit and logged it;
	// only then can its verdict on the exit be read.
	for deadline := time.Now().Add(safetyNet); !strings.Contains(buf.String(), "plugin process exited"); {
		if time.Now().After(deadline) {
			t.Fatalf("go-plugin never logged the plugin's exit:\n%s", buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := buf.String(); strings.Contains(s, "[WARN]") || strings.Contains(s, "[ERROR]") {
		t.Errorf("Exit logged at warn level or above:\n%s", s)
	}
}
