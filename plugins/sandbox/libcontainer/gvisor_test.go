package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// requireRunsc skips a gVisor test without /usr/bin/runsc, or fails it
// when AGENTNODE_REQUIRE_GVISOR=1 (test/deps.sh installs it).
func requireRunsc(tb testing.TB, b *backend) {
	tb.Helper()
	problem, _ := b.gvisorProblem()
	if problem == "" {
		return
	}
	if os.Getenv("AGENTNODE_REQUIRE_GVISOR") == "1" {
		tb.Fatalf("gVisor unavailable (and AGENTNODE_REQUIRE_GVISOR=1): %s", problem)
	}
	tb.Skipf("gVisor unavailable: %s", problem)
}

// TestConformanceGVisor runs the whole suite with Spec.Runtime gvisor:
// the profile's bundle run by gVisor's runsc.
func TestConformanceGVisor(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t, b)
	c := sandboxtest.Connect(t, info(), b)
	cfg := suiteConfig(fx)
	cfg.Runtime = sandbox.RuntimeGVisor
	cfg.NoUserNamespace = "under gVisor the tool's ids are gVisor's kernel's: the sandbox has no user namespace of the plugin's"
	cfg.WorkspaceRefused = true // errGVisorWorkspace
	sandboxtest.Run(t, c, cfg)
}

// TestGVisorRun: a gVisor run answers from gVisor's kernel (its
// /proc/version is not the host's), a native one from the host's, through
// the same backend; both are cleaned up, runsc's state and the run's root
// with the rest.
func TestGVisorRun(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t, b)
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store, Runtime: sandbox.RuntimeGVisor})
	if err != nil || !resp.Available || resp.Runtime != sandbox.RuntimeGVisor {
		t.Fatalf("gVisor availability = %+v, %v; want available, gvisor", resp, err)
	}
	host, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{sandbox.RuntimeGVisor, sandbox.RuntimeNative} {
		id := newID(t, b, "gv")
		s := spec(fx, id, "cat", "/proc/version")
		s.Runtime = rt
		var stdout, stderr bytes.Buffer
		r, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout, Stderr: &stderr})
		if err != nil || r.ExitCode != 0 || !r.CleanupVerified {
			t.Fatalf("%s run = %+v, %v (stderr %q)", rt, r, err, stderr.String())
		}
		same := bytes.Equal(bytes.TrimSpace(stdout.Bytes()), bytes.TrimSpace(host))
		if same != (rt == sandbox.RuntimeNative) {
			t.Errorf("%s run: /proc/version %q, host's %q: want the host's only natively", rt, stdout.String(), host)
		}
		assertNoLeftovers(t, b, fx, id)
		assertNoGVisorLeftovers(t, b, id)
	}
}

// TestGVisorMissing: without a runnable runsc a gVisor run is unavailable
// (runtime_missing) and Run refuses it: nothing runs, natively or at all;
// native runs are unaffected.
func TestGVisorMissing(t *testing.T) {
	b, fx := setup(t)
	notExec := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho runsc version 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "runsc"), notExec} {
		b.runsc = path
		resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store, Runtime: sandbox.RuntimeGVisor})
		if err != nil || resp.Available || resp.Reason != sandbox.ReasonRuntimeMissing {
			t.Fatalf("gVisor availability with runsc %s = %+v, %v; want runtime_missing", path, resp, err)
		}
		t.Logf("runtime_missing: %s", resp.Detail)
		resp, err = b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store})
		if err != nil || !resp.Available || resp.Runtime != sandbox.RuntimeNative {
			t.Fatalf("native availability = %+v, %v; want available, native", resp, err)
		}
		id := newID(t, b, "gvmiss")
		s := spec(fx, id, "sh", "-c", "echo ran")
		s.Runtime = sandbox.RuntimeGVisor
		var stdout bytes.Buffer
		r, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
		if err == nil || !strings.Contains(err.Error(), sandbox.ReasonRuntimeMissing) || r != nil || stdout.Len() > 0 {
			t.Fatalf("gVisor run without runsc = %+v, %v, stdout %q; want a runtime_missing error and no run", r, err, stdout.String())
		}
		assertNoLeftovers(t, b, fx, id)
	}
}

// assertNoGVisorLeftovers checks, independently of the backend, that
// runsc's root holds nothing of id, no runsc-sandbox or gofer process runs
// it, and its run root is gone.
func assertNoGVisorLeftovers(tb testing.TB, b *backend, id string) {
	tb.Helper()
	if m, _ := filepath.Glob(filepath.Join(b.runscRoot(), id+"*")); len(m) > 0 {
		tb.Errorf("runsc state of %s left behind: %v", id, m)
	}
	if _, err := os.Lstat(filepath.Join(b.rootsDir(), id)); err == nil {
		tb.Errorf("run root of %s left behind", id)
	}
	if pids := gvisorProcsOf(id); len(pids) > 0 {
		tb.Errorf("runsc processes of %s still run: pids %v", id, pids)
	}
}

// startDetached starts a gVisor container of run id running sleep, as a
// run of this backend would, but detached, with its run root's owner
// file naming owner; it returns the run root.
func startDetached(t *testing.T, b *backend, fx fixture, id, owner string) *runRoot {
	t.Helper()
	root, err := b.makeRunRoot(id, fx.Rootfs, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(runscPath, "--root", b.runscRoot(), "delete", "--force", id).Run()
		_ = root.remove()
	})
	if err := os.WriteFile(filepath.Join(root.dir, "owner"), []byte(owner), 0o600); err != nil {
		t.Fatal(err)
	}
	s := spec(fx, id, "sleep", "100")
	s.Runtime = sandbox.RuntimeGVisor
	if err := b.writeBundle(s, root); err != nil {
		t.Fatal(err)
	}
	// Its stdio stay /dev/null: the detached sandbox keeps what it is
	// given open.
	cmd := exec.Command(runscPath, b.runscArgs(false, "run", "--detach", "--bundle", root.dir, id)...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("runsc run --detach: %v", err)
	}
	if !runscHas(b.runscRoot(), id) || len(gvisorProcsOf(id)) == 0 {
		t.Fatalf("the detached gVisor container %s does not run", id)
	}
	return root
}

// gvisorProcsOf lists the host processes of runsc naming container id.
func gvisorProcsOf(id string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte("runsc")) && bytes.Contains(cmd, []byte(id)) {
			found = append(found, e.Name())
		}
	}
	return found
}

// TestGVisorOrphanReaped: a running gVisor container whose plugin
// process is gone is removed when a plugin starts (reapOrphans), with its
// sandbox, cgroups and run root; a live neighbour's is left alone.
func TestGVisorOrphanReaped(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t, b)
	self, err := processID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pid, start, _ := strings.Cut(self, ":")
	dead := newID(t, b, "gvorphan")
	startDetached(t, b, fx, dead, pid+":"+start+"9") // this pid, another start: gone
	live := newID(t, b, "gvlive")
	startDetached(t, b, fx, live, self)

	n, err := b.reapOrphans()
	if err != nil || n < 1 {
		t.Fatalf("reapOrphans = %d, %v", n, err)
	}
	assertNoLeftovers(t, b, fx, dead)
	assertNoGVisorLeftovers(t, b, dead)
	if !runscHas(b.runscRoot(), live) || len(gvisorProcsOf(live)) == 0 {
		t.Error("the live owner's gVisor container was touched")
	}
}

// TestGVisorReaperFinal: the plugin's reaper, told the plugin is gone
// (final), kills and removes a gVisor run's container and proves it gone;
// an armed target whose root another process owns is left alone.
func TestGVisorReaperFinal(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t, b)
	id := newID(t, b, "gvreap")
	startDetached(t, b, fx, id, b.owner)
	other := reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: id, Owner: b.owner + "1", Runsc: true}
	raw, _ := json.Marshal(other)
	if err := reapRun(t.Context(), raw, true); err != nil {
		t.Fatalf("reapRun of another owner's target: %v", err)
	}
	if !runscHas(b.runscRoot(), id) {
		t.Fatal("the reaper removed a container whose root another process owns")
	}
	mine := reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: id, Owner: b.owner, Runsc: true}
	raw, _ = json.Marshal(mine)
	if err := reapRun(t.Context(), raw, true); err != nil {
		t.Fatalf("reapRun: %v", err)
	}
	assertNoLeftovers(t, b, fx, id)
	assertNoGVisorLeftovers(t, b, id)
}

// TestGVisorNoWarmPool: the warm pool serves native runs only. gVisor runs
// of a host that allows a pool run cold under gVisor each time and leave
// nothing prepared; a workspace is refused under gVisor before anything
// runs.
func TestGVisorNoWarmPool(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t, b)
	t.Cleanup(func() { b.pool.closePool(b) })
	host, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		id := newID(t, b, "gvwarm")
		s := spec(fx, id, "cat", "/proc/version")
		s.Runtime = sandbox.RuntimeGVisor
		s.Warm = sandbox.WarmPool{Size: 1, Idle: time.Minute}
		var stdout bytes.Buffer
		r, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
		if err != nil || r.ExitCode != 0 || !r.CleanupVerified {
			t.Fatalf("gVisor run with a warm pool = %+v, %v", r, err)
		}
		if bytes.Equal(bytes.TrimSpace(stdout.Bytes()), bytes.TrimSpace(host)) {
			t.Fatalf("a gVisor run with a warm pool answered from the host's kernel: %q", stdout.String())
		}
		assertNoGVisorLeftovers(t, b, id)
	}
	b.pool.mu.Lock()
	n := len(b.pool.entries)
	b.pool.mu.Unlock()
	if n != 0 || b.pool.hits.Load() != 0 {
		t.Errorf("the warm pool holds %d containers and served %d runs after gVisor runs only", n, b.pool.hits.Load())
	}

	id := newID(t, b, "gvws")
	s := spec(fx, id, "sh", "-c", "echo ran")
	s.Runtime = sandbox.RuntimeGVisor
	s.Workspace = &sandbox.Workspace{Path: t.TempDir()}
	var stdout bytes.Buffer
	r, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
	if !errors.Is(err, errGVisorWorkspace) || r != nil || stdout.Len() > 0 {
		t.Fatalf("gVisor run with a workspace = %+v, %v, stdout %q; want errGVisorWorkspace and no run", r, err, stdout.String())
	}
	assertNoLeftovers(t, b, fx, id)
	assertNoGVisorLeftovers(t, b, id)
}
