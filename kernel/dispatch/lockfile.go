package dispatch

import (
	"context"
	"fmt"
	"os"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

// stageLockfile checks the lockfile. Verification of agentnode.lock arrives
// with the lockfile issue; until then lockfile.strict refuses (it cannot be
// honoured) and a present lockfile is reported as unverified.
func stageLockfile(_ context.Context, st *state) error {
	path := home.LockfilePath()
	_, err := os.Stat(path)
	exists := err == nil
	if st.set.lockfileStrict {
		return reason.New(reason.IntegrityDenied, "lockfile.strict is on but lockfile verification is %w", errStageUnavailable)
	}
	if exists {
		st.k.warn(st, fmt.Sprintf("lockfile %s was not verified: verification is %v", path, errStageUnavailable))
	}
	return nil
}
