package main

import (
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestOOMKillReported: a shell that doubles a string until the cgroup's
// memory limit stops it is reported OOMKilled (the memory cgroup's oom_kill
// count), through the real gRPC path; the control, a process killed by
// another SIGKILL (the timeout), is not.
func TestOOMKillReported(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), b)

	id := newID(t, b, "oom")
	s := spec(fx, id, "sh", "-c", `a=x; while :; do a="$a$a"; done`)
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = time.Minute // a backstop only: the limit must end it
	resp, _, errOut := run(t, c, s, nil)
	if !resp.OOMKilled || resp.ExitCode != 137 || resp.TimedOut || !resp.CleanupVerified {
		t.Fatalf("memory bomb: response %+v, stderr %q", resp, errOut)
	}
	assertNoLeftovers(t, b, fx, id)

	id = newID(t, b, "oomctl")
	s = spec(fx, id, "sleep", "1000")
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = 200 * time.Millisecond
	resp, _, _ = run(t, c, s, nil)
	if resp.OOMKilled || !resp.TimedOut || resp.ExitCode != 137 {
		t.Fatalf("timeout: response %+v", resp)
	}
	assertNoLeftovers(t, b, fx, id)
}
