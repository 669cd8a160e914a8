//go:build linux

package plugin_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentnode/agentnode/sdk/internal/testeval"
	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
	"github.com/agentnode/agentnode/sdk/trust"
)

// pluginBin is the test plugin (sdk/internal/testplugin), built by TestMain;
// pluginSum is its SHA-256.
var (
	pluginBin string
	pluginSum []byte
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentnode-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	pluginBin = filepath.Join(dir, "agentnode-trust-testplugin")
	build := exec.Command(goTool(), "build", "-o", pluginBin, "github.com/agentnode/agentnode/sdk/internal/testplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		return 1
	}
	data, err := os.ReadFile(pluginBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sum := sha256.Sum256(data)
	pluginSum = sum[:]
	return m.Run()
}

// lockedBuffer collects the host-side go-plugin log, shown when a test fails.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hostConfig is how the kernel launches a plugin: gRPC only, AutoMTLS, the
// binary pinned by SHA-256, no inherited environment.
func hostConfig(versions map[int]goplugin.PluginSet, sum []byte, logs io.Writer) *goplugin.ClientConfig {
	return &goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: versions,
		Cmd:              exec.Command(pluginBin),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		SecureConfig:     &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		SkipHostEnv:      true,
		StartTimeout:     30 * time.Second,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug}),
	}
}

func trustVersions() map[int]goplugin.PluginSet {
	return plugin.VersionedSet(plugin.KindTrust, &trust.GRPCPlugin{})
}

// startPlugin launches the test plugin and returns its client and process.
func startPlugin(t testing.TB) (*goplugin.Client, *trust.Client, *exec.Cmd) {
	t.Helper()
	logs := &lockedBuffer{}
	cfg := hostConfig(trustVersions(), pluginSum, logs)
	c := goplugin.NewClient(cfg)
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("host log:\n%s", logs)
		}
	})
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("starting the plugin: %v", err)
	}
	raw, err := rpc.Dispense(plugin.KindTrust)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	tc, ok := raw.(*trust.Client)
	if !ok {
		t.Fatalf("dispensed %T, want *trust.Client", raw)
	}
	return c, tc, cfg.Cmd
}

// alive reports whether pid is a live process (a zombie counts as gone:
// whoever inherited it may not reap it).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSubprocessInfoAndEvaluate(t *testing.T) {
	c, tc, cmd := startPlugin(t)
	if v := c.NegotiatedVersion(); v != plugin.APIVersion {
		t.Errorf("negotiated API version %d, want %d", v, plugin.APIVersion)
	}
	if c.Protocol() != goplugin.ProtocolGRPC {
		t.Errorf("protocol %q, want grpc", c.Protocol())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	info, err := tc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (plugin.Info{Name: "testplugin", Kind: plugin.KindTrust, Version: "0.0.1", APIVersions: []uint32{1}}); !reflect.DeepEqual(info, want) {
		t.Errorf("Info = %+v, want %+v", info, want)
	}
	resp, err := tc.Evaluate(ctx, &trust.EvaluateRequest{
		PackageID: "pkg-a", Version: "1.2.3", ArtifactHash: "sha256:abc",
		Attestations: [][]byte{[]byte(`{}`)}, Keys: []trust.Key{{ID: "k", PublicKey: "AAAA"}}, NowUnix: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &trust.EvaluateResponse{Level: trust.LevelVerified, Issuer: testeval.Issuer, Reason: "pkg-a@1.2.3 sha256:abc keys=1", ExpiresAtUnix: 4600}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("Evaluate = %+v, want %+v", resp, want)
	}
	if _, err := tc.Evaluate(ctx, &trust.EvaluateRequest{PackageID: "error"}); err == nil || !strings.Contains(err.Error(), "asked to fail") {
		t.Errorf("error %v, want the plugin's error", err)
	}

	pid := cmd.Process.Pid
	if !alive(pid) {
		t.Fatalf("plugin %d not running", pid)
	}
	c.Kill()
	waitGone(t, pid, 5*time.Second)
	if !c.Exited() {
		t.Error("client does not report the plugin as exited")
	}
}

func TestSubprocessRequiresMTLS(t *testing.T) {
	c, _, _ := startPlugin(t)
	rc := c.ReattachConfig()
	if rc == nil || rc.Addr.Network() != "unix" {
		t.Fatalf("reattach config %+v, want a unix socket", rc)
	}
	conn, err := grpc.NewClient("unix://"+rc.Addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if info, err := pb.NewTrustClient(conn).Info(ctx, &pb.InfoRequest{}); err == nil {
		t.Fatalf("a plaintext client without the host's certificate got %v", info)
	}
}

func TestSubprocessVersionMismatch(t *testing.T) {
	logs := &lockedBuffer{}
	cfg := hostConfig(map[int]goplugin.PluginSet{99: {plugin.KindTrust: &trust.GRPCPlugin{}}}, pluginSum, logs)
	c := goplugin.NewClient(cfg)
	defer c.Kill()
	done := make(chan error, 1)
	go func() {
		_, err := c.Client()
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("version negotiation hangs")
	}
	if err == nil || !strings.Contains(err.Error(), "incompatible API version") || !strings.Contains(err.Error(), "99") {
		t.Fatalf("error %v, want an incompatible API version error naming 99", err)
	}
	if cfg.Cmd.Process == nil {
		t.Fatal("the plugin was never started")
	}
	waitGone(t, cfg.Cmd.Process.Pid, 5*time.Second)
}

func TestSubprocessChecksumMismatch(t *testing.T) {
	wrong := bytes.Clone(pluginSum)
	wrong[0] ^= 0xff
	cfg := hostConfig(trustVersions(), wrong, io.Discard)
	c := goplugin.NewClient(cfg)
	defer c.Kill()
	_, err := c.Client()
	if !errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
		t.Fatalf("error %v, want ErrChecksumsDoNotMatch", err)
	}
	if cfg.Cmd.Process != nil {
		t.Fatalf("a binary with the wrong checksum was started (pid %d)", cfg.Cmd.Process.Pid)
	}
}

func TestRunByHandRefuses(t *testing.T) {
	cmd := exec.Command(pluginBin)
	cmd.Env = []string{} // in particular no handshake cookie
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the plugin run by hand did not exit")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want a non-zero exit status", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing (stdout is go-plugin's handshake channel)", stdout.String())
	}
	if !strings.Contains(stderr.String(), "agentnode plugin") {
		t.Errorf("stderr %q, want an explanation", stderr.String())
	}
}

// TestWatchdogExitsWhenParentDies starts the plugin from an intermediate
// shell (so no go-plugin client, no Pdeathsig), kills the shell and expects
// the plugin's own watchdog to end it.
func TestWatchdogExitsWhenParentDies(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plugin.out")
	sh := exec.Command("/bin/sh", "-c", `"$0" >"$1" 2>&1 & echo $!; wait`, pluginBin, out)
	sh.Env = []string{
		plugin.Handshake.MagicCookieKey + "=" + plugin.Handshake.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1",
		"TMPDIR=" + t.TempDir(),
	}
	shOut, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(shOut).ReadString('\n')
	if err != nil {
		_ = sh.Process.Kill()
		t.Fatalf("reading the plugin pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = sh.Process.Kill()
		t.Fatalf("plugin pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// Wait for the handshake line: the plugin is serving.
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(out)
		if bytes.Contains(data, []byte("|grpc")) {
			break
		}
		if time.Now().After(deadline) {
			_ = sh.Process.Kill()
			t.Fatalf("the plugin did not start serving; output %q", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(pid) {
		t.Fatal("plugin not running before its parent dies")
	}
	time.Sleep(500 * time.Millisecond) // longer than a watchdog tick: it must not fire while the parent lives
	if !alive(pid) {
		t.Fatal("plugin exited while its parent was alive")
	}
	if err := sh.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sh.Wait()
	waitGone(t, pid, 5*time.Second)
}
