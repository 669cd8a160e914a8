package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
)

// DefaultLimits are the limits of every run unless Config.Limits says
// otherwise (field by field). The memory, pids, cpu and tmp checks use their
// own limits where they need a tighter one.
var DefaultLimits = sandbox.Limits{
	MemoryBytes: 512 << 20,
	Pids:        256,
	CPUs:        1,
	TmpBytes:    64 << 20,
}

// DefaultTimeout is Spec.Timeout of every run unless Config.Timeout is set.
const DefaultTimeout = 30 * time.Second

// SecretEnv is the variable the suite plants in its own environment; it
// must not reach the sandbox.
const SecretEnv = "AGENTNODE_SUITE_SECRET"

// passedEnv is the whole of Spec.Env of every run (env-passed checks it
// arrives).
var passedEnv = []string{"FOO=bar"}

// Config describes the image the suite runs and the backend's declared gaps.
type Config struct {
	Image string // Spec.Image and AvailabilityRequest.Image (name@sha256:...)
	// ImageStore is Spec.ImageStore and AvailabilityRequest.ImageStore:
	// the image store (sdk/sandbox/imagestore) holding Image, which the
	// backend resolves to what it runs.
	ImageStore string
	// Limits of every run; zero fields take DefaultLimits.
	Limits sandbox.Limits
	// Timeout is Spec.Timeout of every run but the timeout check's;
	// DefaultTimeout when zero.
	Timeout time.Duration
	// Skip names checks the backend declares it cannot pass. Each is
	// skipped and reported loudly; an unknown name fails the suite.
	Skip []string
	// Probe is the path of a prebuilt probe (go build -trimpath with
	// CGO_ENABLED=0 of ProbePackage). Empty: the suite builds it with the go
	// command, which must then be installed.
	Probe string
	// WithEgress runs every check with Spec.EgressSocket set to the suite's
	// egress socket, proving that sealed egress weakens nothing; the
	// egress-* checks choose for themselves (egress-absent never sets it,
	// the others always do). The image must carry the egress forwarder
	// (profile.EgressForwarderPath) and the socket's mount point.
	WithEgress bool
	// WorkspaceWriteRefused declares that the backend refuses a writable
	// workspace (Spec.Workspace with Writable) because it cannot make one
	// safe (Docker: its bind mounts cannot be noexec): the writable
	// workspace checks then require that refusal (an error, nothing run,
	// nothing written) instead of a run. Reported loudly, like Skip.
	WorkspaceWriteRefused bool
	// WorkspaceRefused declares that the backend refuses every workspace,
	// read-only ones too (libcontainer run by a normal user: the
	// workspace needs an idmapped mount, which only root can make): every
	// workspace check then requires the refusal. Reported loudly.
	WorkspaceRefused bool
	// NoUserNamespace declares, with the reason, that the backend runs
	// sandboxes without a user namespace of their own (the sandbox user is
	// host uid 1000): the userns-* checks then report "not applicable"
	// (skipped, loudly). Empty: they must pass.
	NoUserNamespace string
	// Runtime is Spec.Runtime and AvailabilityRequest.Runtime of every run
	// ("" is native). Under sandbox.RuntimeGVisor the checks that read
	// host-kernel facts expect what gVisor shows, and the gvisor-* checks
	// prove the second kernel; otherwise those report "not applicable".
	Runtime string
}

func (c Config) withDefaults() Config {
	if c.Limits.MemoryBytes == 0 {
		c.Limits.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if c.Limits.Pids == 0 {
		c.Limits.Pids = DefaultLimits.Pids
	}
	if c.Limits.CPUs == 0 {
		c.Limits.CPUs = DefaultLimits.CPUs
	}
	if c.Limits.TmpBytes == 0 {
		c.Limits.TmpBytes = DefaultLimits.TmpBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Checks returns the names of all checks, in the order Run runs them.
func Checks() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// Describe returns what the named check proves, or "" for an unknown name.
func Describe(name string) string {
	if c, ok := checkByName(name); ok {
		return c.what
	}
	return ""
}

func checkByName(name string) (check, bool) {
	for _, c := range checks {
		if c.name == name {
			return c, true
		}
	}
	return check{}, false
}

// validateSkip rejects names that are not checks: a misspelt name would
// skip nothing while looking as if it did.
func validateSkip(skip []string) error {
	var unknown []string
	for _, s := range skip {
		if _, ok := checkByName(s); !ok {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("sandboxtest: Config.Skip names unknown checks %q (known: %s)", unknown, strings.Join(Checks(), " "))
	}
	return nil
}

// Run runs every check against b, one subtest per check, each a separate
// b.Run of the probe. It fails the test when b is unavailable. Run sets an
// environment variable of the test process for its duration: do not call it
// from parallel tests.
func Run(t *testing.T, b sandbox.Backend, cfg Config) {
	t.Helper()
	if err := validateSkip(cfg.Skip); err != nil {
		t.Fatal(err)
	}
	h, err := newHarness(t, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{}
	for _, s := range cfg.Skip {
		skip[s] = true
	}
	if len(cfg.Skip) > 0 {
		msg := fmt.Sprintf("sandboxtest: WARNING: the backend declares it cannot pass %d check(s), NOT verified: %s", len(cfg.Skip), strings.Join(cfg.Skip, ", "))
		fmt.Fprintln(os.Stderr, msg)
		t.Log(msg)
	}
	if cfg.NoUserNamespace != "" {
		msg := "sandboxtest: WARNING: the backend declares no user namespace (Config.NoUserNamespace): the userns-* checks are not applicable: " + cfg.NoUserNamespace
		fmt.Fprintln(os.Stderr, msg)
		t.Log(msg)
	}
	if cfg.WorkspaceRefused {
		msg := "sandboxtest: WARNING: the backend declares it refuses every workspace (Config.WorkspaceRefused): the workspace checks verify the refusal only"
		fmt.Fprintln(os.Stderr, msg)
		t.Log(msg)
	}
	if cfg.WorkspaceWriteRefused {
		msg := "sandboxtest: WARNING: the backend declares it refuses a writable workspace (Config.WorkspaceWriteRefused): the writable workspace checks verify the refusal only"
		fmt.Fprintln(os.Stderr, msg)
		t.Log(msg)
	}
	var failed, skipped []string
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if skip[c.name] {
				skipped = append(skipped, c.name)
				fmt.Fprintf(os.Stderr, "sandboxtest: WARNING: %s SKIPPED by the backend's Config.Skip: not verified that %s\n", c.name, c.what)
				t.Skipf("SKIPPED BY THE BACKEND (Config.Skip): not verified that %s", c.what)
			}
			o := h.runCheck(t.Context(), c)
			switch {
			case o.skip != "":
				skipped = append(skipped, c.name)
				fmt.Fprintf(os.Stderr, "sandboxtest: WARNING: %s cannot run here, not verified: %s\n", c.name, o.skip)
				t.Skipf("%s: cannot run here, not verified: %s", c.name, o.skip)
			case !o.ok:
				failed = append(failed, c.name)
				t.Errorf("check %s FAILED: the sandbox must ensure that %s.\n%s", c.name, c.what, o.detail)
			default:
				t.Logf("%s: %s", c.name, o.detail)
			}
		})
	}
	t.Logf("sandboxtest: %d checks: %d passed, %d failed %v, %d skipped %v",
		len(checks), len(checks)-len(failed)-len(skipped), len(failed), failed, len(skipped), skipped)
}

// outcome is the verdict of one check.
type outcome struct {
	ok     bool
	skip   string // non-empty: the check cannot run in this environment
	detail string
}

func pass(format string, args ...any) outcome {
	return outcome{ok: true, detail: fmt.Sprintf(format, args...)}
}
func fail(format string, args ...any) outcome { return outcome{detail: fmt.Sprintf(format, args...)} }

// harness is what the checks share: the backend, the package directory
// with the probe, and the host-side fixtures the probe is tested against.
type harness struct {
	b   sandbox.Backend
	cfg Config

	pack      string        // the package directory (Spec.PackageDir)
	bins      []os.FileInfo // probe and probe-suid, to find leftover processes
	suidOwner int
	suidSkip  string // why the setuid check cannot run
	control   string // a copy of the probe outside the package, for host-side controls

	loopback   *countingListener // 127.0.0.1:port
	hostIP     string
	hostIPL    *countingListener // hostIP:port
	abstract   *countingListener
	abstractID string
	nameserver string
	hostname   string
	suitePid   int
	suiteStart string
	initStart  string
	abiHost    map[string]string // foreign ABI (int80, x32) → the host kernel's answer, a probe outcome token
	// hostVersion and hostENOSYS are the host kernel's /proc/version and
	// its answers to the ENOSYS candidates (gvisor.go).
	hostVersion, hostENOSYS string

	egress *egressServer // Spec.EgressSocket of egress runs

	ws *workspaceFixture // Spec.Workspace of the workspace runs (workspace.go)

	privateFiles []string // the userns-host-file files, as /pack paths (userns.go)

	leftoverWait time.Duration // leftoverWait; the suite's own tests shorten it

	runs atomic.Int64
}

// env is Spec.Env of a run: passedEnv, and the runtime for the probe.
func (h *harness) env() []string {
	env := append([]string(nil), passedEnv...)
	if h.cfg.Runtime != "" {
		env = append(env, runtimeEnv+"="+h.cfg.Runtime)
	}
	return env
}

// newHarness checks that b is available, builds the package directory and
// starts the host-side fixtures; tb's cleanup undoes it all.
func newHarness(tb testing.TB, b sandbox.Backend, cfg Config) (*harness, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Minute)
	defer cancel()
	av, err := b.Availability(ctx, &sandbox.AvailabilityRequest{Image: cfg.Image, ImageStore: cfg.ImageStore, Runtime: cfg.Runtime})
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: availability: %w", err)
	}
	if !av.Available {
		return nil, fmt.Errorf("sandboxtest: the backend is unavailable: %s: %s", av.Reason, av.Detail)
	}
	h := &harness{b: b, cfg: cfg, suitePid: os.Getpid(), suidOwner: -1, leftoverWait: leftoverWait}

	// The package directory: world-readable, because the container's uid
	// is not ours.
	h.pack = filepath.Join(tb.TempDir(), "pack")
	if err := os.Mkdir(h.pack, 0o755); err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	if err := os.Chmod(h.pack, 0o755); err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	probe := filepath.Join(h.pack, "probe")
	if cfg.Probe != "" {
		err = copyFile(cfg.Probe, probe, 0o755)
	} else {
		err = buildProbe(ctx, probe)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(probe, 0o755); err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	// The control of the foreign-ABI checks: what this host's kernel does
	// with them, without a sandbox.
	h.measureHostKernel(ctx, probe)
	h.abiHost = map[string]string{}
	for _, abi := range []string{"int80", "x32"} {
		h.abiHost[abi] = hostABIOutcome(ctx, probe, abi)
	}
	// The cpu-limit check's host control runs a copy, so that neither the
	// leftover check nor the search for the probe's process mistakes it for
	// the probe.
	h.control = filepath.Join(filepath.Dir(h.pack), "probe-control")
	if err := copyFile(probe, h.control, 0o755); err != nil {
		return nil, err
	}
	if err := h.addSetuidCopy(probe); err != nil {
		return nil, err
	}
	if err := h.addPrivateFiles(); err != nil {
		return nil, err
	}
	if h.ws, err = newWorkspaceFixture(tb, probe); err != nil {
		return nil, err
	}
	for _, name := range []string{"probe", "probe-suid"} {
		if fi, err := os.Stat(filepath.Join(h.pack, name)); err == nil {
			h.bins = append(h.bins, fi)
		}
	}

	// The secret the sandbox must not see.
	prev, had := os.LookupEnv(SecretEnv)
	if err := os.Setenv(SecretEnv, "sandboxtest-secret-"+randomHex(16)); err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	tb.Cleanup(func() {
		if had {
			os.Setenv(SecretEnv, prev)
		} else {
			os.Unsetenv(SecretEnv)
		}
	})

	// Host services the sandbox must not reach.
	if h.loopback, err = listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	tb.Cleanup(h.loopback.close)
	if h.hostIP = hostIPv4(); h.hostIP != "" {
		if h.hostIPL, err = listen("tcp", h.hostIP+":0"); err != nil {
			return nil, err
		}
		tb.Cleanup(h.hostIPL.close)
	}
	h.abstractID = "sandboxtest-" + randomHex(8)
	if h.abstract, err = listen("unix", "@"+h.abstractID); err != nil {
		return nil, err
	}
	tb.Cleanup(h.abstract.close)

	// The host end of sealed egress: a unix socket the sandbox user may
	// connect to, answering like a CONNECT proxy.
	if h.egress, err = newEgressServer(); err != nil {
		return nil, err
	}
	tb.Cleanup(h.egress.close)

	h.nameserver = firstNameserver()
	if h.hostname, err = os.Hostname(); err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	if h.suiteStart, err = procStart(h.suitePid); err != nil {
		return nil, err
	}
	h.initStart, _ = procStart(1) // unreadable: that part is not checked
	return h, nil
}

// hostABIOutcome runs "probe abi-host ABI" on the host, unconfined, and
// returns the outcome token it prints; when that fails, an "unknown:" token
// saying why (the check then accepts no fault as the kernel's).
func hostABIOutcome(ctx context.Context, probe, abi string) string {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, probe, "abi-host", abi)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Sprintf("unknown:probe abi-host %s on the host: %v: %s", abi, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// addSetuidCopy puts probe-suid, a setuid-root copy of the probe, into the
// package directory. Without root it cannot: the setuid check is skipped.
func (h *harness) addSetuidCopy(probe string) error {
	suid := filepath.Join(h.pack, "probe-suid")
	if err := copyFile(probe, suid, 0o755); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		h.suidSkip = "creating a setuid-root binary needs root"
		return nil
	}
	if err := os.Chown(suid, 0, 0); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	h.suidOwner = 0
	return nil
}

// runCheck runs one check and returns its verdict; it never fails a test
// itself, so a test can collect verdicts.
func (h *harness) runCheck(ctx context.Context, c check) outcome {
	return c.run(ctx, h)
}

// runOpts varies a probe run.
type runOpts struct {
	argv0   string // default /pack/probe
	args    []string
	limits  *sandbox.Limits
	timeout time.Duration // Spec.Timeout; default cfg.Timeout
	stdin   io.Reader
	stdout  io.Writer // default: a capBuffer
	egress  egressMode
	// workspace is Spec.Workspace (nil: none).
	workspace *sandbox.Workspace
}

// egressMode says whether a run sets Spec.EgressSocket.
type egressMode int

const (
	egressDefault egressMode = iota // as Config.WithEgress says
	egressOn
	egressOff
)

// runResult is what one run produced.
type runResult struct {
	resp      *sandbox.RunResponse
	err       error
	stdout    *capBuffer // nil when runOpts.stdout was set
	stderr    *capBuffer
	elapsed   time.Duration
	leftovers []int    // probe processes still alive after Run returned
	traces    []string // host mounts and cgroups of the run still there
}

// describe summarises a run for failure messages.
func (r runResult) describe() string {
	var b strings.Builder
	if r.err != nil {
		fmt.Fprintf(&b, "Run error: %v", r.err)
	} else {
		fmt.Fprintf(&b, "exit %d, timed out %v, killed %v, cleanup verified %v", r.resp.ExitCode, r.resp.TimedOut, r.resp.Killed, r.resp.CleanupVerified)
	}
	fmt.Fprintf(&b, ", after %v", r.elapsed.Round(time.Millisecond))
	if len(r.leftovers) > 0 {
		fmt.Fprintf(&b, "; probe processes left behind: %v", r.leftovers)
	}
	if len(r.traces) > 0 {
		fmt.Fprintf(&b, "; left behind on the host: %s", strings.Join(r.traces, "; "))
	}
	if r.stdout != nil {
		if s := r.stdout.tail(600); s != "" {
			fmt.Fprintf(&b, "\nstdout: %s", s)
		}
	}
	if s := r.stderr.tail(1500); s != "" {
		fmt.Fprintf(&b, "\nstderr: %s", s)
	}
	return b.String()
}

// leftoverWait is how long the suite waits for a probe process, a host
// mount or a cgroup of the run to go after Run returned: Run must return
// only after the process ended, but a pid namespace's last members take a
// moment to be reaped, and a plugin whose host cancelled the run
// (sandbox.Client returns at once) is still cleaning up. It is a safety net
// for what never goes, not a bound on how fast a loaded machine reaps.
const leftoverWait = 30 * time.Second

// exec runs the probe once.
func (h *harness) exec(ctx context.Context, name string, o runOpts) runResult {
	limits := h.cfg.Limits
	if o.limits != nil {
		limits = *o.limits
	}
	timeout := h.cfg.Timeout
	if o.timeout != 0 {
		timeout = o.timeout
	}
	argv0 := o.argv0
	if argv0 == "" {
		argv0 = "/pack/probe"
	}
	res := runResult{stderr: newCapBuffer(64 << 10)}
	stdout := o.stdout
	if stdout == nil {
		res.stdout = newCapBuffer(1 << 20)
		stdout = res.stdout
	}
	runID := fmt.Sprintf("sandboxtest-%s-%d-%d", name, os.Getpid(), h.runs.Add(1))
	sock := ""
	if o.egress == egressOn || (o.egress == egressDefault && h.cfg.WithEgress) {
		sock = h.egress.path
	}
	// The unpacked rootfs of Image, which a backend that runs a directory
	// mounts ("" when there is none).
	rootfs, _ := imagestore.RootfsDir(h.cfg.ImageStore, h.cfg.Image)
	mountsBefore := hostMounts(h.pack, rootfs, runID, h.egress.dir, h.ws.dir)
	req := &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID:        runID,
			Image:        h.cfg.Image,
			PackageDir:   h.pack,
			ImageStore:   h.cfg.ImageStore,
			Args:         append([]string{argv0}, o.args...),
			Env:          h.env(),
			Limits:       limits,
			Timeout:      timeout,
			EgressSocket: sock,
			Workspace:    o.workspace,
			Runtime:      h.cfg.Runtime,
		},
		Stdin:  o.stdin,
		Stdout: stdout,
		Stderr: res.stderr,
	}
	// The backend must enforce Timeout; this bound only keeps a broken
	// backend from hanging the test.
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	start := time.Now()
	res.resp, res.err = h.b.Run(ctx, req)
	res.elapsed = time.Since(start)
	if res.err == nil && res.resp == nil {
		res.err = fmt.Errorf("sandboxtest: Run returned neither a response nor an error")
	}
	for deadline := time.Now().Add(h.leftoverWait); ; {
		res.leftovers = probeProcesses(h.bins)
		res.traces = nil
		for m := range hostMounts(h.pack, rootfs, runID, h.egress.dir, h.ws.dir) {
			if !mountsBefore[m] {
				res.traces = append(res.traces, "mount "+m)
			}
		}
		for _, cg := range cgroupsNamed(runID) {
			res.traces = append(res.traces, "cgroup "+cg)
		}
		if len(res.leftovers)+len(res.traces) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return res
}

// probeResult is the JSON line the probe prints for a check.
type probeResult struct {
	Check  string             `json:"check"`
	OK     bool               `json:"ok"`
	Detail string             `json:"detail"`
	Values map[string]float64 `json:"values"` // measurements (cpu-limit)
}

// parseResult finds the probe's result line for check in stdout.
func parseResult(stdout []byte, check string) (probeResult, bool) {
	lines := bytes.Split(stdout, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		var r probeResult
		if json.Unmarshal(l, &r) == nil && r.Check == check {
			return r, true
		}
	}
	return probeResult{}, false
}

// sigsysExit is the exit status of a process killed by SIGSYS: a seccomp
// filter's kill action.
const sigsysExit = 128 + 31

// judge turns a probe run into a verdict. killedOK lets a death by SIGSYS
// count as a refusal (system call checks).
func judge(name string, r runResult, killedOK bool) outcome {
	if r.err != nil {
		return fail("%s", r.describe())
	}
	if len(r.leftovers)+len(r.traces) > 0 {
		return fail("the run left things behind: %s", r.describe())
	}
	pr, found := parseResult(r.stdout.bytes(), name)
	switch {
	case !found && killedOK && r.resp.ExitCode == sigsysExit:
		return pass("the probe was killed by SIGSYS (seccomp kill action)")
	case !found:
		return fail("the probe printed no result: %s", r.describe())
	case !pr.OK:
		return fail("probe: %s\n(%s)", pr.Detail, r.describe())
	case r.resp.ExitCode != 0 || r.resp.TimedOut:
		return fail("probe: %s, but the run did not end cleanly: %s", pr.Detail, r.describe())
	}
	return pass("%s", pr.Detail)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
