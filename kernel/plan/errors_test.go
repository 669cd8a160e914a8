package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// TestOOMKilledRunIsKilledMemory: a sandboxed run the OOM killer ended is
// killed_memory (exit 1), naming the limit; other kills are not, and a run
// that still exited 0 keeps its outcome.
func TestOOMKilledRunIsKilledMemory(t *testing.T) {
	lim := sandbox.Limits{MemoryBytes: 64 << 20}
	err := OOMError(true, 137, "tool a/b", lim)
	if !errors.Is(err, reason.ErrKilledMemory) || reason.CodeOf(err).ExitCode() != reason.ExitFailed ||
		!strings.Contains(err.Error(), "64 MiB") {
		t.Fatalf("err = %v", err)
	}
	for _, resp := range []*sandbox.RunResponse{
		{ExitCode: 137, Killed: true},
		{ExitCode: 0, OOMKilled: true},
		{ExitCode: 1},
	} {
		if err := OOMError(resp.OOMKilled, resp.ExitCode, "tool a/b", lim); err != nil {
			t.Errorf("%+v: %v", resp, err)
		}
	}
}

// TestSandboxError: a backend plugin that is missing or broken is
// sandbox_unavailable naming the backend; a coded error keeps its code.
func TestSandboxError(t *testing.T) {
	err := SandboxError("docker", errors.New("connection refused"))
	if !errors.Is(err, reason.ErrSandboxUnavailable) || !strings.Contains(err.Error(), "sandbox backend docker") {
		t.Fatalf("uncoded: %v", err)
	}
	pinned := reason.New(reason.PluginUnpinned, "not pinned")
	if err := SandboxError("docker", pinned); !errors.Is(err, reason.ErrPluginUnpinned) || errors.Is(err, reason.ErrSandboxUnavailable) {
		t.Fatalf("coded: %v", err)
	}
}
