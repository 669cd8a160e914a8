package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/moby/sys/user"

	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
)

// errRootlessRun is the refusal of a normal user who has a delegated
// cgroup subtree: the run inside it (user namespace from the user's own
// subordinate ids) is not built yet.
var errRootlessRun = errors.New("rootless libcontainer runs are not implemented yet")

// rootlessProblem says why uid (not root) cannot run a sandbox with this
// backend, or "". The profile's limits need cgroups the user may create:
// without a delegated subtree (sdk/sandbox/cgdelegate) they cannot be
// enforced, and the refusal names the one command that fixes it.
func rootlessProblem(uid int) string {
	name := strconv.Itoa(uid)
	if u, err := user.LookupUid(uid); err == nil {
		name = u.Name
	}
	if _, err := cgdelegate.Check(uid); err != nil {
		if errors.Is(err, cgdelegate.ErrNotDelegated) {
			return fmt.Sprintf("running as uid %d without root, the sandbox's memory, cpu and pids limits cannot be enforced: %v; fix: %s", uid, err, cgdelegate.FixCommand(name))
		}
		return fmt.Sprintf("running as uid %d without root: %v", uid, err)
	}
	return fmt.Sprintf("running as uid %d with a delegated cgroup subtree (%s): %v; use the podman or docker backend, or run as root", uid, cgdelegate.Parent(uid), errRootlessRun)
}
