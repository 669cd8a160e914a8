package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"
)

// check is one named conformance or escape check.
type check struct {
	name string
	what string // what the sandbox must ensure, for docs and failure messages
	run  func(ctx context.Context, h *harness) outcome
}

// probeCheck is a check the probe decides from inside: run
// "/pack/probe NAME ARGS...", expect ok.
func probeCheck(name, what string, args func(h *harness) ([]string, string)) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		var a []string
		if args != nil {
			var skip string
			if a, skip = args(h); skip != "" {
				return outcome{skip: skip}
			}
		}
		return judge(name, h.exec(ctx, name, runOpts{args: append([]string{name}, a...)}), false)
	}}
}

// syscallCheck is a probeCheck where a SIGSYS kill also counts as refused.
func syscallCheck(name, what string) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		return judge(name, h.exec(ctx, name, runOpts{args: []string{name}}), true)
	}}
}

// abiCheck is a syscallCheck for a foreign system call ABI (sys-int80,
// sys-x32). What the attempt does depends on the host kernel, so the probe
// also gets the host's own answer, measured unconfined by newHarness, to
// judge the sandbox's by (probe/abi.go).
func abiCheck(name, abi, what string) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		return judge(name, h.exec(ctx, name, runOpts{args: []string{name, h.abiHost[abi]}}), true)
	}}
}

// listenerCheck is a probeCheck against a host listener that must also see
// no connection.
func listenerCheck(name, what string, l func(h *harness) (*countingListener, []string, string)) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		cl, args, skip := l(h)
		if skip != "" {
			return outcome{skip: skip}
		}
		before := cl.n.Load()
		o := judge(name, h.exec(ctx, name, runOpts{args: append([]string{name}, args...)}), false)
		if n := cl.n.Load() - before; n > 0 {
			return fail("the host listener %s accepted %d connection(s) during the run; %s", cl.l.Addr(), n, o.detail)
		}
		return o
	}}
}

// checks is the suite, in the order Run runs it: the core checks, then
// those of sealed egress (egress.go), then those of a workspace
// (workspace.go), then those of the user namespace (userns.go), then those
// of gVisor's second kernel (gvisor.go).
var checks = slices.Concat(coreChecks, egressChecks, workspaceChecks, usernsChecks, gvisorChecks)

// coreChecks are the checks of every run, in the order Run runs them: the
// run protocol first (everything else relies on it), the slow and
// destructive ones last.
var coreChecks = []check{
	// --- the run itself ---
	{name: "exit-code", what: "the process's exit status is reported (probe exit 7 → ExitCode 7)", run: checkExitCode},
	{name: "stdio-roundtrip", what: "stdin reaches the process and its stdout and stderr come back intact", run: checkStdio},
	{name: "stdout-integrity", what: "8 MiB of stdout arrive complete and in order", run: checkStdoutIntegrity},
	{name: "cleanup-verified", what: "every run reports CleanupVerified: the backend proved the container, cgroup and mounts gone", run: checkCleanupVerified},

	// --- identity and privileges ---
	probeCheck("uid", "the process runs as uid 1000 (real, effective, saved, filesystem), never 0", nil),
	probeCheck("gid", "the process runs as gid 1000 with no supplementary group 0", nil),
	probeCheck("cap-eff", "the effective capability set is empty", nil),
	probeCheck("cap-prm", "the permitted capability set is empty", nil),
	probeCheck("cap-bnd", "the bounding capability set is empty, so nothing can regain a capability", nil),
	probeCheck("cap-inh", "the inheritable capability set is empty", nil),
	probeCheck("cap-amb", "the ambient capability set is empty", nil),
	probeCheck("no-new-privs", "no_new_privs is set: exec can never raise privileges", nil),
	probeCheck("seccomp-mode", "a seccomp filter is installed (Seccomp: 2)", nil),
	probeCheck("rlimits", "RLIMIT_NOFILE (at most 1024), RLIMIT_NPROC, RLIMIT_CORE (0) and RLIMIT_FSIZE (at most 1 GiB) are set, soft = hard, and the hard limits cannot be raised", nil),

	// --- system calls that must be refused (EPERM/ENOSYS, or a SIGSYS kill) ---
	syscallCheck("sys-mount", "mount(2) is refused"),
	syscallCheck("sys-umount2", "umount2(2) is refused"),
	syscallCheck("sys-unshare-user", "unshare(CLONE_NEWUSER) is refused: no user namespace to regain capabilities in"),
	syscallCheck("sys-unshare-mount", "unshare(CLONE_NEWNS) is refused"),
	syscallCheck("sys-setns", "setns(2) is refused"),
	syscallCheck("sys-ptrace", "ptrace(2) is refused, even on the process's own child"),
	syscallCheck("sys-keyctl", "keyctl(2) is refused: the kernel keyrings are not shared with the host"),
	syscallCheck("sys-bpf", "bpf(2) is refused"),
	syscallCheck("sys-perf-event-open", "perf_event_open(2) is refused"),
	syscallCheck("sys-open-by-handle-at", "open_by_handle_at(2) is refused (the shocker escape)"),
	syscallCheck("sys-kexec-load", "kexec_load(2) and kexec_file_load(2) are refused"),
	syscallCheck("sys-init-module", "init_module(2) and finit_module(2) are refused"),
	syscallCheck("sys-clone-newuser", "clone(2) with CLONE_NEWUSER is refused"),
	syscallCheck("sys-clone3-newuser", "clone3(2) is refused (its flags are out of a filter's reach), so no namespace can be made with it"),
	syscallCheck("sys-mptcp-socket", "socket(AF_INET/AF_INET6, SOCK_STREAM, IPPROTO_MPTCP) is refused"),
	abiCheck("sys-int80", "int80", "the 32-bit x86 system call ABI (int $0x80) does not work: a filter for x86_64 cannot be bypassed through it"),
	abiCheck("sys-x32", "x32", "the x32 system call ABI does not work"),
	syscallCheck("sys-userfaultfd", "userfaultfd(2) is refused"),

	// --- file systems ---
	probeCheck("rootfs-readonly", "the root file system is mounted read-only and nothing can be created in it", nil),
	probeCheck("pack-readonly", "the package is at /pack, mounted read-only", nil),
	probeCheck("proc-sys-readonly", "/proc/sys cannot be written (kernel.hostname, core_pattern, drop_caches)", nil),
	probeCheck("tmp-noexec", "/tmp is noexec: a binary copied there cannot be executed (EACCES)", nil),
	probeCheck("writable-noexec", "no writable directory (/tmp, HOME, /dev/shm, any tmpfs, ...) lets the process execute what it wrote", nil),
	probeCheck("tmp-writable", "/tmp is writable", nil),
	probeCheck("tmp-size-limit", "/tmp is size-limited: it fills up at about Limits.TmpBytes", func(h *harness) ([]string, string) {
		return []string{itoa(h.cfg.Limits.TmpBytes)}, ""
	}),
	probeCheck("proc-kcore-masked", "/proc/kcore cannot be read", nil),
	probeCheck("proc-sysrq-masked", "/proc/sysrq-trigger cannot be written (absent, read-only or masked)", nil),
	probeCheck("sys-firmware-masked", "/sys/firmware is masked", nil),

	// --- network: loopback only ---
	probeCheck("net-only-lo", "the only network interface is lo", nil),
	listenerCheck("net-host-loopback", "a TCP service on the host's 127.0.0.1 cannot be reached", func(h *harness) (*countingListener, []string, string) {
		return h.loopback, []string{"127.0.0.1", h.loopback.port()}, ""
	}),
	listenerCheck("net-host-ip", "a TCP service on the host's own IPv4 address cannot be reached", func(h *harness) (*countingListener, []string, string) {
		if h.hostIPL == nil {
			return nil, nil, "the host has no global IPv4 address"
		}
		return h.hostIPL, []string{h.hostIP, h.hostIPL.port()}, ""
	}),
	listenerCheck("net-host-abstract-unix", "the host's abstract unix sockets (scoped by network namespace) cannot be reached", func(h *harness) (*countingListener, []string, string) {
		return h.abstract, []string{h.abstractID}, ""
	}),
	probeCheck("net-metadata", "the cloud metadata service (169.254.169.254:80) cannot be reached", nil),
	probeCheck("net-dns-resolver", "the host's DNS resolver (first nameserver of /etc/resolv.conf) answers neither UDP nor TCP", func(h *harness) ([]string, string) {
		if h.nameserver == "" {
			return nil, "/etc/resolv.conf names no nameserver"
		}
		return []string{h.nameserver}, ""
	}),
	probeCheck("net-dns-public", "a public DNS server (8.8.8.8) answers neither UDP nor TCP", func(*harness) ([]string, string) {
		return []string{"8.8.8.8"}, ""
	}),
	probeCheck("no-engine-socket", "no Docker, Podman, containerd or CRI-O socket is present and usable", nil),

	// --- the host is out of sight ---
	probeCheck("env-secret-absent", "the host's environment does not leak in (a variable the suite sets in its own process is absent)", func(*harness) ([]string, string) {
		return []string{SecretEnv}, ""
	}),
	probeCheck("env-passed", "Spec.Env reaches the process", func(*harness) ([]string, string) {
		return passedEnv, ""
	}),
	probeCheck("host-pids-invisible", "host processes are invisible: a fresh pid namespace with only a handful of processes", func(h *harness) ([]string, string) {
		return []string{strconv.Itoa(h.suitePid), h.suiteStart, h.initStart}, ""
	}),
	probeCheck("hostname-isolated", "the hostname is not the host's (own UTS namespace)", func(h *harness) ([]string, string) {
		return []string{h.hostname}, ""
	}),
	{name: "setuid-no-elevate", what: "a setuid-root binary in the package does not elevate (/pack/probe-suid still runs as uid 1000)", run: checkSetuid},
	probeCheck("dev-minimal", "/dev holds only null, zero, full, random, urandom, tty (and pts, ptmx, shm, mqueue, fd and std* links): no disks, mem, kmsg", nil),

	// --- resource limits ---
	{name: "pids-limit", what: "a fork bomb stops at Limits.Pids (under gVisor: or fills the sandbox's pids cgroup, whose pids.max is Limits.Pids, and the Sentry ends the run)", run: checkPids},
	{name: "memory-limit", what: "a memory bomb is killed (or refused memory) at Limits.MemoryBytes (64 MiB here)", run: checkMemory},
	{name: "cpu-limit", what: "CPU spinners are held to Limits.CPUs (0.1 here): their cgroup has that CFS quota and it throttles them (or, where the host cannot read the cgroup, they stay within it while an unconfined spinner beside them gets more)", run: checkCPU},

	// --- ending runs ---
	{name: "timeout-cleanup", what: "a run past its Timeout is killed, reported TimedOut with CleanupVerified, and leaves no process behind", run: checkTimeout},
	{name: "output-flood", what: "a 64 MiB stdout flood is ended, cleanly, by the host no longer accepting output (not by the run's timeout)", run: checkFlood},
}

func checkExitCode(ctx context.Context, h *harness) outcome {
	r := h.exec(ctx, "exit-code", runOpts{args: []string{"exit", "7"}})
	switch {
	case r.err != nil || len(r.leftovers)+len(r.traces) > 0:
		return fail("%s", r.describe())
	case r.resp.ExitCode != 7:
		return fail("probe exit 7 gave ExitCode %d: %s", r.resp.ExitCode, r.describe())
	case r.resp.TimedOut || r.resp.Killed:
		return fail("a normal exit reported as timed out or killed: %s", r.describe())
	}
	return pass("exit 7 → ExitCode 7")
}

// stderrMarker is what the probe's cat helper writes to stderr.
const stderrMarker = "sandboxtest-probe-stderr-marker"

func checkStdio(ctx context.Context, h *harness) outcome {
	const n = 1 << 20
	want := make([]byte, n)
	_, _ = (&patternReader{n: n}).Read(want)
	r := h.exec(ctx, "stdio-roundtrip", runOpts{args: []string{"cat"}, stdin: bytes.NewReader(want)})
	if r.err != nil || len(r.leftovers)+len(r.traces) > 0 || r.resp.ExitCode != 0 {
		return fail("%s", r.describe())
	}
	got := r.stdout.bytes()
	if !bytes.Equal(got, want) {
		return fail("sent %d bytes on stdin, got %d different bytes back on stdout", n, r.stdout.total)
	}
	if !bytes.Contains(r.stderr.bytes(), []byte(stderrMarker)) {
		return fail("stderr lacks the probe's marker: %q", r.stderr.tail(200))
	}
	return pass("%d bytes stdin → stdout, stderr marker received", n)
}

func checkStdoutIntegrity(ctx context.Context, h *harness) outcome {
	const n = 8 << 20
	w := &patternWriter{mismatch: -1}
	r := h.exec(ctx, "stdout-integrity", runOpts{args: []string{"pattern", itoa(n)}, stdout: w})
	if r.err != nil || len(r.leftovers)+len(r.traces) > 0 || r.resp.ExitCode != 0 {
		return fail("%s", r.describe())
	}
	if w.n != n || w.mismatch >= 0 {
		return fail("got %d of %d bytes, first wrong byte at %d", w.n, n, w.mismatch)
	}
	return pass("%d bytes intact", n)
}

func checkCleanupVerified(ctx context.Context, h *harness) outcome {
	r := h.exec(ctx, "cleanup-verified", runOpts{args: []string{"noop"}})
	if r.err != nil || len(r.leftovers)+len(r.traces) > 0 || r.resp.ExitCode != 0 {
		return fail("%s", r.describe())
	}
	if !r.resp.CleanupVerified {
		return fail("CleanupVerified is false: the backend did not prove the container, its cgroup and its mounts gone")
	}
	return pass("cleanup verified")
}

func checkSetuid(ctx context.Context, h *harness) outcome {
	if h.suidSkip != "" {
		return outcome{skip: h.suidSkip}
	}
	const name = "setuid-no-elevate"
	return judge(name, h.exec(ctx, name, runOpts{argv0: "/pack/probe-suid", args: []string{name, strconv.Itoa(h.suidOwner)}}), false)
}

// memoryLimit is the limit the memory bomb runs under.
const memoryLimit = 64 << 20

func checkMemory(ctx context.Context, h *harness) outcome {
	const name = "memory-limit"
	limits := h.cfg.Limits
	limits.MemoryBytes = min(limits.MemoryBytes, memoryLimit)
	r := h.exec(ctx, name, runOpts{args: []string{name, itoa(limits.MemoryBytes)}, limits: &limits})
	if r.err != nil || len(r.leftovers)+len(r.traces) > 0 {
		return fail("%s", r.describe())
	}
	if pr, found := parseResult(r.stdout.bytes(), name); found {
		if !pr.OK {
			return fail("probe: %s\n(%s)", pr.Detail, r.describe())
		}
		return pass("%s", pr.Detail)
	}
	switch {
	case r.resp.TimedOut:
		return fail("the memory bomb ran into the timeout instead of the limit: %s", r.describe())
	case r.resp.ExitCode == 128+9 || r.resp.Killed:
		return pass("killed at the %d-byte limit (exit %d)", limits.MemoryBytes, r.resp.ExitCode)
	}
	return fail("the probe printed no result and was not killed: %s", r.describe())
}

const (
	timeoutRun   = time.Second
	timeoutSleep = 60 // seconds the probe sleeps: the run must not end by itself
)

// checkTimeout: no bound on how fast the kill comes (that depends on the
// machine's load); the proofs are events: TimedOut and Killed, no process
// left, and Run returning before the probe's sleep could have ended it.
func checkTimeout(ctx context.Context, h *harness) outcome {
	r := h.exec(ctx, "timeout-cleanup", runOpts{args: []string{"sleep", strconv.Itoa(timeoutSleep)}, timeout: timeoutRun})
	switch {
	case r.err != nil:
		return fail("a timeout must be a response, not an error: %s", r.describe())
	case len(r.leftovers)+len(r.traces) > 0:
		return fail("the run outlived the timeout: %s", r.describe())
	case !r.resp.TimedOut || !r.resp.Killed:
		return fail("TimedOut and Killed must be true after a %v timeout: %s", timeoutRun, r.describe())
	case !r.resp.CleanupVerified:
		return fail("CleanupVerified must be true after a timeout: %s", r.describe())
	case r.elapsed >= timeoutSleep*time.Second:
		return fail("Run returned after %v, when the probe's %d s sleep could have ended by itself: the %v timeout did not end it: %s", r.elapsed.Round(time.Millisecond), timeoutSleep, timeoutRun, r.describe())
	case r.elapsed < timeoutRun:
		return fail("Run returned after %v, before its %v timeout: %s", r.elapsed.Round(time.Millisecond), timeoutRun, r.describe())
	}
	return pass("killed after %v (timeout %v), exit %d, cleanup verified", r.elapsed.Round(time.Millisecond), timeoutRun, r.resp.ExitCode)
}

const (
	floodBytes = 64 << 20
	floodCut   = 1 << 20
)

// checkFlood: a backend that ignored the failing writer would either pass
// the whole flood on (exit 0, not killed) or stop reading and leave the
// probe blocked until the run's timeout; either fails, whatever the
// machine's speed.
func checkFlood(ctx context.Context, h *harness) outcome {
	w := &cutWriter{max: floodCut}
	r := h.exec(ctx, "output-flood", runOpts{args: []string{"flood", itoa(floodBytes)}, stdout: w})
	cutAt, got := w.cut()
	done := time.Now()
	switch {
	case cutAt.IsZero():
		return fail("the host received only %d bytes of a %d-byte flood before the run ended: %s", got, floodBytes, r.describe())
	case r.err == nil && r.resp.TimedOut, errors.Is(r.err, context.DeadlineExceeded):
		return fail("the run's timeout, not the host's refusal of output, ended the flood: %s", r.describe())
	case len(r.leftovers)+len(r.traces) > 0:
		return fail("the run outlived the flood: %s", r.describe())
	case r.err == nil && !r.resp.Killed:
		return fail("the run ignored the failing stdout writer (no error, not killed): %s", r.describe())
	case r.err == nil && !r.resp.CleanupVerified:
		return fail("CleanupVerified must be true: %s", r.describe())
	case r.err != nil:
		return pass("cut at %d bytes; Run returned %v later with: %v", got, done.Sub(cutAt).Round(time.Millisecond), r.err)
	}
	return pass("cut at %d bytes; Run returned %v later, killed, exit %d", got, done.Sub(cutAt).Round(time.Millisecond), r.resp.ExitCode)
}
