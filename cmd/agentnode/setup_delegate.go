package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/moby/sys/user"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

// delegateResult is what `setup --delegate USER` prints with --json.
type delegateResult struct {
	User string   `json:"user"`
	UID  int      `json:"uid"`
	Dirs []string `json:"cgroup_dirs"`
	// Note says what else the user lacks for the rootless sandbox (its
	// own subordinate ids), or "".
	Note string `json:"note,omitempty"`
}

// runDelegate gives USER (a name or a uid in /etc/passwd) its cgroup subtree
// (sdk/sandbox/cgdelegate). It needs root.
func runDelegate(who string) (*delegateResult, error) {
	if runtime.GOOS != "linux" {
		return nil, reason.New(reason.NotSetUp, "--delegate: cgroups are Linux only")
	}
	if os.Geteuid() != 0 {
		return nil, reason.New(reason.NotSetUp, "--delegate needs root (run: %s)", cgdelegate.FixCommand(who))
	}
	u, err := lookupAccount(who)
	if err != nil {
		return nil, reason.New(reason.NotSetUp, "--delegate %s: %w", who, err)
	}
	if u.Uid == 0 {
		return nil, reason.New(reason.NotSetUp, "--delegate %s: root needs no delegation", who)
	}
	dirs, err := cgdelegate.Delegate(u.Uid, u.Gid)
	if err != nil {
		return nil, reason.New(reason.NotSetUp, "--delegate %s: %w", who, err)
	}
	res := &delegateResult{User: u.Name, UID: u.Uid, Dirs: dirs}
	if !hasSubIDs(u.Name, u.Uid) {
		res.Note = fmt.Sprintf("%s has no subordinate ids in %s and %s; the rootless sandbox maps its user namespace into them (usermod --add-subuids/--add-subgids)", u.Name, subid.UIDFile, subid.GIDFile)
	}
	return res, nil
}

// lookupAccount finds who, a name or a numeric uid, in /etc/passwd.
func lookupAccount(who string) (user.User, error) {
	if uid, err := strconv.Atoi(who); err == nil {
		return user.LookupUid(uid)
	}
	return user.LookupUser(who)
}

// hasSubIDs reports whether both subordinate id files give the account
// (by name or by uid) a line.
func hasSubIDs(name string, uid int) bool {
	for _, f := range []string{subid.UIDFile, subid.GIDFile} {
		data, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			owner, _, _ := strings.Cut(line, ":")
			if owner == name || owner == strconv.Itoa(uid) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// rootlessNote is what setup, run by a normal user, says about the
// libcontainer backend: it runs rootless in the user's own subordinate ids
// and needs the delegated cgroup subtree, and which command gives it.
func rootlessNote(uid int) string {
	name := strconv.Itoa(uid)
	if u, err := user.LookupUid(uid); err == nil {
		name = u.Name
	}
	if _, err := cgdelegate.Check(uid); err != nil {
		return fmt.Sprintf("not root: the libcontainer backend runs rootless for %s and needs a delegated cgroup subtree to enforce the sandbox limits (%v): run %s once", name, err, cgdelegate.FixCommand(name))
	}
	if !hasSubIDs(name, uid) {
		return fmt.Sprintf("not root: the libcontainer backend runs rootless for %s and maps its sandboxes into its own subordinate ids, and %s has none in %s and %s (as root: usermod --add-subuids/--add-subgids)", name, name, subid.UIDFile, subid.GIDFile)
	}
	return fmt.Sprintf("not root: the libcontainer backend runs rootless for %s, in its own subordinate ids and its delegated cgroup subtree %s", name, cgdelegate.Parent(uid))
}
