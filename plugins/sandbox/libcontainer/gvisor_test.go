package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte("runsc")) && bytes.Contains(cmd, []byte(id)) {
			tb.Errorf("a runsc process of %s still runs: pid %s: %q", id, e.Name(), bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		}
	}
}
