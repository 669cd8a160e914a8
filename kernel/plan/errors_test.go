package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

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
