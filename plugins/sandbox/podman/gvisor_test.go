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

// TestGVisorOrphanReaped: a running gVisor container whose owner is gone
// is removed by the orphan reaper (whose podman calls name runc: the
// container's own runtime, runsc by its containers.conf name, is what
// podman uses), and its gVisor sandbox process is gone with it.
func TestGVisorOrphanReaped(t *testing.T) {
	b, fx := setup(t)
	requireRunsc(t)
	e, err := b.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.forRuntime(sandbox.RuntimeGVisor)
	if err != nil {
		t.Fatal(err)
	}
	img := strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:")
	dead := newID(t, "gvorphan")
	self, err := processID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pid, start, _ := strings.Cut(self, ":")
	// Its streams stay /dev/null: the detached sandbox keeps what it
	// inherits open.
	cidfile := filepath.Join(t.TempDir(), "cid")
	run := g.command("run", "--detach", "--cidfile", cidfile, "--network", "none", "--name", namePrefix+dead, "--label", runLabel+"="+dead,
		"--label", ownerLabel+"="+pid+":"+start+"9", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", img, "sleep", "100")
	if err := run.Run(); err != nil {
		t.Fatalf("podman run --detach under runsc: %v", err)
	}
	out, err := os.ReadFile(cidfile)
	if err != nil {
		t.Fatal(err)
	}
	cid := strings.TrimSpace(string(out))
	sentries := func() []string {
		var found []string
		ents, _ := os.ReadDir("/proc")
		for _, ent := range ents {
			cmd, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
			if err == nil && bytes.HasPrefix(cmd, []byte("runsc-sandbox\x00")) && bytes.Contains(cmd, []byte(cid)) {
				found = append(found, ent.Name())
			}
		}
		return found
	}
	if len(sentries()) == 0 {
		t.Fatalf("no gVisor sandbox process runs container %s", cid)
	}
	n, err := b.reapOrphans(t.Context())
	if err != nil || n < 1 {
		t.Fatalf("reapOrphans = %d, %v", n, err)
	}
	if _, err := podmanCLI("container", "exists", namePrefix+dead); err == nil {
		t.Error("the gVisor orphan is still there")
	}
	if s := sentries(); len(s) > 0 {
		t.Errorf("the gVisor sandbox of the orphan still runs: pids %v", s)
	}
}
