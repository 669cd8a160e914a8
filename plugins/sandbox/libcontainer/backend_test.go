package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// run runs s through c and fails the test on a transport error.
func run(t *testing.T, c sandbox.Backend, s sandbox.Spec, stdin []byte) (*sandbox.RunResponse, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	req := &sandbox.RunRequest{Spec: s, Stdout: &stdout, Stderr: &stderr}
	if stdin != nil {
		req.Stdin = bytes.NewReader(stdin)
	}
	resp, err := c.Run(t.Context(), req)
	if err != nil {
		t.Fatalf("Run %v: %v (stderr %q)", s.Args, err, stderr.String())
	}
	return resp, stdout.String(), stderr.String()
}

func TestAvailability(t *testing.T) {
	b, fx := setup(t)
	ctx := t.Context()
	// A store whose rootfs of the image is a file.
	fileStore := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fileStore, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fileStore, "rootfs", strings.Repeat("1", 64)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, image, store, reason string
	}{
		{"ok", fx.Image, fx.Store, ""},
		{"no store", fx.Image, "", sandbox.ReasonImageMissing},
		{"image not unpacked", "x@sha256:" + strings.Repeat("2", 64), fx.Store, sandbox.ReasonImageMissing},
		{"relative store", fx.Image, "images", sandbox.ReasonImageMissing},
		{"image by tag", "x:latest", fx.Store, sandbox.ReasonImageMissing},
		{"rootfs is a file", fx.Image, fileStore, sandbox.ReasonImageMissing},
	}
	for _, tc := range cases {
		resp, err := b.Availability(ctx, &sandbox.AvailabilityRequest{Image: tc.image, ImageStore: tc.store})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.Available != (tc.reason == "") || resp.Reason != tc.reason {
			t.Errorf("%s: got %+v, want reason %q", tc.name, resp, tc.reason)
		}
	}
	if p := seccompProblem(); p != "" {
		t.Errorf("seccompProblem on this host: %s", p)
	}
	if p := cgroupProblem(); p != "" {
		t.Errorf("cgroupProblem on this host: %s", p)
	}
}

func TestAvailabilityNotRoot(t *testing.T) {
	b := newBackend(nil)
	b.geteuid = func() int { return 1000 }
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{ImageStore: "/"})
	if err != nil || resp.Available || resp.Reason != sandbox.ReasonNotPermitted {
		t.Fatalf("got %+v, %v; want not_permitted", resp, err)
	}
}

func TestRunIDValidation(t *testing.T) {
	for _, id := range []string{"", "A", "a/b", "../x", "a_b", "a.b", "ü", strings.Repeat("a", maxRunIDLen+1)} {
		if err := validateRunID(id); err == nil {
			t.Errorf("validateRunID(%q) accepted", id)
		}
	}
	for _, id := range []string{"a", "run-1", "0-0-0", strings.Repeat("a", maxRunIDLen)} {
		if err := validateRunID(id); err != nil {
			t.Errorf("validateRunID(%q): %v", id, err)
		}
	}
	// Run refuses before touching anything.
	_, err := newBackend(nil).Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "../../etc", ImageStore: "/"}})
	if err == nil {
		t.Fatal("Run accepted an invalid run id")
	}
}

func TestConvertRlimits(t *testing.T) {
	got, err := convertRlimits([]specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 512},
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Type != unix.RLIMIT_NOFILE || got[0].Hard != 1024 || got[0].Soft != 512 || got[1].Type != unix.RLIMIT_CORE {
		t.Errorf("rlimits not converted: %+v", got)
	}
	if _, err := convertRlimits([]specs.POSIXRlimit{{Type: "RLIMIT_BOGUS"}}); err == nil {
		t.Error("unknown rlimit accepted")
	}
}

// TestEchoGRPC: stdin → stdout round trip through the real go-plugin gRPC
// path (in memory).
func TestEchoGRPC(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)
	id := newID(t, b, "echo")
	resp, out, errOut := run(t, c, spec(fx, id, "cat"), []byte("hello, sandbox\n"))
	if out != "hello, sandbox\n" || resp.ExitCode != 0 {
		t.Fatalf("got exit %d stdout %q stderr %q", resp.ExitCode, out, errOut)
	}
	if !resp.CleanupVerified || resp.Killed || resp.TimedOut {
		t.Fatalf("response %+v", resp)
	}
	assertNoLeftovers(t, b, fx, id)
}

func TestUserAndPack(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "id")
	resp, out, errOut := run(t, b, spec(fx, id, "sh", "-c", "id -u; id -g; cat /pack/hello.txt; echo $AGENTNODE_TEST"), nil)
	if resp.ExitCode != 0 || out != "1000\n1000\nfrom the pack\n1\n" {
		t.Fatalf("exit %d stdout %q stderr %q", resp.ExitCode, out, errOut)
	}
	assertNoLeftovers(t, b, fx, id)
}

func TestExitCode(t *testing.T) {
	b, fx := setup(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"false", 1},
		{"exit 255", 255},
		{"echo oops >&2; exit 3", 3},
	} {
		id := newID(t, b, "exit")
		resp, _, errOut := run(t, b, spec(fx, id, "sh", "-c", tc.script), nil)
		if resp.ExitCode != tc.want || resp.Killed || !resp.CleanupVerified {
			t.Errorf("%q: %+v, want exit %d", tc.script, resp, tc.want)
		}
		if tc.want == 3 && errOut != "oops\n" {
			t.Errorf("stderr %q", errOut)
		}
	}
	// A tool that does not exist: an error or a failing exit, never success.
	id := newID(t, b, "exit")
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "/bin/does-not-exist")})
	if err == nil && resp.ExitCode == 0 {
		t.Errorf("missing binary reported success: %+v", resp)
	}
	assertNoLeftovers(t, b, fx, id)
}

func TestTimeoutKills(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "timeout")
	s := spec(fx, id, "sleep", "1000")
	s.Timeout = 500 * time.Millisecond
	start := time.Now()
	resp, _, _ := run(t, b, s, nil)
	took := time.Since(start)
	if !resp.TimedOut || !resp.Killed || resp.ExitCode != 128+int(unix.SIGKILL) {
		t.Fatalf("response %+v", resp)
	}
	if !resp.CleanupVerified {
		t.Fatal("cleanup not verified")
	}
	// Killed (the sleep would run 1000 s), and not before the timeout.
	if took < s.Timeout {
		t.Fatalf("killed after %v, before the %v timeout", took, s.Timeout)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestTimeoutKillsChildren: the whole container dies, not just its init,
// and the tool's children cannot keep stdout open past the kill.
func TestTimeoutKillsChildren(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "timeout")
	s := spec(fx, id, "sh", "-c", "sleep 1000 & sleep 1000 & echo started; wait")
	s.Timeout = 500 * time.Millisecond
	resp, out, _ := run(t, b, s, nil)
	if !resp.TimedOut || !resp.CleanupVerified || out != "started\n" {
		t.Fatalf("response %+v stdout %q", resp, out)
	}
	assertNoLeftovers(t, b, fx, id)
}

func TestContextCancel(t *testing.T) {
	b, fx := setup(t)
	for _, path := range []string{"direct", "grpc"} {
		t.Run(path, func(t *testing.T) {
			var c sandbox.Backend = b
			if path == "grpc" {
				c = sandboxtest.Connect(t, info(), b)
			}
			id := newID(t, b, "cancel")
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(500*time.Millisecond, cancel)
			resp, err := c.Run(ctx, &sandbox.RunRequest{Spec: spec(fx, id, "sleep", "1000")})
			if path == "grpc" {
				// The host side returns the caller's cancellation.
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
			} else if err != nil || resp == nil || !resp.Killed || !resp.CleanupVerified {
				// The backend answers a cancelled run: killed, cleanup proven.
				t.Fatalf("resp = %+v, err = %v; want a killed, verified run", resp, err)
			}
			// (Returning at all is the proof the cancel ended the run: the
			// sleep would run 1000 s.)
			// Over gRPC the host returns as soon as it cancels; the plugin
			// is still cleaning up. Wait for that (a safety net), then check.
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && len(cgroupDirsOf(b, id)) > 0 {
				time.Sleep(20 * time.Millisecond)
			}
			waitStateGone(t, b, id)
			assertNoLeftovers(t, b, fx, id)
		})
	}
}

func waitStateGone(t *testing.T, b *backend, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a safety net
	for time.Now().Before(deadline) {
		if _, err := os.Lstat(filepath.Join(b.stateRoot, id)); os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "rofs")
	resp, out, errOut := run(t, b, spec(fx, id, "sh", "-c", "echo pwned > /pwned && echo wrote; echo x > /pack/pwned && echo wrote-pack; touch /tmp/ok && echo tmp-ok"), nil)
	if strings.Contains(out, "wrote") {
		t.Fatalf("wrote to a read-only path: stdout %q", out)
	}
	if !strings.Contains(out, "tmp-ok") {
		t.Errorf("/tmp not writable: stdout %q stderr %q", out, errOut)
	}
	if !strings.Contains(strings.ToLower(errOut), "read-only") {
		t.Errorf("stderr %q does not mention a read-only file system", errOut)
	}
	for _, p := range []string{filepath.Join(fx.Rootfs, "pwned"), filepath.Join(fx.Pack, "pwned")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if !resp.CleanupVerified {
		t.Error("cleanup not verified")
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestLargeOutput: 4 MiB in and out through the gRPC path, and 4 MiB the
// tool produces itself.
func TestLargeOutput(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)
	in := make([]byte, 4<<20)
	_, _ = rand.Read(in)
	id := newID(t, b, "large")
	var stdout bytes.Buffer
	resp, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "cat"), Stdin: bytes.NewReader(in), Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 0 || !bytes.Equal(stdout.Bytes(), in) {
		t.Fatalf("exit %d, got %d bytes back, equal=%v", resp.ExitCode, stdout.Len(), bytes.Equal(stdout.Bytes(), in))
	}
	assertNoLeftovers(t, b, fx, id)

	id = newID(t, b, "large")
	stdout.Reset()
	resp, err = c.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", "yes | head -c 4194304"), Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 0 || stdout.Len() != 4<<20 || !bytes.Equal(stdout.Bytes()[:4], []byte("y\ny\n")) {
		t.Fatalf("exit %d, %d bytes", resp.ExitCode, stdout.Len())
	}
	assertNoLeftovers(t, b, fx, id)

	// Nil Stdout: the output is discarded, the run still ends normally.
	id = newID(t, b, "large")
	resp, err = c.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", "yes | head -c 4194304")})
	if err != nil || resp.ExitCode != 0 || !resp.CleanupVerified {
		t.Fatalf("discarded output: %+v, %v", resp, err)
	}
}

// TestStdinNotRead: a tool that ignores a large stdin still ends cleanly.
func TestStdinNotRead(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "stdin")
	resp, out, _ := run(t, b, spec(fx, id, "echo", "done"), bytes.Repeat([]byte("x"), 1<<20))
	if resp.ExitCode != 0 || out != "done\n" {
		t.Fatalf("%+v %q", resp, out)
	}
}

func TestSequentialNoLeftovers(t *testing.T) {
	b, fx := setup(t)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = newID(t, b, "seq")
		resp, out, _ := run(t, b, spec(fx, ids[i], "echo", "ok"), nil)
		if resp.ExitCode != 0 || out != "ok\n" || !resp.CleanupVerified {
			t.Fatalf("run %d: %+v %q", i, resp, out)
		}
	}
	for _, id := range ids {
		assertNoLeftovers(t, b, fx, id)
	}
	// Nothing of ours under the state root or the cgroup parent at all.
	entries, _ := os.ReadDir(b.stateRoot)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "seq-") {
			t.Errorf("state root still has %s", e.Name())
		}
	}
	parent := strings.TrimPrefix(b.cgroupParent, "/")
	for _, pat := range []string{"/sys/fs/cgroup/*/" + parent + "/seq-*", "/sys/fs/cgroup/" + parent + "/seq-*"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			t.Errorf("cgroups left: %v", m)
		}
	}
}

// TestDuplicateRunID: a run id in use is refused and the running
// container is not touched.
func TestDuplicateRunID(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "dup")
	s := spec(fx, id, "sleep", "2")
	s.Timeout = 10 * time.Second
	done := make(chan *sandbox.RunResponse, 1)
	go func() {
		resp, err := b.Run(context.Background(), &sandbox.RunRequest{Spec: s})
		if err != nil {
			t.Errorf("first run: %v", err)
		}
		done <- resp
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(b.stateRoot, id, "state.json")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err == nil {
		t.Fatal("second run with the same id accepted")
	}
	resp := <-done
	if resp == nil || resp.ExitCode != 0 || !resp.CleanupVerified {
		t.Fatalf("first run disturbed: %+v", resp)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestWiring checks, from inside, what this backend itself wires rather
// than the profile's content (the conformance suite owns that): the
// process's user, an empty capability set in every set (a nil set would
// leave the bounding set full), no_new_privs, a seccomp filter, rlimits
// within the host's hard limits, and cgroup limits applied.
func TestWiring(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "wiring")
	resp, out, errOut := run(t, b, spec(fx, id, "sh", "-c", "cat /proc/self/status; echo nofile=$(ulimit -n)"), nil)
	if resp.ExitCode != 0 {
		t.Fatalf("exit %d stderr %q", resp.ExitCode, errOut)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
		if v, ok := strings.CutPrefix(line, "nofile="); ok {
			fields["nofile"] = v
		}
	}
	want := map[string]string{
		"Uid": "1000 1000 1000 1000", "Gid": "1000 1000 1000 1000",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s = %q, want %q", k, fields[k], v)
		}
	}
	var host unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &host); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if _, err := fmt.Sscan(fields["nofile"], &n); err != nil || n == 0 || n > host.Max {
		t.Errorf("nofile = %q, host hard limit %d", fields["nofile"], host.Max)
	}
}

// TestCgroupLimitsApplied: while a run is alive its cgroup exists at the
// absolute path in every hierarchy, with the memory and pids limits set.
func TestCgroupLimitsApplied(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "cg")
	// The tool says it runs (libcontainer applies the limits before it
	// starts the tool); the test reads the limits then and cancels the run.
	s := spec(fx, id, "sh", "-c", "echo up; exec sleep 1000")
	s.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 32}
	s.Timeout = 5 * time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := &firstWrite{ch: make(chan struct{})}
	done := make(chan *sandbox.RunResponse, 1)
	go func() {
		resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: s, Stdout: up})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- resp
	}()
	select {
	case <-up.ch:
	case resp := <-done:
		t.Fatalf("the run ended before the tool ran: %+v", resp)
	case <-time.After(time.Minute): // a safety net
		t.Fatal("the tool never started")
	}
	dirs := cgroupDirsOf(b, id)
	if len(dirs) < 5 {
		t.Errorf("cgroup dirs while running: %v", dirs)
	}
	read := func(p string) string {
		data, _ := os.ReadFile(p)
		return strings.TrimSpace(string(data))
	}
	if !cgroups2Unified() {
		if got := read("/sys/fs/cgroup/memory" + b.cgroupParent + "/" + id + "/memory.limit_in_bytes"); got != "67108864" {
			t.Errorf("memory limit %q", got)
		}
		if got := read("/sys/fs/cgroup/pids" + b.cgroupParent + "/" + id + "/pids.max"); got != "32" {
			t.Errorf("pids limit %q", got)
		}
	}
	cancel()
	resp := <-done
	if resp == nil || !resp.Killed || !resp.CleanupVerified {
		t.Fatalf("resp %+v", resp)
	}
	assertNoLeftovers(t, b, fx, id)
}

// firstWrite closes ch at the first write to it.
type firstWrite struct {
	once sync.Once
	ch   chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

// failingWriter fails once more than limit bytes were written, as the
// host's bounded output writer does.
type failingWriter struct {
	n, limit int
}

var errTooMuch = errors.New("output bound exceeded")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		return 0, errTooMuch
	}
	w.n += len(p)
	return len(p), nil
}

// TestOutputFailureKills: when the caller's stdout fails (a flood cut at
// the bound), the run is killed at once, cleaned up, and the error returned.
func TestOutputFailureKills(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "flood")
	s := spec(fx, id, "yes")
	s.Timeout = 30 * time.Second
	start := time.Now()
	_, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &failingWriter{limit: 1 << 20}})
	if !errors.Is(err, errTooMuch) {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if took := time.Since(start); took >= s.Timeout {
		t.Fatalf("took %v: the flood was not killed, the %v timeout ended it", took, s.Timeout)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestConcurrentRuns: go-plugin serves calls concurrently.
func TestConcurrentRuns(t *testing.T) {
	b, fx := setup(t)
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newID(t, b, "par")
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var out bytes.Buffer
			want := fmt.Sprintf("run %d\n", i)
			resp, err := b.Run(context.Background(), &sandbox.RunRequest{
				Spec: spec(fx, ids[i], "cat"), Stdin: strings.NewReader(want), Stdout: &out,
			})
			switch {
			case err != nil:
				errs <- err
			case resp.ExitCode != 0 || !resp.CleanupVerified || out.String() != want:
				errs <- fmt.Errorf("run %d: %+v %q", i, resp, out.String())
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, id := range ids {
		assertNoLeftovers(t, b, fx, id)
	}
}

// TestReapOrphans: a container whose owning plugin process died (here: a
// label naming a process that does not exist) is killed and destroyed by
// the next plugin process; a live owner's container is left alone.
func TestReapOrphans(t *testing.T) {
	b, fx := setup(t)
	start := func(id, owner string) *libcontainer.Process {
		t.Helper()
		config, proc, err := b.configure(spec(fx, id, "sleep", "1000"))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range config.Labels {
			if strings.HasPrefix(l, ownerLabel+"=") {
				config.Labels[i] = ownerLabel + "=" + owner
			}
		}
		if err := b.ensureStateRoot(); err != nil {
			t.Fatal(err)
		}
		c, err := libcontainer.Create(b.stateRoot, id, config)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Run(proc); err != nil {
			t.Fatal(err)
		}
		return proc
	}
	orphan, live := newID(t, b, "orphan"), newID(t, b, "live")
	orphanProc := start(orphan, "2147483647:1")
	liveProc := start(live, b.owner)
	waited := make(chan error, 1)
	go func() { _, err := orphanProc.Wait(); waited <- err }()

	n, err := b.reapOrphans()
	if err != nil || n < 1 {
		t.Fatalf("reapOrphans = %d, %v", n, err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan's process still runs")
	}
	assertNoLeftovers(t, b, fx, orphan)
	if _, err := os.Stat(filepath.Join(b.stateRoot, live, "state.json")); err != nil {
		t.Fatalf("the live owner's container was touched: %v", err)
	}
	_ = liveProc.Signal(unix.SIGKILL)
	_, _ = liveProc.Wait()
}

// TestSeccompSupport: a build without -tags seccomp (or without cgo's
// libseccomp) must report incompatible rather than run without a filter.
func TestSeccompSupport(t *testing.T) {
	if seccomp.Enabled {
		if maj, _, _ := seccomp.Version(); maj == 0 {
			t.Fatal("seccomp compiled in but no libseccomp version")
		}
		return
	}
	b := newBackend(nil)
	b.geteuid = func() int { return 0 }
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{ImageStore: "/"})
	if err != nil || resp.Available || resp.Reason != sandbox.ReasonIncompatible || !strings.Contains(resp.Detail, "seccomp") {
		t.Fatalf("got %+v, %v; want incompatible (seccomp)", resp, err)
	}
}

// TestMainThreadStaysHome: libcontainer's mount-source helper thread joins
// the container's mount namespace and exits locked. Were it scheduled on
// the main thread (which the runtime parks instead of killing), this
// process would stay in the first container's mount namespace for good:
// its mounts would outlive it and /proc/self/mountinfo would show them.
// main.go's init reserves the main thread; this checks it, and that
// verifyGone notices when it is not so.
func TestMainThreadStaysHome(t *testing.T) {
	b, fx := setup(t)
	home, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		id := newID(t, b, "home")
		resp, _, _ := run(t, b, spec(fx, id, "true"), nil)
		if !resp.CleanupVerified {
			t.Fatalf("run %d: %+v", i, resp)
		}
		if ns, _ := os.Readlink("/proc/self/ns/mnt"); ns != home {
			t.Fatalf("after run %d this process is in mount namespace %s, started in %s", i, ns, home)
		}
	}
	moved := newBackend(nil)
	moved.mntNS = "mnt:[0]"
	if err := moved.verifyGone("home-none", fx.Rootfs, 0); err == nil || !strings.Contains(err.Error(), "mount namespace") {
		t.Fatalf("verifyGone with a foreign mount namespace: %v", err)
	}
}

func TestCgroupV1Problem(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, memsw bool) *mountinfo.Info {
		mp := filepath.Join(dir, name)
		if err := os.MkdirAll(mp, 0o755); err != nil {
			t.Fatal(err)
		}
		if memsw {
			if err := os.WriteFile(filepath.Join(mp, "memory.memsw.limit_in_bytes"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return &mountinfo.Info{FSType: "cgroup", Root: "/", Mountpoint: mp, VFSOptions: "rw," + name}
	}
	full := []*mountinfo.Info{mk("cpu", false), mk("memory", true), mk("pids", false), mk("devices", false), mk("freezer", false)}
	if p := cgroupV1Problem(full); p != "" {
		t.Fatalf("complete set: %s", p)
	}
	if p := cgroupV1Problem(full[:2]); !strings.Contains(p, `"pids" is not mounted`) {
		t.Errorf("missing pids: %q", p)
	}
	sub := *full[2]
	sub.Root = "/some/where"
	if p := cgroupV1Problem([]*mountinfo.Info{full[0], full[1], &sub, full[3], full[4]}); !strings.Contains(p, `"pids" is not mounted`) {
		t.Errorf("pids mounted from a sub-tree: %q", p)
	}
	noSwap := []*mountinfo.Info{full[0], mk("memory2", false), full[2], full[3], full[4]}
	noSwap[1].VFSOptions = "rw,memory"
	if p := cgroupV1Problem(noSwap); !strings.Contains(p, "swap accounting") {
		t.Errorf("no memsw: %q", p)
	}
}

// TestReapRun: the reaper's Reap (run in the reaper process when the plugin
// died or hung) kills the armed container at its deadline without removing
// it, destroys it and proves it gone once the plugin is gone, and never
// touches a container of another owner (another plugin process, another
// agentnode) that carries the same run id.
func TestReapRun(t *testing.T) {
	b, fx := setup(t)
	id := newID(t, b, "reap")
	config, proc, err := b.configure(spec(fx, id, "sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ensureStateRoot(); err != nil {
		t.Fatal(err)
	}
	c, err := libcontainer.Create(b.stateRoot, id, config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(proc); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { _, err := proc.Wait(); waited <- err }()
	// The run's own root, as Run makes it (the container above does not
	// use it): the final reap removes it too.
	root, err := b.makeRunRoot(id, fx.Rootfs, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.remove() })
	target := func(owner string) json.RawMessage {
		raw, err := json.Marshal(reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: id, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}

	// Another owner: untouched, final or not.
	for _, final := range []bool{false, true} {
		if err := reapRun(t.Context(), target("2147483647:1"), final); err != nil {
			t.Fatalf("reapRun(other owner, final=%v) = %v", final, err)
		}
	}
	if st, err := c.Status(); err != nil || st != libcontainer.Running {
		t.Fatalf("another owner's reap touched the container: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(root.merged, "bin", "busybox")); err != nil {
		t.Fatalf("another owner's reap touched the run's root: %v", err)
	}

	// The deadline: killed, not removed.
	if err := reapRun(t.Context(), target(b.owner), false); err != nil {
		t.Fatalf("reapRun(final=false) = %v", err)
	}
	select {
	case <-waited:
	case <-time.After(60 * time.Second): // a safety net, not a bound
		t.Fatal("the container's process still runs")
	}
	if _, err := os.Stat(filepath.Join(b.stateRoot, id, "state.json")); err != nil {
		t.Fatalf("a non-final reap removed the container: %v", err)
	}

	// The plugin is gone: destroyed and proven gone; again is a no-op.
	if err := reapRun(t.Context(), target(b.owner), true); err != nil {
		t.Fatalf("reapRun(final=true) = %v", err)
	}
	assertNoLeftovers(t, b, fx, id)
	if _, err := os.Lstat(root.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the run's root outlived the final reap: %v", err)
	}
	if err := reapRun(t.Context(), target(b.owner), true); err != nil {
		t.Fatalf("reapRun of a destroyed container = %v", err)
	}
	if err := reapRun(t.Context(), json.RawMessage(`{"id":"../x","state_root":"/","cgroup_parent":"/","owner":"1:1"}`), true); err == nil {
		t.Fatal("a malformed target was accepted")
	}
}
