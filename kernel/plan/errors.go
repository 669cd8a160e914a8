package plan

import (
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
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
