package plan

import (
	"fmt"

	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// SandboxError is the error of a failed call to sandbox backend name: a
// missing or broken backend plugin is sandbox_unavailable; a coded error
// (a pin problem stays plugin_unpinned) keeps its code.
func SandboxError(name string, err error) error {
	err = pluginhost.CallError("sandbox-"+name, err)
	if reason.CodeOf(err) == reason.PluginUnavailable {
		return reason.New(reason.SandboxUnavailable, "sandbox backend %s: %w", name, err)
	}
	return err
}

// OOMError is the killed_memory error of a sandboxed run the kernel's OOM
// killer ended (the backend's OOMKilled) and that did not succeed: the run
// failed for its memory limit, not because its output was malformed. nil
// otherwise (a run whose child was killed but that still exited 0 keeps
// its own outcome). what names the run ("tool p/t", "agent a").
func OOMError(oomKilled bool, exitCode int, what string, limits sandbox.Limits) error {
	if !oomKilled || exitCode == 0 {
		return nil
	}
	limit := "the sandbox's default memory limit"
	if limits.MemoryBytes > 0 {
		limit = fmt.Sprintf("its memory limit of %d MiB (sandbox.limits.memory)", limits.MemoryBytes>>20)
	}
	return reason.New(reason.KilledMemory, "%s was killed by the kernel for using more than %s (exit %d)",
		what, limit, exitCode)
}
