package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// TestOOMKillReported: a shell that doubles a string until the memory
// limit stops it is reported OOMKilled (the OOM events of the run's own
// cgroup, which outlives podman run --rm; runcgroup.go); the controls, a
// process killed by another SIGKILL (the timeout) and one that exits by
// itself, are not. Nothing of any run is left, its run cgroup included.
func TestOOMKillReported(t *testing.T) {
	b, fx := setup(t)

	id := newID(t, "oom")
	s := spec(fx, id, "sh", "-c", `a=x; while :; do a="$a$a"; done`)
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = time.Minute // a backstop only: the limit must end it
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err != nil {
		t.Fatalf("memory bomb: Run: %v", err)
	}
	if !resp.OOMKilled || !resp.Killed || resp.ExitCode != 137 || resp.TimedOut || !resp.CleanupVerified {
		t.Fatalf("memory bomb: response %+v", resp)
	}
	assertGone(t, b, id)

	id = newID(t, "oomtimeout")
	s = spec(fx, id, "sleep", "1000")
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = 300 * time.Millisecond
	if resp, err = b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err != nil || resp.OOMKilled || !resp.TimedOut || resp.ExitCode != 137 {
		t.Fatalf("timeout: response %+v, %v", resp, err)
	}
	assertGone(t, b, id)

	id = newID(t, "oomexit")
	s = spec(fx, id, "sh", "-c", "exit 7")
	s.Limits.MemoryBytes = 64 << 20
	if resp, err = b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err != nil || resp.OOMKilled || resp.Killed || resp.ExitCode != 7 || !resp.CleanupVerified {
		t.Fatalf("plain exit: response %+v, %v", resp, err)
	}
	assertGone(t, b, id)
}

// TestStaleRunCgroupsRemoved: the start-up sweep removes the empty run
// cgroups of a dead plugin process in every hierarchy and never one of a
// live process.
func TestStaleRunCgroupsRemoved(t *testing.T) {
	b, _ := setup(t)
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	// A pid above the kernel's maximum (2^22) is never alive.
	dead, err := runCgroupName("4194305:1", randomHex(8))
	if err != nil {
		t.Fatal(err)
	}
	live, err := runCgroupName(b.owner, randomHex(8))
	if err != nil {
		t.Fatal(err)
	}
	var deadDirs, liveDirs []string
	for _, m := range mounts {
		for name, list := range map[string]*[]string{dead: &deadDirs, live: &liveDirs} {
			d := filepath.Join(m.point, b.cgroupParent, name)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			*list = append(*list, d)
		}
	}
	t.Cleanup(func() {
		for _, d := range liveDirs {
			_ = os.Remove(d)
		}
	})
	removeStaleRunCgroups(b.cgroupParent)
	for _, d := range deadDirs {
		if err := absent(d); err != nil {
			t.Errorf("a dead process's run cgroup: %v", err)
		}
	}
	for _, d := range liveDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a live process's run cgroup was removed: %v", err)
		}
	}
	if len(deadDirs) == 0 {
		t.Fatalf("no cgroup hierarchy in %v", mounts)
	}
}
