package hostexec

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/executor/confine/confinetest"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
)

var (
	escapeOnce sync.Once
	escapeBin  []byte
	escapeErr  error
)

// escapePack returns a package directory holding the attacker
// (testdata/escape, built once per test binary, statically) as "escape".
func escapePack(t *testing.T) string {
	t.Helper()
	escapeOnce.Do(func() {
		// Re-executed as a created user (asuser_test.go): the parent
		// built the probe.
		if p := os.Getenv(escapeBinEnv); p != "" {
			escapeBin, escapeErr = os.ReadFile(p)
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			escapeErr = err
			return
		}
		dir, err := os.MkdirTemp("", "hostexec-escape-")
		if err != nil {
			escapeErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "escape")
		cmd := exec.Command(goBin, "build", "-o", out, "./testdata/escape")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			escapeErr = fmt.Errorf("%w: %s", err, b)
			return
		}
		escapeBin, escapeErr = os.ReadFile(out)
	})
	if escapeErr != nil {
		t.Fatalf("build the escape probe: %v", escapeErr)
	}
	pack := t.TempDir()
	if err := os.WriteFile(filepath.Join(pack, "escape"), escapeBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pack, "data.txt"), []byte("package data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return pack
}

// probe runs the attacker confined and returns check name → outcome
// ("allowed" or "denied: ERRNO").
func probe(t *testing.T, pack string, c *Confinement, checks ...string) (map[string]string, *Result) {
	t.Helper()
	req := &Request{PackageDir: pack, Entrypoint: "escape", Args: checks, Env: AllowedEnv(os.Environ()),
		Timeout: 20 * time.Second, Confine: c}
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("probe exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		name, outcome, _ := strings.Cut(sc.Text(), ": ")
		got[name] = outcome
	}
	return got, res
}

// outcome is a check of the attacker and what must come of it: "allowed",
// or (part of) the error that denies it.
type outcome struct{ check, want string }

// checksOf lists the checks, in order (some depend on earlier ones).
func checksOf(want []outcome) []string {
	var out []string
	for _, o := range want {
		out = append(out, o.check)
	}
	return out
}

// expect compares outcomes.
func expect(t *testing.T, got map[string]string, want []outcome) {
	t.Helper()
	for _, o := range want {
		name, w := o.check, o.want
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: no outcome", name)
		case w == "allowed" && g != "allowed":
			t.Errorf("%s: %s, want allowed", name, g)
		case w != "allowed" && !strings.HasPrefix(g, "denied"):
			t.Errorf("%s: ESCAPED (allowed), want denied %s", name, w)
		case w != "allowed" && !strings.Contains(g, w):
			t.Errorf("%s: %s, want denied %s", name, g, w)
		}
	}
}

// listeners are real servers on the host that a confined tool must not
// reach: TCP and UDP on loopback, a unix socket in a directory and an
// abstract unix socket. Each counts what reaches it (hits, all together;
// seen, per listener).
type listeners struct {
	tcpPort, udpPort string
	unixPath         string
	abstract         string
	hits             atomic.Int64
	seen             [4]atomic.Int64 // tcp, unix, abstract, udp
}

func startListeners(t *testing.T) *listeners {
	t.Helper()
	l := &listeners{}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.tcpPort = strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.udpPort = strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port)
	l.unixPath = filepath.Join(t.TempDir(), "agent.sock")
	ux, err := net.Listen("unix", l.unixPath)
	if err != nil {
		t.Fatal(err)
	}
	l.abstract = fmt.Sprintf("agentnode-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	abs, err := net.Listen("unix", "@"+l.abstract)
	if err != nil {
		t.Fatal(err)
	}
	for i, ln := range []net.Listener{tcp, ux, abs} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				l.hits.Add(1)
				l.seen[i].Add(1)
				c.Close()
			}
		}()
	}
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			l.hits.Add(1)
			l.seen[3].Add(1)
		}
	}()
	t.Cleanup(func() {
		tcp.Close()
		udp.Close()
		ux.Close()
		abs.Close()
	})
	return l
}

// settle returns how many connections and datagrams reached the listeners
// before it was called. Instead of sleeping and hoping that anything in
// flight has arrived, it sends a control to each listener itself (which
// also proves each can be reached) and waits until every one has counted
// it: each listener handles its queue in order, so whatever a tool sent
// earlier has been counted by then.
func (l *listeners) settle(t *testing.T) int64 {
	t.Helper()
	var before [4]int64
	for i := range l.seen {
		before[i] = l.seen[i].Load()
	}
	for _, addr := range [][2]string{{"tcp4", "127.0.0.1:" + l.tcpPort}, {"unix", l.unixPath}, {"unix", "@" + l.abstract}, {"udp4", "127.0.0.1:" + l.udpPort}} {
		c, err := net.Dial(addr[0], addr[1])
		if err != nil {
			t.Fatalf("control connection to %s: %v", addr[1], err)
		}
		if addr[0] == "udp4" {
			_, err = c.Write([]byte("control"))
		}
		c.Close()
		if err != nil {
			t.Fatalf("control datagram to %s: %v", addr[1], err)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // a safety net
	for i := range l.seen {
		for l.seen[i].Load() <= before[i] {
			if time.Now().After(deadline) {
				t.Fatalf("listener %d never counted the control connection", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return l.hits.Load() - int64(len(l.seen))
}

func requireLandlock(t *testing.T) {
	t.Helper()
	confinetest.Require(t)
}

// TestConfinedEscapesFail runs a host tool that tries to leave its
// confinement every way the design names, against real targets.
func TestConfinedEscapesFail(t *testing.T) {
	requireLandlock(t)
	requireAsUser(t)
	pack := escapePack(t)
	l := startListeners(t)

	outside := t.TempDir()
	fakeHome := filepath.Join(outside, "home")
	if err := os.MkdirAll(filepath.Join(fakeHome, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	idRSA := filepath.Join(fakeHome, ".ssh", "id_rsa")
	if err := os.WriteFile(idRSA, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("agentnode-escape-%d-%d", os.Getpid(), time.Now().UnixNano())
	written := []string{
		filepath.Join(pack, "pwned"), filepath.Join(os.TempDir(), tag), filepath.Join(realHome, tag),
		filepath.Join(fakeHome, "pwned"), filepath.Join(os.TempDir(), tag+"-dir"),
	}
	t.Cleanup(func() {
		for _, p := range written {
			_ = os.RemoveAll(p)
		}
	})
	self := strconv.Itoa(os.Getpid())

	want := []outcome{
		// files: only the work dir is writable, only system files and the
		// package are readable
		{"write=" + written[0], "EACCES"},
		{"write=" + written[1], "EACCES"},
		{"write=" + written[2], "EACCES"},
		{"write=" + written[3], "EACCES"},
		{"mkdir=" + written[4], "EACCES"},
		{"append=" + victim, "EACCES"},
		{"remove=" + victim, "EACCES"},
		{"read=" + idRSA, "EACCES"},
		{"readdir=" + realHome, "EACCES"},
		{"readdir=" + os.TempDir(), "EACCES"},
		{"read=/etc/shadow", "EACCES"},
		{"read=/proc/1/environ", "EACCES"},
		{"read=/proc/" + self + "/environ", "EACCES"},
		// network none: no socket at all
		{"tcp_connect=" + l.tcpPort, "EPERM"},
		{"mptcp_connect=" + l.tcpPort, "EPERM"},
		{"udp_sendto=" + l.udpPort, "EPERM"},
		{"tcp_listen", "EPERM"},
		{"unix_connect=" + l.unixPath, "EPERM"},
		{"unix_abstract=" + l.abstract, "EPERM"},
		{"netlink", "EPERM"},
		{"packet", "EPERM"},
		{"unix_highbits", "EPERM"},
		// processes, namespaces, kernel
		{"ptrace=" + self, "EPERM"},
		{"kill=" + self, "EPERM"},
		{"unshare", "EPERM"},
		{"unshare_ns", "EPERM"},
		{"clone_newuser", "operation not permitted"},
		{"clone_newnet", "operation not permitted"},
		{"clone3", "function not implemented"},
		{"setns", "EPERM"},
		{"mount=$HOME", "EPERM"},
		{"chroot=/", "EPERM"},
		{"bpf", "EPERM"},
		{"keyctl", "EPERM"},
		{"perf", "EPERM"},
		{"userfaultfd", "EPERM"},
		{"io_uring", "EPERM"},
		{"init_module", "EPERM"},
		{"open_by_handle", "EPERM"},
		{"tiocsti", "EPERM"},
		{"settime", "EPERM"},
		{"caps", "no capabilities"},
		// what a tool may do
		{"write=$HOME/ok", "allowed"},
		{"read=$HOME/ok", "allowed"},
		{"mkdir=$TMPDIR/sub", "allowed"},
		{"remove=$HOME/ok", "allowed"},
		{"read=$PACK_DIR/data.txt", "allowed"},
		{"readdir=$PACK_DIR", "allowed"},
		{"read=/etc/passwd", "allowed"},
		{"read=/dev/urandom", "allowed"},
		{"write=/dev/null", "allowed"},
		{"readdir=/usr/bin", "allowed"},
		{"socketpair", "allowed"},
		{"fork", "allowed"},
	}
	got, res := probe(t, pack, &Confinement{Mode: confine.ModeRequired}, checksOf(want)...)
	expect(t, got, want)
	if res.Confinement != "" {
		t.Errorf("Confinement = %q, want full confinement", res.Confinement)
	}
	if n := l.settle(t); n != 0 {
		t.Errorf("%d connections or datagrams reached the host's listeners", n)
	}
	for _, p := range written {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim file changed: %q", b)
	}
}

// TestConfinedCannotReadSealKeyCache: agentnode keeps the seal key of the
// lockfile and the audit anchor in the kernel's user keyring
// (kernel/lockfile, "The seal key cache"), where every process of the user can
// read it. A confined tool runs as that user; the filter's keyctl denial
// is what keeps the key from it. The control: the same attacker, not
// confined, reads the key.
func TestConfinedCannotReadSealKeyCache(t *testing.T) {
	requireLandlock(t)
	pack := escapePack(t)
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	// A scope of its own (no keychain is reached: only the cache is used).
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/agentnode-hostexec-"+hex.EncodeToString(b))
	key := make([]byte, lockfile.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	desc, err := lockfile.CacheKey(key)
	if err != nil {
		t.Skipf("no kernel keyring here: %v", err)
	}
	t.Cleanup(func() {
		if serial, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", desc, 0); err == nil {
			_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, serial, 0, 0, 0)
		}
	})
	check := "keyread=" + desc
	if got := foreignABIRun(t, pack, check, nil); got != "allowed" {
		t.Fatalf("control: the unconfined attacker could not read the cached key: %s", got)
	}
	got, _ := probe(t, pack, &Confinement{Mode: confine.ModeRequired}, check)
	expect(t, got, []outcome{{check, "EPERM"}})
	got, _ = probe(t, pack, &Confinement{Mode: confine.ModeRequired, Network: true}, check)
	expect(t, got, []outcome{{check, "EPERM"}})
}

// TestConfinedNetworkDeclared: a tool that declares network gets inet
// sockets on the host, and nothing more.
func TestConfinedNetworkDeclared(t *testing.T) {
	requireLandlock(t)
	pack := escapePack(t)
	l := startListeners(t)
	want := []outcome{
		{"tcp_connect=" + l.tcpPort, "allowed"},
		{"udp_sendto=" + l.udpPort, "allowed"},
		{"mptcp_connect=" + l.tcpPort, "EPERM"},
		{"mptcp_highbits", "EPERM"},
		{"unix_connect=" + l.unixPath, "EPERM"},
		{"unix_abstract=" + l.abstract, "EPERM"},
		{"unix_highbits", "EPERM"},
		{"netlink", "EPERM"},
		{"packet", "EPERM"},
		{"ptrace=" + strconv.Itoa(os.Getpid()), "EPERM"},
		{"read=/etc/shadow", "EACCES"},
	}
	got, _ := probe(t, pack, &Confinement{Mode: confine.ModeRequired, Network: true}, checksOf(want)...)
	expect(t, got, want)
	if n := l.settle(t); n != 2 {
		t.Errorf("%d connections or datagrams reached the listeners, want 2 (TCP and UDP)", n)
	}
}

// TestConfinedForeignABIKilled: a syscall through the i386 (int $0x80) or
// x32 ABI never reaches the kernel, where the filter's syscall numbers would
// mean something else. What the kernel does with these ABIs differs between
// machines (without the i386 ABI int $0x80 faults before any filter sees
// it), so each attempt is first made unconfined, as the control: the
// confined attempt must be killed by the filter (SIGSYS), or, where the
// kernel itself refuses the ABI, end exactly as the control did.
func TestConfinedForeignABIKilled(t *testing.T) {
	requireLandlock(t)
	pack := escapePack(t)
	for _, check := range []string{"i386", "x32"} {
		control := foreignABIRun(t, pack, check, nil)
		confined := foreignABIRun(t, pack, check, &Confinement{Mode: confine.ModeRequired})
		seen, err := foreignABIVerdict(control, confined)
		if err != nil {
			t.Errorf("%s: %v", check, err)
			continue
		}
		t.Logf("%s: unconfined %s; confined %s", check, control, seen)
	}
}

// TestForeignABIFaultSeen: the fault int $0x80 raises on a kernel without
// the i386 ABI (here int $0x81, faulting the same way on every kernel)
// reaches the test as SIGSEGV, unconfined and confined, not as a Go runtime
// crash (exit 2): TestConfinedForeignABIKilled can tell a faulting kernel
// apart.
func TestForeignABIFaultSeen(t *testing.T) {
	requireLandlock(t)
	pack := escapePack(t)
	for _, c := range []*Confinement{nil, {Mode: confine.ModeRequired}} {
		if got := foreignABIRun(t, pack, "gpfault", c); got != "SIGSEGV" {
			t.Errorf("confined %v: a general protection fault ended %s, want SIGSEGV", c != nil, got)
		}
	}
}

// foreignABIRun runs the escape's check (i386 or x32) with confinement c
// (nil: unconfined) and says how it ended: "allowed", "denied: ERRNO",
// "SIGSEGV", "SIGSYS", or the raw result for anything else.
func foreignABIRun(t *testing.T, pack, check string, c *Confinement) string {
	t.Helper()
	req := &Request{PackageDir: pack, Entrypoint: "escape", Args: []string{check}, Env: AllowedEnv(os.Environ()),
		Timeout: 20 * time.Second, Confine: c}
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: Run: %v", check, err)
	}
	line := strings.TrimSpace(string(res.Stdout))
	switch {
	case res.ExitCode == 128+int(unix.SIGSYS):
		return "SIGSYS"
	case res.ExitCode == 128+int(unix.SIGSEGV):
		return "SIGSEGV"
	case res.ExitCode == 0 && line == check+": allowed":
		return "allowed"
	case res.ExitCode == 0 && strings.HasPrefix(line, check+": denied: E"):
		errno, _, _ := strings.Cut(strings.TrimPrefix(line, check+": denied: "), " ")
		return "denied: " + errno
	}
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
}

// foreignABIVerdict judges a confined foreign-ABI attempt against the
// control, the same attempt unconfined on this machine, and says what it
// saw: a SIGSYS kill passes whatever the kernel does; where the kernel
// refuses the ABI by itself (a fault, ENOSYS, EPERM), the confined attempt
// may end exactly as the control did. Anything else fails.
func foreignABIVerdict(control, confined string) (string, error) {
	kernelRefuses := control == "SIGSEGV" || control == "denied: ENOSYS" || control == "denied: EPERM"
	switch {
	case confined == "SIGSYS":
		return "killed by SIGSYS: the filter stopped it", nil
	case kernelRefuses && confined == control:
		return confined + ", as unconfined: the host kernel refuses this ABI itself, so nothing reaches it " +
			"(the filter is not exercised through it on this machine)", nil
	case kernelRefuses:
		return "", fmt.Errorf("confined: %s; unconfined: %s; want SIGSYS (the filter's kill) or the kernel's own %s", confined, control, control)
	}
	return "", fmt.Errorf("confined: %s; unconfined: %s; want 159 (SIGSYS)", confined, control)
}

// TestForeignABIVerdict: every control outcome against every confined one.
func TestForeignABIVerdict(t *testing.T) {
	outcomes := []string{"SIGSYS", "denied: EPERM", "denied: ENOSYS", "SIGSEGV", "allowed", "exit 2, stdout \"\""}
	pass := map[string][]string{
		"allowed":        {"SIGSYS"},
		"SIGSEGV":        {"SIGSYS", "SIGSEGV"},
		"denied: ENOSYS": {"SIGSYS", "denied: ENOSYS"},
		"exit 2":         {"SIGSYS"},
	}
	for control, ok := range pass {
		for _, confined := range outcomes {
			_, err := foreignABIVerdict(control, confined)
			if want := slices.Contains(ok, confined); (err == nil) != want {
				t.Errorf("unconfined %s, confined %s: err %v, want pass %v", control, confined, err, want)
			}
		}
	}
}

// TestConfinedLegitTool: an honest tool still works confined: it reads its
// package, writes and reads its temp dir, runs system utilities.
func TestConfinedLegitTool(t *testing.T) {
	requireLandlock(t)
	pack := newPack(t, `IFS= read -r line
cat "$PACK_DIR/data.txt" > "$TMPDIR/copy"
mkdir -p "$HOME/a/b" && mv "$TMPDIR/copy" "$HOME/a/b/moved"
touch "$HOME/stamp" && touch "$HOME/stamp" || exit 3
n=$(sort "$HOME/a/b/moved" | wc -l | tr -d ' ')
date > /dev/null
printf '{"ok":true,"result":{"lines":%s,"in":%s}}\n' "$n" "$line"
`)
	if err := os.WriteFile(filepath.Join(pack, "data.txt"), []byte("b\na\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := request(pack)
	req.Stdin = []byte("{\"x\":1}\n")
	req.Confine = &Confinement{Mode: confine.ModeRequired}
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "{\"ok\":true,\"result\":{\"lines\":3,\"in\":{\"x\":1}}}\n" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if len(res.Stderr) != 0 {
		t.Errorf("stderr %q", res.Stderr)
	}
}

// TestConfinedPython: an interpreter starts cleanly confined (its
// configuration under /etc is readable, nothing is reported on stderr).
func TestConfinedPython(t *testing.T) {
	requireLandlock(t)
	requirePython(t)
	pack := newPack(t, `exec /usr/bin/python3 -c 'import json, os, ssl, tempfile
p = os.path.join(tempfile.gettempdir(), "x")
open(p, "w").write("y")
print(json.dumps({"ok": True, "result": open(p).read()}))'
`)
	req := request(pack)
	req.Confine = &Confinement{Mode: confine.ModeRequired}
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "{\"ok\": true, \"result\": \"y\"}\n" || len(res.Stderr) != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestConfinedWorkDirNoExec: a binary dropped into the work dir does not
// run (the sandbox's /tmp is noexec too); cp keeps its executable mode,
// chmod is refused even there (the filter cannot tell where a file is).
func TestConfinedWorkDirNoExec(t *testing.T) {
	requireLandlock(t)
	pack := newPack(t, `cp /bin/true "$TMPDIR/payload" && [ -x "$TMPDIR/payload" ] || exit 3
chmod 755 "$TMPDIR/payload" 2>/dev/null && echo CHMODDED
"$TMPDIR/payload" && echo EXECUTED
exit 0
`)
	req := request(pack)
	req.Confine = &Confinement{Mode: confine.ModeRequired}
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || strings.Contains(string(res.Stdout), "EXECUTED") || strings.Contains(string(res.Stdout), "CHMODDED") ||
		!strings.Contains(string(res.Stderr), "Permission denied") {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestConfinedTimeout: a confined tool that hangs is killed at the timeout
// like any other.
func TestConfinedTimeout(t *testing.T) {
	requireLandlock(t)
	pack := newPack(t, `echo $$ > "$HOME/pid"; exec sleep 300`)
	req := request(pack)
	req.Timeout = 300 * time.Millisecond
	req.Confine = &Confinement{Mode: confine.ModeRequired}
	// (Run returning at all is the proof: the tool would sleep 300 s.)
	res, err := Run(context.Background(), req)
	if !errors.Is(err, reason.ErrTimeout) || res == nil || !res.TimedOut {
		t.Fatalf("Run: %+v, %v", res, err)
	}
}

// withABI makes Run see a kernel with the given Landlock ABI.
func withABI(t *testing.T, abi int) {
	t.Helper()
	withReadiness(t, func(r *confine.Readiness) { r.LandlockABI = abi })
}

// withReadiness makes Run see this kernel changed by change.
func withReadiness(t *testing.T, change func(*confine.Readiness)) {
	t.Helper()
	saved := readiness
	readiness = func() confine.Readiness { r := confine.Probe(); change(&r); return r }
	t.Cleanup(func() { readiness = saved })
}

// TestConfinementModes covers sandbox.host_confinement on kernels with
// too little Landlock: required refuses before anything runs, best_effort
// runs and says so truthfully.
func TestConfinementModes(t *testing.T) {
	requireLandlock(t)
	marker := filepath.Join(t.TempDir(), "ran")
	pack := newPack(t, `touch "$1"; echo '{"ok":true,"result":1}'`)
	run := func(mode string) (*Result, error) {
		req := request(pack, marker)
		req.Confine = &Confinement{Mode: mode}
		return Run(context.Background(), req)
	}

	for _, abi := range []int{0, 3, confine.MinABI - 1} {
		withABI(t, abi)
		res, err := run(confine.ModeRequired)
		if res != nil || !errors.Is(err, reason.ErrSandboxUnavailable) || !errors.Is(err, confine.ErrUnavailable) {
			t.Fatalf("ABI %d, required: %+v, %v", abi, res, err)
		}
		if !strings.Contains(err.Error(), "host_confinement") {
			t.Errorf("ABI %d: the error does not name the setting: %v", abi, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("ABI %d, required: the tool ran", abi)
		}
	}

	// best_effort without Landlock: runs, seccomp only, and says so. The
	// tool can write outside (no Landlock) - the note must not lie.
	withABI(t, 0)
	res, err := run(confine.ModeBestEffort)
	if err != nil || res.ExitCode != 0 || res.Confinement != "unconfined: landlock unavailable" {
		t.Fatalf("best_effort, no Landlock: %+v, %v", res, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("best_effort without Landlock: the tool did not run as it says: %v", err)
	}
	_ = os.Remove(marker)
	pack2 := escapePack(t)
	got, res := probe(t, pack2, &Confinement{Mode: confine.ModeBestEffort}, "tcp_connect=1", "ptrace=1", "caps")
	expect(t, got, []outcome{{"tcp_connect=1", "EPERM"}, {"ptrace=1", "EPERM"}, {"caps", "no capabilities"}})
	if res.Confinement != "unconfined: landlock unavailable" {
		t.Errorf("note %q", res.Confinement)
	}

	withABI(t, 3)
	res, err = run(confine.ModeBestEffort)
	if err != nil || res.ExitCode != 0 || res.Confinement != "partly confined: landlock ABI 3 < 6" {
		t.Fatalf("best_effort, ABI 3: %+v, %v", res, err)
	}

	withABI(t, confine.LandlockABI())
	for _, mode := range []string{confine.ModeRequired, confine.ModeBestEffort} {
		res, err = run(mode)
		// The marker is outside the work dir: a fully confined tool cannot
		// create it, and still answers.
		if err != nil || res.Confinement != "" || !strings.Contains(string(res.Stdout), `"ok":true`) {
			t.Fatalf("%s on this kernel: %+v, %v", mode, res, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: a confined tool wrote outside its work dir", mode)
		}
	}

	for _, mode := range []string{"", "Required", "off"} {
		if _, err := run(mode); !errors.Is(err, reason.ErrSandboxUnavailable) {
			t.Errorf("mode %q: %v", mode, err)
		}
	}

	req := request(pack, marker)
	res, err = Run(context.Background(), req)
	if err != nil || res.Confinement != "unconfined: not requested" {
		t.Fatalf("unconfined request: %+v, %v", res, err)
	}
}

// TestCheckConfinement: the check callers make before deciding is the one
// Run makes: the same refusal with the same message, the same note, and
// without seccomp no confined run in either mode.
func TestCheckConfinement(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	pack := newPack(t, `touch "$1"; echo '{"ok":true,"result":1}'`)
	run := func(mode string) (*Result, error) {
		req := request(pack, marker)
		req.Confine = &Confinement{Mode: mode}
		return Run(context.Background(), req)
	}
	for _, abi := range []int{0, 3} {
		withABI(t, abi)
		_, cerr := CheckConfinement(confine.ModeRequired)
		res, rerr := run(confine.ModeRequired)
		if !errors.Is(cerr, reason.ErrSandboxUnavailable) || !errors.Is(cerr, confine.ErrUnavailable) || res != nil {
			t.Fatalf("ABI %d required: check %v, run %+v", abi, cerr, res)
		}
		if rerr == nil || cerr.Error() != rerr.Error() {
			t.Fatalf("ABI %d: check and run refuse differently:\n%v\n%v", abi, cerr, rerr)
		}
		a, err := CheckConfinement(confine.ModeBestEffort)
		if err != nil || a.Note == "" {
			t.Fatalf("ABI %d best_effort: %+v %v", abi, a, err)
		}
		if confine.LandlockABI() >= confine.MinABI {
			// (with less, Run applies what the kernel really has)
			res, err := run(confine.ModeBestEffort)
			if err != nil || res.Confinement != a.Note {
				t.Fatalf("ABI %d best_effort: check says %q, run %+v %v", abi, a.Note, res, err)
			}
		}
	}
	_ = os.Remove(marker) // best_effort with ABI 0 ran it unconfined

	withReadiness(t, func(r *confine.Readiness) {
		r.Seccomp = fmt.Errorf("%w: test", confine.ErrSeccompUnavailable)
	})
	for _, mode := range []string{confine.ModeRequired, confine.ModeBestEffort} {
		_, cerr := CheckConfinement(mode)
		res, rerr := run(mode)
		if !errors.Is(cerr, confine.ErrSeccompUnavailable) || !errors.Is(rerr, reason.ErrSandboxUnavailable) || res != nil {
			t.Fatalf("%s without seccomp: check %v, run %+v %v", mode, cerr, res, rerr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s without seccomp: the tool ran", mode)
		}
	}
}

// TestConfinementStaysWithTheTool: many confined runs, concurrent with
// unconfined ones, leave the rest of the process as it was: no thread of
// the test binary ends up filtered, and it can still write anywhere and
// open sockets.
func TestConfinementStaysWithTheTool(t *testing.T) {
	requireLandlock(t)
	pack := newPack(t, `echo '{"ok":true,"result":1}'`)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(confined bool) {
			defer wg.Done()
			req := request(pack)
			if confined {
				req.Confine = &Confinement{Mode: confine.ModeRequired}
			}
			res, err := Run(context.Background(), req)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if err != nil {
				errs <- err
			}
		}(i%2 == 0)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	deadline := time.Now().Add(30 * time.Second) // a safety net
	for {
		filtered := filteredThreads(t)
		if len(filtered) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads still confined after the runs (pid %d): %v", os.Getpid(), filtered)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Spread checks over many threads.
	var wg2 sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f, err := os.CreateTemp("", "agentnode-after-*")
			if err != nil {
				t.Errorf("write after confined runs: %v", err)
				return
			}
			f.Close()
			os.Remove(f.Name())
			ln, err := net.Listen("unix", "@"+filepath.Base(f.Name()))
			if err != nil {
				t.Errorf("socket after confined runs: %v", err)
				return
			}
			ln.Close()
		}()
	}
	wg2.Wait()
}

// filteredThreads lists the threads of this process that have a seccomp
// filter or no_new_privs.
func filteredThreads(t *testing.T) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && ((f[0] == "Seccomp:" && f[1] != "0") || (f[0] == "NoNewPrivs:" && f[1] != "0")) {
				out = append(out, task.Name()+" "+line)
			}
		}
	}
	return out
}

// TestConfinedPythonRuntime: a `runtime: python` run (Request.Python) of
// sdk/python's probe-pack answers through the shim, confined; what the tool
// prints is on stderr; nothing is written into the package (the shim goes
// into the work dir); a bad entrypoint or an Interpreter besides Python is
// refused before anything starts.
func TestConfinedPythonRuntime(t *testing.T) {
	requireLandlock(t)
	requirePython(t)
	pack := t.TempDir()
	if err := os.CopyFS(pack, os.DirFS(filepath.Join("..", "..", "sdk", "python", "testdata", "probe-pack"))); err != nil {
		t.Fatal(err)
	}
	run := func(ep, stdin string) (*Result, error) {
		return Run(context.Background(), &Request{
			PackageDir: pack, Entrypoint: ep, Stdin: []byte(stdin),
			Env:     []string{"PATH=/usr/bin:/bin"},
			Python:  &Python{Interpreter: python.Interpreter},
			Confine: &Confinement{Mode: confine.ModeRequired},
		})
	}
	res, err := run("probe_pack.tool:word_count", `{"tool":"word_count","input":{"text":"one three fives"}}`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ok": true, "result": {"words": 3, "longest": "three", "by_length": {"3": "one", "5": "fives"}, "pair": [1, "two"]}}` + "\n"
	if res.ExitCode != 0 || string(res.Stdout) != want || res.Confinement != "" {
		t.Fatalf("exit %d stdout %q stderr %q confinement %q", res.ExitCode, res.Stdout, res.Stderr, res.Confinement)
	}
	res, err = run("probe_pack.tool:chatty", `{"tool":"chatty","input":{"n":1}}`+"\n")
	if err != nil || string(res.Stdout) != `{"ok": true, "result": {"printed": 1}}`+"\n" ||
		!strings.Contains(string(res.Stderr), "print line 0") || !strings.Contains(string(res.Stderr), "child process stdout") {
		t.Fatalf("chatty: %v stdout %q stderr %q", err, res.Stdout, res.Stderr)
	}
	err = filepath.WalkDir(pack, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (d.Name() == "__pycache__" || d.Name() == python.ShimName) {
			t.Errorf("written into the package: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"--package-entrypoint", "probe_pack/tool.py", "a:b:c", "", "x;y"} {
		if _, err := run(ep, "{}\n"); !errors.Is(err, ErrEntrypoint) || !errors.Is(err, reason.ErrIntegrityDenied) {
			t.Errorf("entrypoint %q: %v", ep, err)
		}
	}
	_, err = Run(context.Background(), &Request{PackageDir: pack, Entrypoint: "probe_pack.tool:run",
		Interpreter: "/bin/sh", Python: &Python{Interpreter: python.Interpreter}})
	if !errors.Is(err, ErrEntrypoint) {
		t.Errorf("python with an Interpreter: %v", err)
	}
}

// TestConfinedWorkspace: a granted workspace is the working directory;
// read-only it is read and not written; read-write it is written; nothing
// in it executes; a symlink in it to a file outside does not reach that
// file; without it granted, it is out of reach like any user file.
func TestConfinedWorkspace(t *testing.T) {
	requireLandlock(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "in.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	pack := newPack(t, `pwd
cat in.csv && echo READ
cat link && echo LEAKED
echo out > out.txt && echo WROTE
cp /bin/true ./payload && ./payload && echo EXECUTED
exit 0
`)
	for _, c := range []struct {
		name string
		ws   *Workspace
		want []string // lines of stdout
	}{
		{"read-only", &Workspace{Path: ws}, []string{ws, "a,b", "READ"}},
		{"read-write", &Workspace{Path: ws, Writable: true}, []string{ws, "a,b", "READ", "WROTE"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(filepath.Join(ws, "out.txt"))
			_ = os.Remove(filepath.Join(ws, "payload"))
			req := request(pack)
			req.Confine = &Confinement{Mode: confine.ModeRequired}
			req.Workspace = c.ws
			res, err := Run(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n"); !slices.Equal(got, c.want) {
				t.Fatalf("stdout %q, want %q (stderr %q)", got, c.want, res.Stderr)
			}
			_, err = os.Stat(filepath.Join(ws, "out.txt"))
			if wrote := err == nil; wrote != c.ws.Writable {
				t.Errorf("out.txt on the host: %v, want %v", wrote, c.ws.Writable)
			}
		})
	}
	// Not granted: the same directory is out of reach.
	req := request(pack)
	req.Confine = &Confinement{Mode: confine.ModeRequired}
	req.Stdin = nil
	pack2 := newPack(t, "cat "+ws+"/in.csv && echo READ; exit 0\n")
	req.PackageDir = pack2
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Stdout), "READ") || !strings.Contains(string(res.Stderr), "Permission denied") {
		t.Fatalf("without a workspace: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// A workspace that is not symlink-free is refused before anything runs.
	link := filepath.Join(outside, "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	req.Workspace = &Workspace{Path: link}
	if _, err := Run(context.Background(), req); !errors.Is(err, reason.ErrWorkspaceInvalid) {
		t.Fatalf("a symlinked workspace: %v, want workspace_invalid", err)
	}
}

// requirePython skips a test without the host's Python (python.Interpreter),
// or fails it in CI (AGENTNODE_REQUIRE_PYTHON=1).
func requirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python.Interpreter); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_PYTHON=1 but no %s: %v", python.Interpreter, err)
		}
		t.Skip("no " + python.Interpreter)
	}
}
