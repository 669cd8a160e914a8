package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// TestGVisorMissingRefused: without runsc a gVisor run is unavailable
// (runtime_missing) and refused by Run: nothing runs, natively or at all;
// native runs are unaffected.
func TestGVisorMissingRefused(t *testing.T) {
	b, fx := setup(t)
	// The same podman and runc, in a directory without runsc.
	dir := t.TempDir()
	for _, name := range []string{"podman", "runc"} {
		if err := os.Symlink(findBinary(filepath.SplitList(searchPath), name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	nb := newBackend(testLogger())
	nb.stateDir, nb.cgroupParent, nb.searchDirs = b.stateDir, b.cgroupParent, []string{dir}

	resp, err := nb.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Img.Ref, Runtime: sandbox.RuntimeGVisor})
	if err != nil || resp.Available || resp.Reason != sandbox.ReasonRuntimeMissing {
		t.Fatalf("gVisor availability without runsc = %+v, %v; want runtime_missing", resp, err)
	}
	t.Logf("runtime_missing: %s", resp.Detail)
	resp, err = nb.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Img.Ref})
	if err != nil || !resp.Available || resp.Runtime != sandbox.RuntimeNative {
		t.Fatalf("native availability = %+v, %v; want available, native", resp, err)
	}

	s := spec(fx, newID(t, "gvmiss"), "sh", "-c", "echo ran")
	s.Runtime = sandbox.RuntimeGVisor
	var stdout bytes.Buffer
	r, err := nb.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
	if err == nil || !strings.Contains(err.Error(), sandbox.ReasonRuntimeMissing) || r != nil || stdout.Len() > 0 {
		t.Fatalf("gVisor run without runsc = %+v, %v, stdout %q; want a runtime_missing error and no run", r, err, stdout.String())
	}
}

// TestGVisorRun: with runsc a gVisor run answers from gVisor's kernel
// (its /proc/version is not the host's) and is cleaned up like any run;
// the availability answer confirms the runtime.
func TestGVisorRun(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t)
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Img.Ref, Runtime: sandbox.RuntimeGVisor})
	if err != nil || !resp.Available || resp.Runtime != sandbox.RuntimeGVisor {
		t.Fatalf("gVisor availability = %+v, %v; want available, gvisor", resp, err)
	}
	host, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{sandbox.RuntimeGVisor, sandbox.RuntimeNative} {
		id := newID(t, "gv")
		s := spec(fx, id, "cat", "/proc/version")
		s.Runtime = rt
		var stdout bytes.Buffer
		r, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s, Stdout: &stdout})
		if err != nil || r.ExitCode != 0 || !r.CleanupVerified {
			t.Fatalf("%s run = %+v, %v", rt, r, err)
		}
		same := bytes.Equal(bytes.TrimSpace(stdout.Bytes()), bytes.TrimSpace(host))
		if same != (rt == sandbox.RuntimeNative) {
			t.Errorf("%s run: /proc/version %q, host's %q: want the host's only natively", rt, stdout.String(), host)
		}
		assertGone(t, b, id)
	}
}
