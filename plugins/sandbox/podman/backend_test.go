package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

func TestRunRoundTrip(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "rt")
	var stdout, stderr bytes.Buffer
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{
		Spec:   spec(fx, id, "sh", "-c", `cat; id -u; id -g; echo "$AGENTNODE_TEST $HOME $PATH"; cat /pack/hello.txt; echo err >&2; exit 3`),
		Stdin:  strings.NewReader("hello sandbox\n"),
		Stdout: &stdout,
		Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "hello sandbox\n1000\n1000\n1 /sandbox-home /bin:/usr/bin\nfrom the pack\n"
	if resp.ExitCode != 3 || resp.TimedOut || resp.Killed || !resp.CleanupVerified || stdout.String() != want || stderr.String() != "err\n" {
		t.Fatalf("resp %+v\nstdout %q\nstderr %q", resp, stdout.String(), stderr.String())
	}
	assertGone(t, b, id)
}

// TestArgvAndEnvVerbatim: argv and environment reach the tool byte for
// byte: empty arguments, flags podman knows, JSON, newlines.
func TestArgvAndEnvVerbatim(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "argv")
	s := spec(fx, id, "sh", "-c", `for a in "$@"; do printf '[%s]' "$a"; done; printf '{%s}' "$MULTI" "$EMPTY"`,
		"argv0", "--rm", "", "a b", "-v", "/:/host", `["x"]`, "line1\nline2")
	s.Env = []string{"MULTI=a,b\nc=d", "EMPTY="}
	var stdout bytes.Buffer
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	want := "[--rm][][a b][-v][/:/host][[\"x\"]][line1\nline2]{a,b\nc=d}{}"
	if stdout.String() != want {
		t.Errorf("got  %q\nwant %q", stdout.String(), want)
	}
	assertGone(t, b, id)
}

// TestBackstop: conmon's own --timeout kills the container when the plugin
// is not there to (here: podman run started by hand with the backend's
// arguments and a 1 s backstop).
func TestBackstop(t *testing.T) {
	b, fx := setup(t)
	e, err := b.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t, "backstop")
	s, err := profile.ForRun(spec(fx, id, "sleep", "100"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := randomHex(16)
	cidfile := filepath.Join(e.stateDir, "cid-"+nonce)
	defer os.Remove(cidfile)
	args, err := runArgs(s, runParams{runID: id, nonce: nonce, imageID: strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:"),
		cidfile: cidfile, seccompFile: e.seccompFile, cgroupParent: b.cgroupParent, backstop: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = e.command(args...).Run()
	// conmon records exit code -1 for a container it killed on timeout,
	// which podman run reports as 255 (the tool's own exit would be 0).
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 {
		t.Fatalf("podman run with --timeout 1: %v", err)
	}
	if _, err := e.call(t.Context(), "rm", "--force", "--time", "0", readCID(cidfile)); err != nil {
		t.Fatal(err)
	}
}

// TestShmSize: /dev/shm is the profile's size (podman makes it on the host
// and binds it, so the config shows a bind mount).
func TestShmSize(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "shm")
	var stdout bytes.Buffer
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "grep", " /dev/shm ", "/proc/self/mountinfo"), Stdout: &stdout})
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	line := stdout.String()
	for _, want := range []string{"size=16384k", "nosuid", "nodev", "noexec", " tmpfs "} {
		if !strings.Contains(line, want) {
			t.Errorf("/dev/shm lacks %q: %s", want, line)
		}
	}
	assertGone(t, b, id)
}

// TestRunNilStreams: no stdin is an empty stdin; nil writers discard.
func TestRunNilStreams(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "nil")
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", "cat; echo out; echo err >&2")})
	if err != nil || resp.ExitCode != 0 || !resp.CleanupVerified {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	assertGone(t, b, id)
}

func TestRunTimeout(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "timeout")
	s := spec(fx, id, "sleep", "1000")
	s.Timeout = 500 * time.Millisecond
	start := time.Now()
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !resp.TimedOut || !resp.Killed || resp.ExitCode != 137 || !resp.CleanupVerified {
		t.Fatalf("resp %+v", resp)
	}
	// Killed (the sleep would run 1000 s), and not before the timeout.
	if elapsed < s.Timeout {
		t.Errorf("Run returned after %v, before its %v timeout", elapsed, s.Timeout)
	}
	assertGone(t, b, id)
}

// TestRunTimeoutWhileStarting: a timeout shorter than podman's own start-up
// still kills the tool (the container may not exist yet when it fires).
func TestRunTimeoutWhileStarting(t *testing.T) {
	b, fx := setup(t)
	for i, d := range []time.Duration{time.Millisecond, 30 * time.Millisecond, 80 * time.Millisecond} {
		id := newID(t, "early")
		s := spec(fx, id, "sleep", "1000")
		s.Timeout = d
		resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
		if err != nil {
			t.Fatalf("%d: Run: %v", i, err)
		}
		if !resp.TimedOut || !resp.Killed || !resp.CleanupVerified {
			t.Fatalf("%d: resp %+v", i, resp)
		}
		assertGone(t, b, id)
	}
}

func TestRunCancel(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "cancel")
	ctx, cancel := context.WithCancelCause(t.Context())
	why := errors.New("the host gave up")
	time.AfterFunc(700*time.Millisecond, func() { cancel(why) })
	resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: spec(fx, id, "sleep", "1000")})
	// Killed, and the answer carries the cleanup proof (a host that sent
	// stop receives it).
	if err != nil || !resp.Killed || resp.TimedOut || !resp.CleanupVerified || resp.ExitCode != 137 {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	if !errors.Is(context.Cause(ctx), why) {
		t.Fatal(context.Cause(ctx))
	}
	assertGone(t, b, id)
}

// TestRunOutputFailure: when the caller's writer fails the container is
// killed and Run reports the write error.
func TestRunOutputFailure(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "outfail")
	s := spec(fx, id, "yes")
	s.Timeout = 5 * time.Minute
	start := time.Now()
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: failingWriter{}})
	if err == nil || !strings.Contains(err.Error(), "writing stdout") {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	if el := time.Since(start); el >= s.Timeout {
		t.Errorf("Run took %v: the %v timeout, not the failing writer, ended the flood", el, s.Timeout)
	}
	assertGone(t, b, id)
}

type failingWriter struct{}

var errWriterFull = errors.New("writer full")

func (w failingWriter) Write(p []byte) (int, error) { return 0, errWriterFull }

func TestRunExitCodes(t *testing.T) {
	b, fx := setup(t)
	for _, code := range []string{"0", "1", "124", "125", "126", "127", "128", "255"} {
		id := newID(t, "exit")
		resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", "exit "+code)})
		if err != nil {
			t.Fatalf("exit %s: %v", code, err)
		}
		if want, _ := strconv.Atoi(code); resp.ExitCode != want || resp.Killed || !resp.CleanupVerified {
			t.Errorf("exit %s: resp %+v", code, resp)
		}
		assertGone(t, b, id)
	}
	// A status of 128+N passes through. (The tool is pid 1 of its pid
	// namespace, which a signal from inside cannot kill: a child shell is
	// killed, and its status becomes the tool's.)
	id := newID(t, "sig")
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", `sh -c 'kill -KILL $$'; exit $?`)})
	if err != nil || resp.ExitCode != 137 || !resp.Killed || !resp.CleanupVerified {
		t.Errorf("kill -KILL: %+v, %v", resp, err)
	}
	assertGone(t, b, id)
}

// TestRunStartFailure: a tool that cannot be started is an error (podman's
// 126/127 are not passed off as the tool's exit status), and nothing is
// left behind.
func TestRunStartFailure(t *testing.T) {
	b, fx := setup(t)
	for _, argv0 := range []string{"/no/such/tool", "/pack/hello.txt"} {
		id := newID(t, "nostart")
		var stderr bytes.Buffer
		resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, argv0), Stderr: &stderr})
		if err == nil {
			t.Errorf("%s: Run = %+v, want an error", argv0, resp)
		} else {
			t.Logf("%s: %v", argv0, err)
		}
		assertGone(t, b, id)
	}
}

func TestRunImageMissing(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "noimg")
	s := spec(fx, id, "true")
	// A verified manifest naming a config podman does not have.
	s.ImageStore, s.Image = sandboxtest.FakeImageStore(t, "sha256:"+strings.Repeat("ab", 32))
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err == nil {
		t.Fatalf("Run = %+v, want an error", resp)
	}
	assertGone(t, b, id)

	// A tag or name is never accepted as the image: only a pinned
	// reference, resolved in the store to the ID.
	s = spec(fx, id, "true")
	for _, img := range []string{fx.Img.Tag(), fx.Img.ConfigDigest, "agentnode/sandbox@sha256:" + strings.Repeat("e", 64)} {
		s.Image = img
		if resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err == nil {
			t.Fatalf("Run with %s as the image = %+v", img, resp)
		}
	}
}

// TestRunNameInUse: a container that already has the run's name is not
// ours: the run fails, and that container is not touched.
func TestRunNameInUse(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "inuse")
	if _, err := podmanCLI("create", "--name", namePrefix+id, "--label", runLabel+"="+id, fx.Img.ConfigDigest[len("sha256:"):], "true"); err != nil {
		t.Fatal(err)
	}
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "true")})
	if err == nil {
		t.Fatalf("Run = %+v, want an error", resp)
	}
	if _, err := podmanCLI("container", "exists", namePrefix+id); err != nil {
		t.Fatalf("the foreign container was removed: %v", err)
	}
}

func TestRunRefusesBadRequests(t *testing.T) {
	b, fx := setup(t)
	bad := []func(*sandbox.Spec){
		func(s *sandbox.Spec) { s.RunID = "../escape" },
		func(s *sandbox.Spec) { s.RunID = "" },
		func(s *sandbox.Spec) { s.Image = "" },
		func(s *sandbox.Spec) { s.Image = "busybox" },
		func(s *sandbox.Spec) { s.ImageStore = "" },
		func(s *sandbox.Spec) { s.ImageStore = "images" },
		func(s *sandbox.Spec) { s.Args = nil },
		func(s *sandbox.Spec) { s.PackageDir = "relative" },
		func(s *sandbox.Spec) { s.Env = []string{"PATH=/evil"} },
		func(s *sandbox.Spec) { s.Limits.Pids = -1 },
	}
	for i, mod := range bad {
		s := spec(fx, newID(t, "bad"), "true")
		mod(&s)
		if resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err == nil {
			t.Errorf("%d: Run accepted %+v: %+v", i, s, resp)
		}
	}
	if _, err := b.Run(t.Context(), nil); err == nil {
		t.Error("nil request accepted")
	}
}

// TestContainerFilterRefusesNamespaces checks the filter podman handed
// runc (the container's config.json): unshare, setns and clone3 are not
// allowed by any rule. TestUnshareUserOnlyRefusedByOurProfile observes the
// same from inside, against podman's default profile.
func TestContainerFilterRefusesNamespaces(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "unshare")
	cfg, _, resp, err := configWhileRunning(t, b, spec(fx, id, "sh", "-c", "cat >/dev/null"))
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	var s specs.Spec
	if err := json.Unmarshal(cfg, &s); err != nil {
		t.Fatal(err)
	}
	if s.Linux == nil || s.Linux.Seccomp == nil {
		t.Fatal("no seccomp filter in the container's config")
	}
	for _, r := range s.Linux.Seccomp.Syscalls {
		if slices.Contains(r.Names, "unshare") && r.Action == specs.ActAllow {
			t.Errorf("unshare is allowed by the container's filter: %+v", r)
		}
		if slices.Contains(r.Names, "setns") && r.Action == specs.ActAllow {
			t.Errorf("setns is allowed by the container's filter: %+v", r)
		}
		if slices.Contains(r.Names, "clone3") && r.Action == specs.ActAllow {
			t.Errorf("clone3 is allowed by the container's filter: %+v", r)
		}
	}
}

// configWhileRunning runs s, whose tool must wait for the end of its
// stdin, and returns the OCI config podman generated for its container
// (what it hands runc) and the memory limits of the container's parent
// cgroup (the run's own; "" where unreadable), read while the container
// runs: a run removes its container and cgroups when it ends.
func configWhileRunning(tb testing.TB, b *backend, s sandbox.Spec) ([]byte, runCgroupLimits, *sandbox.RunResponse, error) {
	tb.Helper()
	stdin, hold := io.Pipe()
	type result struct {
		resp *sandbox.RunResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := b.Run(tb.Context(), &sandbox.RunRequest{Spec: s, Stdin: stdin})
		done <- result{resp, err}
	}()
	var cfg []byte
	for deadline := time.Now().Add(30 * time.Second); cfg == nil && time.Now().Before(deadline); {
		select {
		case r := <-done:
			tb.Fatalf("the run ended before its config was read: %+v, %v", r.resp, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		out, _ := podmanCLI("ps", "--all", "--quiet", "--no-trunc", "--filter", "label="+runLabel+"="+s.RunID)
		for _, cid := range strings.Fields(out) {
			cfg = readRuntimeConfig(b, cid)
		}
	}
	var lim runCgroupLimits
	if cfg != nil {
		var c specs.Spec
		if err := json.Unmarshal(cfg, &c); err == nil && c.Linux != nil {
			dir := filepath.Join(b.eng.memMount, filepath.Dir(c.Linux.CgroupsPath))
			lim.dir = dir
			lim.memory = readTrimmed(filepath.Join(dir, "memory.limit_in_bytes"))
			lim.memSwap = readTrimmed(filepath.Join(dir, "memory.memsw.limit_in_bytes"))
		}
	}
	hold.Close() // the tool reads EOF and exits
	r := <-done
	if cfg == nil {
		tb.Fatalf("no config.json for run %s", s.RunID)
	}
	return cfg, lim, r.resp, r.err
}

// runCgroupLimits are the cgroup v1 memory limits of a run's cgroup.
type runCgroupLimits struct{ dir, memory, memSwap string }

func readTrimmed(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// readRuntimeConfig returns the OCI config podman generated for container
// cid, or nil while there is none or it is being written.
func readRuntimeConfig(b *backend, cid string) []byte {
	e := b.eng
	for _, root := range []string{e.runRoot, e.graphRoot} {
		data, err := os.ReadFile(filepath.Join(root, e.graphDriver+"-containers", cid, "userdata", "config.json"))
		if err == nil && json.Valid(data) {
			return data
		}
	}
	return nil
}

// TestPodmanConfigMatchesProfile compares the OCI config podman hands runc
// with profile.ForRun for the same run: what the backend maps, and what it
// leaves to podman's defaults (masked and read-only paths, /proc, /dev,
// /sys), must be the profile or stricter.
func TestPodmanConfigMatchesProfile(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, "config")
	run := spec(fx, id, "/bin/sh", "-c", "cat >/dev/null", "arg")
	run.Limits = sandbox.Limits{MemoryBytes: 96 << 20, Pids: 77, CPUs: 0.25, TmpBytes: 5 << 20}
	want, err := profile.ForRun(run)
	if err != nil {
		t.Fatal(err)
	}
	raw, lim, resp, err := configWhileRunning(t, b, run)
	if err != nil || resp.ExitCode != 0 || !resp.CleanupVerified {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	var got specs.Spec
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	p, wp := got.Process, want.Process

	if !slices.Equal(p.Args, wp.Args) {
		t.Errorf("args %q, want %q", p.Args, wp.Args)
	}
	for _, kv := range wp.Env {
		if !slices.Contains(p.Env, kv) {
			t.Errorf("env lacks %s: %q", kv, p.Env)
		}
	}
	for _, kv := range p.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(wp.Env, func(w string) bool { return strings.HasPrefix(w, k+"=") }) && k != "HOSTNAME" {
			t.Errorf("env has %s beyond the profile's", kv)
		}
	}
	if p.User.UID != 1000 || p.User.GID != 1000 || len(p.User.AdditionalGids) > 0 && !slices.Equal(p.User.AdditionalGids, []uint32{1000}) {
		t.Errorf("user %+v", p.User)
	}
	if !p.NoNewPrivileges || p.Terminal || p.Cwd != wp.Cwd {
		t.Errorf("nnp %v terminal %v cwd %q", p.NoNewPrivileges, p.Terminal, p.Cwd)
	}
	if c := p.Capabilities; c != nil && len(c.Bounding)+len(c.Effective)+len(c.Inheritable)+len(c.Permitted)+len(c.Ambient) > 0 {
		t.Errorf("capabilities %+v", c)
	}
	for _, w := range wp.Rlimits {
		i := slices.IndexFunc(p.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == w.Type })
		if i < 0 || p.Rlimits[i] != w {
			t.Errorf("rlimit %s: got %+v, want %+v", w.Type, p.Rlimits, w)
		}
	}
	if got.Root == nil || !got.Root.Readonly {
		t.Errorf("root %+v", got.Root)
	}
	if got.Hostname != want.Hostname {
		t.Errorf("hostname %q", got.Hostname)
	}
	if got.Hooks != nil && (len(got.Hooks.Prestart)+len(got.Hooks.CreateRuntime)+len(got.Hooks.CreateContainer)+len(got.Hooks.StartContainer)+len(got.Hooks.Poststart)+len(got.Hooks.Poststop) > 0) {
		t.Errorf("OCI hooks: %+v", got.Hooks)
	}

	lx, wl := got.Linux, want.Linux
	for _, n := range wl.Namespaces {
		if !slices.ContainsFunc(lx.Namespaces, func(g specs.LinuxNamespace) bool { return g.Type == n.Type && g.Path == "" }) {
			t.Errorf("namespace %s missing or joined: %+v", n.Type, lx.Namespaces)
		}
	}
	for _, n := range lx.Namespaces {
		if n.Type == specs.UserNamespace {
			t.Error("a user namespace")
		}
	}
	for _, m := range wl.MaskedPaths {
		if !slices.Contains(lx.MaskedPaths, m) {
			t.Errorf("masked path %s missing: %q", m, lx.MaskedPaths)
		}
	}
	for _, m := range wl.ReadonlyPaths {
		if !slices.Contains(lx.ReadonlyPaths, m) && !slices.Contains(lx.MaskedPaths, m) {
			t.Errorf("read-only path %s missing: %q", m, lx.ReadonlyPaths)
		}
	}
	r, wr := lx.Resources, wl.Resources
	if r == nil || r.Pids == nil || r.CPU == nil {
		t.Fatalf("resources %+v", r)
	}
	if *r.Pids.Limit != *wr.Pids.Limit || *r.CPU.Quota != *wr.CPU.Quota || *r.CPU.Period != *wr.CPU.Period {
		t.Errorf("resources: pids %d cpu %d/%d, want %d %d/%d", *r.Pids.Limit,
			*r.CPU.Quota, *r.CPU.Period, *wr.Pids.Limit, *wr.CPU.Quota, *wr.CPU.Period)
	}
	if b.eng.cgroupV2 {
		if r.Memory == nil || r.Memory.Limit == nil || r.Memory.Swap == nil || *r.Memory.Limit != *wr.Memory.Limit || *r.Memory.Swap != *wr.Memory.Swap {
			t.Errorf("resources: memory %+v, want %d/%d", r.Memory, *wr.Memory.Limit, *wr.Memory.Swap)
		}
	} else {
		// cgroup v1: the run's cgroup, the container's parent, carries
		// the memory limits (runcgroup.go), the container none of its own.
		if want := strconv.FormatInt(*wr.Memory.Limit, 10); lim.memory != want || lim.memSwap != strconv.FormatInt(*wr.Memory.Swap, 10) {
			t.Errorf("run cgroup %s: memory %q, memory+swap %q, want %d/%d", lim.dir, lim.memory, lim.memSwap, *wr.Memory.Limit, *wr.Memory.Swap)
		}
		if !strings.HasPrefix(filepath.Base(lim.dir), "run-") || filepath.Dir(lim.dir) != filepath.Join(b.eng.memMount, b.cgroupParent) {
			t.Errorf("the container's parent cgroup %s is not a run cgroup under %s", lim.dir, b.cgroupParent)
		}
		if r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit > 0 && *r.Memory.Limit < math.MaxInt64/2 {
			t.Errorf("the container has a memory limit of its own (%d): it would be hit before the run cgroup's", *r.Memory.Limit)
		}
	}
	if len(r.Devices) == 0 || r.Devices[0].Allow || r.Devices[0].Access != "rwm" {
		t.Errorf("device cgroup does not start with deny-all: %+v", r.Devices)
	}
	if len(lx.Devices) > 0 {
		t.Errorf("extra devices: %+v", lx.Devices)
	}
	if len(lx.Sysctl) > 0 {
		t.Errorf("sysctls: %v", lx.Sysctl)
	}
	if lx.Seccomp == nil || lx.Seccomp.DefaultAction != specs.ActErrno {
		t.Errorf("seccomp default action: %+v", lx.Seccomp)
	}

	// Mounts: every profile mount is there with at least its restrictions;
	// anything else is read-only, or a podman default at a known place.
	for _, wm := range want.Mounts {
		i := slices.IndexFunc(got.Mounts, func(m specs.Mount) bool { return m.Destination == wm.Destination })
		if i < 0 {
			t.Errorf("mount %s missing", wm.Destination)
			continue
		}
		gm := got.Mounts[i]
		if wm.Destination == "/dev/shm" {
			// podman's private IPC namespace: a tmpfs of --shm-size made
			// on the host (in the container's storage) and bound here.
			for _, o := range []string{"nosuid", "nodev", "noexec"} {
				if !slices.Contains(gm.Options, o) {
					t.Errorf("/dev/shm lacks %s: %+v", o, gm)
				}
			}
			continue
		}
		if gm.Type != wm.Type {
			t.Errorf("mount %s: type %s, want %s", wm.Destination, gm.Type, wm.Type)
		}
		for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
			if slices.Contains(wm.Options, o) && !slices.Contains(gm.Options, o) && !(o == "ro" && wm.Destination == "/sys/fs/cgroup") {
				t.Errorf("mount %s lacks %s: %q", wm.Destination, o, gm.Options)
			}
		}
		for _, o := range wm.Options {
			if strings.HasPrefix(o, "size=") && wm.Destination != "/dev" && !slices.Contains(gm.Options, o) &&
				!slices.Contains(gm.Options, "size="+sizeBytes(o)) {
				t.Errorf("mount %s: %s missing from %q", wm.Destination, o, gm.Options)
			}
		}
		if wm.Destination == profile.PackDir && (gm.Source != fx.Pack || slices.Contains(gm.Options, "rbind")) {
			t.Errorf("pack mount %+v", gm)
		}
	}
	podmanExtras := []string{"/dev/pts", "/run/.containerenv", "/etc/hostname", "/etc/resolv.conf", "/etc/hosts"}
	for _, gm := range got.Mounts {
		if slices.ContainsFunc(want.Mounts, func(m specs.Mount) bool { return m.Destination == gm.Destination }) {
			continue
		}
		if !slices.Contains(podmanExtras, gm.Destination) {
			t.Errorf("unexpected mount %+v", gm)
			continue
		}
		if gm.Type == "bind" && !slices.Contains(gm.Options, "ro") {
			t.Errorf("writable bind mount %+v", gm)
		}
	}
	t.Logf("podman's config for the run: %d mounts, masked %q, read-only %q", len(got.Mounts), lx.MaskedPaths, lx.ReadonlyPaths)
}

// sizeBytes turns "size=16m" into the byte count ("16777216").
func sizeBytes(opt string) string {
	v := strings.TrimPrefix(opt, "size=")
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "k"):
		mult, v = 1<<10, strings.TrimSuffix(v, "k")
	case strings.HasSuffix(v, "m"):
		mult, v = 1<<20, strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "g"):
		mult, v = 1<<30, strings.TrimSuffix(v, "g")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return opt
	}
	return strconv.FormatInt(n*mult, 10)
}

func TestAvailability(t *testing.T) {
	b, fx := setup(t)
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Img.Ref})
	if err != nil || !resp.Available {
		t.Fatalf("Availability = %+v, %v", resp, err)
	}
	if !strings.Contains(resp.Detail, strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:")) {
		t.Errorf("detail %q does not name the image ID", resp.Detail)
	}
	for _, ref := range []string{
		"agentnode/sandbox@sha256:" + strings.Repeat("0", 64),
		"agentnode/sandbox@sha256:" + strings.Repeat("ab", 32),
		"", "busybox:latest", "agentnode/sandbox@sha256:abc",
	} {
		resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: ref})
		if err != nil || resp.Available || resp.Reason != sandbox.ReasonImageMissing {
			t.Errorf("Availability(%q) = %+v, %v; want image_missing", ref, resp, err)
		}
	}
}

// TestAvailabilityReasons drives the reasons that do not need a broken
// host through fake binaries and a fake uid.
func TestAvailabilityReasons(t *testing.T) {
	req := &sandbox.AvailabilityRequest{Image: "agentnode/sandbox@sha256:" + strings.Repeat("1", 64)}
	dir := t.TempDir()
	b := newBackend(testLogger())
	b.searchDirs = []string{dir}
	b.stateDir = filepath.Join(t.TempDir(), "state")
	b.geteuid = func() int { return 0 }

	check := func(reason string) {
		t.Helper()
		resp, err := b.Availability(t.Context(), req)
		if err != nil || resp.Available || resp.Reason != reason {
			t.Fatalf("Availability = %+v, %v; want %s", resp, err, reason)
		}
		t.Logf("%s: %s", reason, resp.Detail)
	}
	check(sandbox.ReasonNotInstalled) // no podman

	writeScript(t, filepath.Join(dir, "podman"), "echo 'podman version 4.3.1'")
	b.geteuid = func() int { return 1000 }
	check(sandbox.ReasonNotPermitted) // rootless refused
	b.geteuid = func() int { return 0 }
	check(sandbox.ReasonNotInstalled) // no runc

	writeScript(t, filepath.Join(dir, "runc"), "echo 'runc version 1.1.5'; echo 'libseccomp: 2.5.4'")
	writeScript(t, filepath.Join(dir, "podman"), "echo 'podman version 3.4.4'")
	check(sandbox.ReasonIncompatible) // too old

	writeScript(t, filepath.Join(dir, "podman"), "echo 'podman version 4.3.1'")
	writeScript(t, filepath.Join(dir, "runc"), "echo 'runc version 0.9.0'")
	check(sandbox.ReasonIncompatible) // runc too old

	writeScript(t, filepath.Join(dir, "runc"), "echo 'runc version 1.1.5'")
	check(sandbox.ReasonIncompatible) // runc without seccomp

	writeScript(t, filepath.Join(dir, "runc"), "echo 'runc version 1.1.5'; echo 'libseccomp: 2.5.4'")
	writeScript(t, filepath.Join(dir, "podman"), `case "$*" in *--version*) echo 'podman version 4.3.1';; *info*) echo '{"host":{"security":{"rootless":true}}}';; esac`)
	check(sandbox.ReasonNotPermitted) // podman reports rootless

	store, ref := sandboxtest.FakeImageStore(t, "sha256:"+testImageHex)
	if _, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "x", Image: ref, ImageStore: store, PackageDir: "/x", Args: []string{"true"}}}); err == nil {
		t.Error("Run on an unavailable podman succeeded")
	}
	if _, err := b.Availability(t.Context(), nil); err == nil {
		t.Error("nil request accepted")
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestOrphansReaped: a container whose owner label names a dead plugin
// process is removed; one whose owner is alive is not.
func TestOrphansReaped(t *testing.T) {
	b, fx := setup(t)
	img := strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:")
	dead, live := newID(t, "orphan"), newID(t, "owned")
	self, err := processID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pid, start, _ := strings.Cut(self, ":")
	for id, owner := range map[string]string{dead: pid + ":" + start + "9", live: self} {
		if _, err := podmanCLI("create", "--name", namePrefix+id, "--label", runLabel+"="+id, "--label", ownerLabel+"="+owner,
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", img, "sleep", "100"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.reapOrphans(t.Context())
	if err != nil || n < 1 {
		t.Fatalf("reapOrphans = %d, %v", n, err)
	}
	if _, err := podmanCLI("container", "exists", namePrefix+dead); err == nil {
		t.Error("the orphan is still there")
	}
	if _, err := podmanCLI("container", "exists", namePrefix+live); err != nil {
		t.Errorf("a container of a live owner was removed: %v", err)
	}
}
