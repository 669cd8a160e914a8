package sandboxtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

var insecureInfo = plugin.Info{Name: "insecure", Version: "0.0.0"}

// mustFailOnHost are checks no unconfined host process can pass.
var mustFailOnHost = []string{
	"uid", "cap-eff", "seccomp-mode", "rlimits", "no-new-privs", "sys-mount", "sys-unshare-user", "sys-ptrace",
	"rootfs-readonly", "pack-readonly", "tmp-noexec", "net-only-lo", "net-host-loopback",
	"net-host-abstract-unix", "env-secret-absent", "host-pids-invisible", "hostname-isolated",
	"setuid-no-elevate", "dev-minimal", "pids-limit", "memory-limit",
	// The insecure backend ignores Spec.EgressSocket.
	"egress-proxy-env", "egress-reaches-host", "egress-net-only-lo", "egress-socket-mount",
	"egress-only-new-mount", "egress-pid1-confined",
	// The insecure backend ignores Spec.Workspace: the probe runs in the
	// suite's directory, where the workspace's parent and its exe are
	// reachable and writable.
	"workspace-cwd", "workspace-readonly", "workspace-noexec", "workspace-confined",
	"workspace-writable", "workspace-writable-noexec",
	// The host's process runs in the initial user namespace, as root,
	// which reads every file.
	"userns-mapped", "userns-host-file", "userns-host-ids",
}

// TestInsecureBackendFailsTheSuite runs every check against a backend that
// runs the probe on the host, through the real gRPC plugin path, and
// collects the verdicts: most checks must fail, or the suite proves nothing.
func TestInsecureBackendFailsTheSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the probe on the host (fork bomb, memory and CPU bombs)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the expected verdicts assume the host side runs as root")
	}
	b := Connect(t, insecureInfo, insecureBackend{})
	h, err := newHarness(t, b, Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	var passed []string
	for _, c := range checks {
		o := h.runCheck(context.Background(), c)
		switch {
		case o.skip != "":
			t.Logf("SKIP %-24s %s", c.name, o.skip)
		case o.ok:
			passed = append(passed, c.name)
			t.Logf("PASS %-24s %s", c.name, firstLine(o.detail))
		default:
			failed[c.name] = true
			t.Logf("FAIL %-24s %s", c.name, firstLine(o.detail))
		}
	}
	t.Logf("the insecure backend failed %d of %d checks; passed: %v", len(failed), len(checks), passed)
	// A backend that declares no user namespace gets "not applicable"
	// from the userns checks, run or not.
	h.cfg.NoUserNamespace = "runs on the host"
	for _, c := range usernsChecks {
		if o := h.runCheck(context.Background(), c); !strings.HasPrefix(o.skip, "not applicable: ") {
			t.Errorf("%s with Config.NoUserNamespace: %+v, want not applicable", c.name, o)
		}
	}
	if len(failed) < 25 {
		t.Errorf("the insecure backend failed only %d checks, want at least 25", len(failed))
	}
	userns := hostCanUnshareUser()
	for _, name := range mustFailOnHost {
		if name == "sys-unshare-user" && userns != nil {
			// The control: no process here can create a user namespace
			// (a chroot, user.max_user_namespaces 0), so the check
			// cannot tell a sandbox from none on this machine.
			t.Logf("check sys-unshare-user not required to fail: an unconfined process here cannot create a user namespace either (%v)", userns)
			continue
		}
		if !failed[name] {
			t.Errorf("check %s passed on the host: it cannot tell a sandbox from none", name)
		}
	}
	// cpu-limit: the host probe runs in this process's cpu cgroup. Where
	// the suite can read it and it has no quota of the check's limit (the
	// control, measured here), the check must fail whatever the load;
	// elsewhere it may be inconclusive, but it must never pass.
	if own, err := hostCPUCgroup(os.Getpid()); err == nil && !quotaMatches(own.quota, cpuLimit) {
		if !failed["cpu-limit"] {
			t.Errorf("check cpu-limit did not fail on the host, whose cpu cgroup %s has quota %.3f: it cannot tell a sandbox from none", own.dir, own.quota)
		}
	} else if slices.Contains(passed, "cpu-limit") {
		t.Errorf("check cpu-limit passed on the host (its cgroup: %v): it cannot tell a sandbox from none", err)
	}
	// The run protocol itself works through this backend: these must pass,
	// or a failure above could be the harness's fault.
	for _, name := range []string{"exit-code", "stdio-roundtrip", "stdout-integrity", "tmp-writable", "env-passed"} {
		if failed[name] {
			t.Errorf("check %s failed on the host; the harness is broken", name)
		}
	}
}

// TestLeakingBackendFailsTheLeftoverCheck is the positive control of the
// search for processes left behind: a backend that answers a timeout as
// killed and cleaned up but leaves the process running must fail
// timeout-cleanup, however long the suite waits for leftovers to go. The
// wait is shortened here: what is checked is that a process that does not
// go is found (the probe sleeps 60 s). (Its output-flood run leaves
// nothing: the probe dies of EPIPE once the backend stops reading.)
func TestLeakingBackendFailsTheLeftoverCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the probe on the host")
	}
	b := &leakingBackend{}
	t.Cleanup(b.killAll)
	h, err := newHarness(t, Connect(t, insecureInfo, b), Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.leftoverWait = time.Second
	c, _ := checkByName("timeout-cleanup")
	o := h.runCheck(t.Context(), c)
	if o.ok || o.skip != "" || !strings.Contains(o.detail, "probe processes left behind") {
		t.Errorf("timeout-cleanup against a backend that leaves the probe running: ok %v, skip %q, detail %s", o.ok, o.skip, o.detail)
	}
	t.Logf("timeout-cleanup: %s", firstLine(o.detail))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestRunReportsFailures runs Run itself in a child test process against the
// insecure backend, with everything but two checks skipped: the child must
// fail, naming the check and showing the probe's detail.
func TestRunReportsFailures(t *testing.T) {
	if os.Getenv("SANDBOXTEST_HELPER") == "1" {
		var skip []string
		for _, n := range Checks() {
			if n != "uid" && n != "exit-code" {
				skip = append(skip, n)
			}
		}
		Run(t, Connect(t, insecureInfo, insecureBackend{}), Config{Skip: skip})
		return
	}
	if testing.Short() {
		t.Skip("builds the probe")
	}
	if os.Geteuid() == 1000 {
		t.Skip("the probe's uid check passes for uid 1000 even on the host")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunReportsFailures$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOXTEST_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("Run passed an insecure backend:\n%s", out)
	}
	for _, want := range []string{
		"check uid FAILED", "ruid=", // the failing check and the probe's detail
		"--- PASS: TestRunReportsFailures/exit-code",
		"--- SKIP: TestRunReportsFailures/sys-mount", "SKIPPED BY THE BACKEND",
		"WARNING: the backend declares it cannot pass",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestChecks(t *testing.T) {
	names := Checks()
	if len(names) < 30 {
		t.Errorf("%d checks, want at least 30", len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("check %s twice", n)
		}
		seen[n] = true
		if Describe(n) == "" {
			t.Errorf("check %s has no description", n)
		}
	}
	if Describe("no-such-check") != "" {
		t.Error("Describe of an unknown check is not empty")
	}
}

func TestValidateSkip(t *testing.T) {
	if err := validateSkip([]string{"uid", "cpu-limit"}); err != nil {
		t.Errorf("valid names: %v", err)
	}
	if err := validateSkip(nil); err != nil {
		t.Errorf("no names: %v", err)
	}
	err := validateSkip([]string{"uid", "cpu-limt"})
	if err == nil || !strings.Contains(err.Error(), "cpu-limt") {
		t.Errorf("misspelt name: err = %v", err)
	}
}

func TestParseResult(t *testing.T) {
	out := []byte("noise\n{\"check\":\"other\",\"ok\":true}\n{\"check\":\"uid\",\"ok\":false,\"detail\":\"ruid=0\"}\n")
	r, ok := parseResult(out, "uid")
	if !ok || r.OK || r.Detail != "ruid=0" {
		t.Errorf("parseResult = %+v, %v", r, ok)
	}
	if _, ok := parseResult(out, "gid"); ok {
		t.Error("found a result for a check that printed none")
	}
	if _, ok := parseResult([]byte(`{"check":"uid","ok":tru`), "uid"); ok {
		t.Error("accepted a truncated line")
	}
}

func TestJudge(t *testing.T) {
	okRun := func(stdout string, exit int) runResult {
		b := newCapBuffer(1 << 10)
		b.Write([]byte(stdout))
		r := runResult{stdout: b, stderr: newCapBuffer(10)}
		r.resp = &sandbox.RunResponse{ExitCode: exit}
		return r
	}
	for _, tc := range []struct {
		name     string
		r        runResult
		killedOK bool
		want     bool
	}{
		{"held", okRun(`{"check":"c","ok":true,"detail":"x"}`, 0), false, true},
		{"not held", okRun(`{"check":"c","ok":false,"detail":"x"}`, 0), false, false},
		{"held but exit 1", okRun(`{"check":"c","ok":true,"detail":"x"}`, 1), false, false},
		{"no line", okRun("", 0), false, false},
		{"sigsys kill, syscall check", okRun("", sigsysExit), true, true},
		{"sigsys kill, other check", okRun("", sigsysExit), false, false},
		{"wrong check", okRun(`{"check":"d","ok":true}`, 0), false, false},
	} {
		if got := judge("c", tc.r, tc.killedOK).ok; got != tc.want {
			t.Errorf("%s: ok = %v, want %v", tc.name, got, tc.want)
		}
	}
	r := okRun(`{"check":"c","ok":true}`, 0)
	r.leftovers = []int{42}
	if judge("c", r, false).ok {
		t.Error("a run that left a probe process behind passed")
	}
}

// TestProbeAgrees builds the probe and checks that it knows every check the
// suite sends it and writes the pattern the suite expects.
func TestProbeAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the probe")
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := buildProbe(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(probe, "no-such-check").Output()
	r, ok := parseResult(out, "no-such-check")
	if !ok || r.OK {
		t.Fatalf("unknown check: %s", out)
	}
	_, known, _ := strings.Cut(r.Detail, "known: ")
	probeKnows := map[string]bool{}
	for _, n := range strings.Fields(known) {
		probeKnows[n] = true
	}
	hostSide := map[string]bool{"exit-code": true, "stdio-roundtrip": true, "stdout-integrity": true,
		"cleanup-verified": true, "timeout-cleanup": true, "output-flood": true,
		"egress-exit-code": true, "egress-only-new-mount": true}
	for _, n := range Checks() {
		if !hostSide[n] && !probeKnows[n] {
			t.Errorf("the probe does not know check %s", n)
		}
		delete(probeKnows, n)
	}
	for n := range probeKnows {
		t.Errorf("the probe has check %s the suite never runs", n)
	}

	const n = 100003
	out, err := exec.Command(probe, "pattern", "100003").Output()
	if err != nil {
		t.Fatal(err)
	}
	w := &patternWriter{mismatch: -1}
	w.Write(out)
	if w.n != n || w.mismatch >= 0 {
		t.Errorf("pattern: %d bytes, first mismatch at %d", w.n, w.mismatch)
	}
}

// hostCanUnshareUser runs true(1) in a new user namespace: nil when an
// unconfined process on this machine can create one.
func hostCanUnshareUser() error {
	path, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	return cmd.Run()
}
