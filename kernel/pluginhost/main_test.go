package pluginhost

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

// Environment switch that turns the test binary into a child "host" process
// for TestNoOrphansAfterHostKill.
const (
	childEnv     = "AGENTNODE_PLUGINHOST_TEST_CHILD"
	childHomeEnv = "AGENTNODE_PLUGINHOST_TEST_HOME"
	childBinEnv  = "AGENTNODE_PLUGINHOST_TEST_BIN"
)

// faultyBin is the faulty test plugin, built once by TestMain.
var faultyBin string

const prSetChildSubreaper = 36 // linux/prctl.h

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		childHost()
		return
	}
	// Orphaned descendants of this process (a plugin's grandchild, the plugin
	// of a killed child host) are re-parented to us, so the tests can reap
	// them and see how they died instead of racing init.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "pluginhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	faultyBin = filepath.Join(dir, "faulty")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	build := exec.Command(goBin, "build", "-o", faultyBin, "github.com/agentnode/agentnode/test/plugins/faulty")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build faulty plugin:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Plugins must not be writable by others; do not depend on the umask.
	if err := os.Chmod(faultyBin, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childHost starts the faulty plugin through a Host, prints its pid and
// waits to be killed.
func childHost() {
	h := New(Options{HomeDir: os.Getenv(childHomeEnv), BinDir: os.Getenv(childBinEnv), StartTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := h.Trust(ctx, "faulty")
	if err == nil {
		_, err = c.Evaluate(ctx, &trust.EvaluateRequest{PackageID: "p"})
	}
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("PID %d\n", h.PID(plugin.KindTrust, "faulty"))
	time.Sleep(time.Hour)
}

// env is one test installation: an agentnode home and a bin directory.
type env struct {
	home, bin string
	path      string // bin/agentnode-trust-faulty
}

// newEnv installs the faulty plugin as bin/agentnode-trust-faulty with the
// given mode, pinned if pin is true.
func newEnv(t *testing.T, mode string, pin bool) *env {
	t.Helper()
	e := &env{home: t.TempDir(), bin: t.TempDir()}
	e.path = install(t, e.bin, "agentnode-trust-faulty", mode)
	if pin {
		testPin(t, e.home, e.path)
	}
	return e
}

// testPin records path's pin in pins.json, as `agentnode plugins pin`
// does (cmd/agentnode/plugincat, which imports this package, so its tests
// cannot use it): the resolved path and its SHA-256 under Key(kind, name),
// mode 0600. Pins already there are kept unless the file does not load.
func testPin(tb testing.TB, homeDir, path string) {
	tb.Helper()
	kind, name, ok := strings.Cut(strings.TrimPrefix(filepath.Base(path), Prefix), "-")
	if !ok || !validKind(kind) || !ValidName(name) {
		tb.Fatalf("testPin: %s is not a plugin file name", path)
	}
	real, err := ResolveFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(real)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(b)
	pins, err := LoadPins(homeDir)
	if err != nil {
		pins = map[string]PinValue{}
	}
	pins[Key(kind, name)] = PinValue{Path: real, SHA256: hex.EncodeToString(sum[:])}
	data, err := json.Marshal(pins)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(home.PluginsDir(homeDir), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(PinsPath(homeDir), data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// install places the faulty binary at dir/name (a hard link when possible,
// so tests must replace the file rather than modify it) and writes its mode
// file.
func install(t *testing.T, dir, name, mode string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.Link(faultyBin, path); err != nil {
		b, rerr := os.ReadFile(faultyBin)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if werr := os.WriteFile(path, b, 0o755); werr != nil {
			t.Fatal(werr)
		}
	}
	if err := os.WriteFile(path+".mode", []byte(mode+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e *env) host(t *testing.T, opts Options) *Host {
	t.Helper()
	opts.HomeDir, opts.BinDir = e.home, e.bin
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	h := New(opts)
	t.Cleanup(h.Close)
	return h
}

// testLogger sends the host's log, including plugin stderr, to t.Log.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Debug, Output: tWriter{t}})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// alive reports whether pid exists (kill(pid, 0) is not ESRCH). A zombie
// still exists.
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// safetyNet is how long the tests wait for an event that must come (a
// killed process gone) before failing: it only keeps a broken build from
// hanging, and is no bound on how fast anything happens.
const safetyNet = 30 * time.Second

// waitGone waits until pid no longer exists, reaping it if it is our child
// (or was re-parented to us, the subreaper). It returns the wait status when
// this process reaped it.
func waitGone(t *testing.T, pid int, timeout time.Duration) (status *syscall.WaitStatus) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ws syscall.WaitStatus
		if wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && wpid == pid {
			status = &ws
		}
		if !alive(pid) {
			return status
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still exists after %v (%s)", pid, timeout, procState(pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// running lists the live processes executing the binary at path.
func running(path string) []int {
	des, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", de.Name(), "exe"))
		if err == nil && strings.TrimSuffix(exe, " (deleted)") == path {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoneRunning fails the test if a process still runs path after
// timeout.
func waitNoneRunning(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pids := running(path)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running %s: %v", path, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readLine reads one line from r or fails after timeout.
func readLine(t *testing.T, r io.Reader, timeout time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ch <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ch:
		return line
	case <-time.After(timeout):
		t.Fatalf("no line within %v", timeout)
		return ""
	}
}

// pinsOf reads pins.json raw.
func pinsOf(t *testing.T, homeDir string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home.PluginsDir(homeDir), PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("pins.json: %v\n%s", err, b)
	}
	return m
}
