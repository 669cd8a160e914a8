package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the forwarder and as a client inside it:
// real processes, no copies of the code.
const asEnv = "FORWARDER_TEST_AS"

func TestMain(m *testing.M) {
	switch os.Getenv(asEnv) {
	case "forwarder":
		os.Exit(run(os.Args[1:]))
	case "client":
		os.Exit(client(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// client dials ADDR, sends MSG, half-closes and prints what comes back.
func client(args []string) int {
	c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	if _, err := io.WriteString(c, args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	os.Stdout.Write(b)
	return 0
}

// echoServer is a unix socket that answers every connection with a
// greeting and then echoes until the peer half-closes.
type echoServer struct {
	path  string
	l     net.Listener
	conns atomic.Int64
}

func newEchoServer(tb testing.TB) *echoServer {
	tb.Helper()
	dir, err := os.MkdirTemp("", "fwd-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	s := &echoServer{path: filepath.Join(dir, "egress.sock")}
	if s.l, err = net.Listen("unix", s.path); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.l.Close() })
	go func() {
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				io.WriteString(c, "hello from the host\n")
				io.Copy(c, c)
			}()
		}
	}()
	return s
}

// freePort returns a loopback address nobody listens on (now).
func freePort(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// forwarderCmd runs the forwarder (this test binary) on addr and sock
// around argv.
func forwarderCmd(tb testing.TB, addr, sock string, argv ...string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"-listen", addr, "-socket", sock, "--"}, argv...)...)
	cmd.Env = append(os.Environ(), asEnv+"=forwarder")
	return cmd
}

// selfAs is argv running this test binary in another role.
func selfAs(tb testing.TB, role string, args ...string) []string {
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return append([]string{"/usr/bin/env", asEnv + "=" + role, self}, args...)
}

func exitCode(tb testing.TB, err error) int {
	tb.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errorsAs(err, &ee) {
		tb.Fatalf("run: %v", err)
	}
	return ee.ExitCode()
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// TestForwardsToTheSocket: the child connects to the forwarder's TCP
// address and talks to the unix server; bytes flow both ways and the
// half-close reaches the server (the echo ends).
func TestForwardsToTheSocket(t *testing.T) {
	srv := newEchoServer(t)
	addr := freePort(t)
	cmd := forwarderCmd(t, addr, srv.path, selfAs(t, "client", addr, "ping-42")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	if got, want := out.String(), "hello from the host\nping-42"; got != want {
		t.Errorf("client got %q, want %q", got, want)
	}
	if srv.conns.Load() != 1 {
		t.Errorf("the server saw %d connections, want 1", srv.conns.Load())
	}
}

// TestSocketDown: with nothing listening on the socket, a connection is
// closed (the client reads EOF) and the forwarder says why on stderr.
func TestSocketDown(t *testing.T) {
	addr := freePort(t)
	cmd := forwarderCmd(t, addr, filepath.Join(t.TempDir(), "none.sock"), selfAs(t, "client", addr, "x")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// The client reads EOF, or a reset when its request was still unread.
	if code := exitCode(t, cmd.Run()); code != 0 && code != 5 {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "connecting to the egress socket") {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestExitStatus(t *testing.T) {
	srv := newEchoServer(t)
	for _, c := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -9 $$", 137},
		{"kill -TERM $$", 143},
	} {
		cmd := forwarderCmd(t, freePort(t), srv.path, "/bin/sh", "-c", c.script)
		if got := exitCode(t, cmd.Run()); got != c.want {
			t.Errorf("%q: exit %d, want %d", c.script, got, c.want)
		}
	}
}

func TestOwnErrors(t *testing.T) {
	srv := newEchoServer(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "data")
	os.WriteFile(notExec, []byte("x"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"port taken", []string{"-listen", taken.Addr().String(), "-socket", srv.path, "--", "/bin/true"}, exitUsage},
		{"not loopback", []string{"-listen", "0.0.0.0:1", "-socket", srv.path, "--", "/bin/true"}, exitUsage},
		{"no socket", []string{"-listen", freePort(t), "--", "/bin/true"}, exitUsage},
		{"no command", []string{"-listen", freePort(t), "-socket", srv.path, "--"}, exitUsage},
		{"unknown flag", []string{"-x"}, exitUsage},
		{"not found", []string{"-listen", freePort(t), "-socket", srv.path, "--", "/nonexistent/tool"}, exitNotFound},
		{"not in PATH", []string{"-listen", freePort(t), "-socket", srv.path, "--", "no-such-tool-xyz"}, exitNotFound},
		{"not executable", []string{"-listen", freePort(t), "-socket", srv.path, "--", notExec}, exitNotExecutable},
	} {
		self, _ := os.Executable()
		cmd := exec.Command(self, c.args...)
		cmd.Env = append(os.Environ(), asEnv+"=forwarder")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if got := exitCode(t, cmd.Run()); got != c.want {
			t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, got, c.want, errb.String())
		}
		if !strings.Contains(errb.String(), "agentnode-egress-forwarder") && c.name != "unknown flag" {
			t.Errorf("%s: stderr %q does not say who failed", c.name, errb.String())
		}
	}
}

// TestStdioPassThrough: the child's stdin, stdout and stderr are the
// forwarder's.
func TestStdioPassThrough(t *testing.T) {
	srv := newEchoServer(t)
	cmd := forwarderCmd(t, freePort(t), srv.path, "/bin/sh", "-c", "cat; echo err >&2")
	cmd.Stdin = strings.NewReader("in and out")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "in and out" || errb.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}

// TestForwardsSignals: SIGTERM to the forwarder reaches the child, whose
// trap decides the exit status.
func TestForwardsSignals(t *testing.T) {
	srv := newEchoServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1} {
		cmd := forwarderCmd(t, freePort(t), srv.path, "/bin/sh", "-c",
			fmt.Sprintf(`trap 'exit 42' %d; echo ready; while :; do sleep 0.05; done`, int(sig)))
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("child did not start: %q %v", line, err)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if got := exitCode(t, err); got != 42 {
				t.Errorf("%v: exit %d, want 42 (the child's trap)", sig, got)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v was not forwarded: still running", sig)
		}
	}
}

// TestReapsOrphans: a grandchild orphaned by the command is reparented to
// the forwarder (a subreaper) and reaped when it ends: no zombie.
func TestReapsOrphans(t *testing.T) {
	srv := newEchoServer(t)
	cmd := forwarderCmd(t, freePort(t), srv.path, "/bin/sh", "-c", "(sleep 0.2 &); echo ready; sleep 3")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	bufio.NewReader(stdout).ReadString('\n')
	fpid := cmd.Process.Pid
	// The orphan is adopted by the forwarder...
	adopted := false
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !adopted; time.Sleep(10 * time.Millisecond) {
		for _, p := range childrenOf(fpid) {
			if comm(p) == "sleep" && len(childrenOf(fpid)) >= 2 {
				adopted = true
			}
		}
	}
	if !adopted {
		t.Fatalf("the orphaned sleep was not reparented to the forwarder (children %v)", childrenOf(fpid))
	}
	// ...and, once it exits, reaped: only the command is left.
	time.Sleep(700 * time.Millisecond)
	for _, p := range childrenOf(fpid) {
		if state(p) == "Z" {
			t.Errorf("zombie %d (%s) left under the forwarder", p, comm(p))
		}
	}
}

// TestPid1 runs the forwarder as pid 1 of a new pid namespace (root only):
// signals sent from outside reach the command, and its exit ends the run.
func TestPid1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace needs root")
	}
	srv := newEchoServer(t)
	cmd := forwarderCmd(t, freePort(t), srv.path, "/bin/sh", "-c",
		`echo "ppid $PPID"; (sleep 0.1 &); trap 'exit 9' TERM; while :; do sleep 0.05; done`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ppid 1\n" {
		t.Errorf("the command says %q, want ppid 1: the forwarder is pid 1", line)
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range childrenOf(cmd.Process.Pid) {
		if state(p) == "Z" {
			t.Errorf("zombie %d under pid 1", p)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if got := exitCode(t, cmd.Wait()); got != 9 {
		t.Errorf("exit %d, want 9", got)
	}
}

func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[0]
}

// TestMaxActiveQueues: with -max-active 3 (serveQueued), a client that
// opens 10 connections at once has 3 forwarded; the 4th reaches the socket
// only when one of them ended, and none is refused: all 10 are answered.
func TestMaxActiveQueues(t *testing.T) {
	srv := newEchoServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	const n, total = 3, 10
	go serveQueued(l, srv.path, n)

	conns := make([]net.Conn, total)
	for i := range conns {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v (a queued connection must not be refused)", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	greeting := make([]byte, len("hello from the host\n"))
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(conns[i], greeting); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// The others wait in the backlog: the server sees no 4th connection
	// while the first 3 are open.
	time.Sleep(300 * time.Millisecond)
	if got := srv.conns.Load(); got != n {
		t.Fatalf("the server saw %d connections with %d open, want %d", got, n, n)
	}
	// Each one ended lets the next one through, until all are answered.
	for i := 0; i < total; i++ {
		if i >= n {
			if _, err := io.ReadFull(conns[i], greeting); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
		if got := srv.conns.Load(); got > int64(i+n) {
			t.Fatalf("the server saw %d connections with %d ended, at most %d forwarded at once", got, i, n)
		}
		conns[i].Close()
	}
	if got := srv.conns.Load(); got != total {
		t.Fatalf("the server saw %d connections, want %d", got, total)
	}
}

// TestMaxActiveRange: -max-active outside 0..256 does not start.
func TestMaxActiveRange(t *testing.T) {
	for _, v := range []string{"-1", "257"} {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-listen", freePort(t), "-socket", "/nonexistent", "-max-active", v, "--", "/bin/true")
		cmd.Env = append(os.Environ(), asEnv+"=forwarder")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if code := exitCode(t, cmd.Run()); code != exitUsage || !strings.Contains(errb.String(), "-max-active "+v) {
			t.Errorf("-max-active %s: exit %d, stderr %q", v, code, errb.String())
		}
	}
}
