package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/moby/sys/user"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer/configs"

	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

// A normal user (not root) runs the same profile rootless: libcontainer's
// RootlessEUID mode, where the user namespace is made first and its
// mappings written by newuidmap and newgidmap (Debian's uidmap package)
// from the user's own subordinate ids in /etc/subuid and /etc/subgid.
// Container root is the user itself (libcontainer's init sets the
// container up as it, so it reaches the user's image store); the sandbox
// user (1000) is one subordinate id of a slot no other run of this user
// holds, so the tool is neither the user nor another of its sandboxes.
// The network namespace is kept (owned by the user namespace: loopback
// only), and /sys is a fresh sysfs of that namespace, never a bind of the
// host's. The limits go into a cgroup under the user's delegated subtree
// (sdk/sandbox/cgdelegate), in every hierarchy; libcontainer fails the
// run (does not skip the limit) when it cannot create or limit it, so
// without the subtree nothing runs.

// errRootlessWorkspace: a workspace needs an idmapped mount, which only
// root can make.
var errRootlessWorkspace = errors.New("a workspace needs an idmapped mount, which a normal user cannot make: run as root for workspaces")

// mapperPath is where newuidmap and newgidmap are looked up when this
// process's PATH does not find them: libcontainer looks them up in PATH,
// and the host may start plugins with an environment of its own.
const mapperPath = "/usr/local/bin:/usr/bin:/bin"

// ensureMapperPath makes newuidmap findable through PATH, for libcontainer.
func ensureMapperPath() {
	if _, err := exec.LookPath("newuidmap"); err == nil {
		return
	}
	p := os.Getenv("PATH")
	if p != "" {
		p += ":"
	}
	_ = os.Setenv("PATH", p+mapperPath)
}

// rootlessStateRoot is a normal user's state root: under its runtime
// directory (/run/user/UID, made by systemd-logind) when it has one it
// owns, else a directory of its own in the temporary directory.
func rootlessStateRoot(uid int) string {
	run := filepath.Join("/run/user", strconv.Itoa(uid))
	if fi, err := os.Stat(run); err == nil && fi.IsDir() && int(fi.Sys().(*syscall.Stat_t).Uid) == uid {
		return filepath.Join(run, "agentnode", "libcontainer")
	}
	return filepath.Join(os.TempDir(), "agentnode-"+strconv.Itoa(uid), "libcontainer")
}

// checkOwnDirs refuses a rootless state root that anyone else could have
// prepared (it may be in the shared temporary directory): the state root
// and its parent (which also holds the slot locks, <state root>-ids) must
// be directories, not links, of this user, writable by no one else.
func checkOwnDirs(stateRoot string) error {
	uid := os.Geteuid()
	for _, d := range []string{filepath.Dir(stateRoot), stateRoot} {
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("state root: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || int(st.Uid) != uid || fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("state root: %s is not a directory of uid %d writable only by it (mode %v, owner %d)", d, uid, fi.Mode(), st.Uid)
		}
	}
	return nil
}

// accountName is uid's name in /etc/passwd, or the uid as a string.
func accountName(uid int) string {
	if u, err := user.LookupUid(uid); err == nil {
		return u.Name
	}
	return strconv.Itoa(uid)
}

// rootlessProblem says why uid (not root) cannot run a sandbox with this
// backend, or "". The profile's limits need cgroups the user may create:
// without a delegated subtree (sdk/sandbox/cgdelegate) they cannot be
// enforced, and the refusal names the one command that fixes it.
func rootlessProblem(uid int) string {
	if _, err := cgdelegate.Check(uid); err != nil {
		if errors.Is(err, cgdelegate.ErrNotDelegated) {
			return fmt.Sprintf("running as uid %d without root, the sandbox's memory, cpu and pids limits cannot be enforced: %v; fix: %s", uid, err, cgdelegate.FixCommand(accountName(uid)))
		}
		return fmt.Sprintf("running as uid %d without root: %v", uid, err)
	}
	if cgroups.IsCgroup2UnifiedMode() {
		return fmt.Sprintf("running as uid %d without root on cgroup v2: rootless runs are implemented for cgroup v1 only; use the podman backend or run as root", uid)
	}
	mounts, err := cgdelegate.Mounts()
	if err != nil {
		return err.Error()
	}
	if _, err := os.Stat(filepath.Join(mounts["memory"], cgdelegate.Parent(uid), "memory.memsw.limit_in_bytes")); err != nil {
		return "cgroup v1 memory controller without swap accounting (memory.memsw.*)"
	}
	return ""
}

// rootlessIDsProblem says why this user's subordinate ids or the tools that
// map them are missing, or "".
func rootlessIDsProblem() string {
	for _, bin := range []string{"newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Sprintf("every sandbox needs a user namespace, and a normal user's needs %s (Debian's uidmap package): %v", bin, err)
		}
	}
	uid := os.Geteuid()
	name := accountName(uid)
	for _, f := range []string{subid.UIDFile, subid.GIDFile} {
		if _, err := subid.LookupUser(f, name, uid); err != nil {
			return fmt.Sprintf("every sandbox needs a user namespace: %s has no subordinate ids: %v (as root: usermod --add-subuids/--add-subgids)", name, err)
		}
	}
	return ""
}

// rootlessUserNamespace takes a slot of the user's own subordinate ids and
// puts config into a user namespace mapped onto it and the user.
func (b *backend) rootlessUserNamespace(config *configs.Config) (*idSlot, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	name := accountName(uid)
	ur, err := subid.LookupUser(subid.UIDFile, name, uid)
	if err != nil {
		return nil, err
	}
	gr, err := subid.LookupUser(subid.GIDFile, name, uid)
	if err != nil {
		return nil, err
	}
	slot, err := b.acquireSlot(subid.Range{Start: ur.Start, Count: min(ur.Count, gr.Count)})
	if err != nil {
		return nil, err
	}
	slot.rootless, slot.uid, slot.gid = true, uid, gid
	slot.ghost = gr.Start + (slot.host - ur.Start)
	applyUserNS(config, slot)
	return slot, nil
}
