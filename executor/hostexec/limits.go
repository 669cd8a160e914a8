package hostexec

import (
	"strings"

	"github.com/agentnode/agentnode/kernel/ownlimits"
	"github.com/agentnode/agentnode/kernel/reason"
)

// checkLimits is ownlimits.Restore after a run of entrypoint: nil when
// nothing had changed, else a sandbox_unavailable error (wrapping
// ownlimits.ErrChanged) saying what was changed and whether it was put
// back.
func checkLimits(entrypoint string) error {
	changed, err := ownlimits.Restore()
	switch {
	case err != nil:
		return reason.New(reason.SandboxUnavailable, "hostexec: after tool %s: %w", entrypoint, err)
	case len(changed) > 0:
		return reason.New(reason.SandboxUnavailable, "hostexec: after tool %s: %w (%s; restored)",
			entrypoint, ownlimits.ErrChanged, strings.Join(changed, ", "))
	}
	return nil
}
