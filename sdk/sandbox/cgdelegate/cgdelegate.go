// Package cgdelegate holds the delegation of cgroup subtrees to normal
// users: the one place where a sandbox backend running without root may
// create cgroups and so enforce the profile's memory, CPU and pids limits.
//
// On cgroup v1 root runs `agentnode setup --delegate USER` once (Delegate):
// in every v1 hierarchy (the controllers the limits need among them) it
// creates Parent(uid), a
// directory owned by the user, with its cgroup.procs and tasks files. The
// user may then create child cgroups there (mkdir), set their limits (the
// files of a cgroup the user created are the user's) and move its own
// processes into them; nothing above the subtree is writable to it, so a
// sandbox's limits cannot be raised from inside the subtree's parent.
// A backend asks Check before running as a normal user and refuses the run
// when the subtree is missing: unlimited is never the fallback.
//
// On cgroup v2 the delegation is systemd's: a user service or a scope
// started with Delegate=yes (`systemd-run --user --scope -p Delegate=yes`)
// owns its cgroup; Check accepts the calling process's own cgroup when the
// user owns it and it offers the controllers. Delegate refuses on cgroup v2.
//
// The package is in sdk/ so that the command (which delegates) and the
// sandbox plugin (which checks and uses the subtree) share one definition
// of where the subtree is and what makes it usable.
package cgdelegate

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
)

// Root is the cgroup path, the same in every v1 hierarchy, under which
// each delegated user has Parent(uid). It is beside, not under, the
// root-run backend's own parent, so that the root backend's orphan
// reaping never touches a user's runs.
const Root = "/agentnode-users"

// Controllers are the cgroup v1 controllers a delegation requires: the
// ones the profile's limits (memory, cpu, pids) and a clean kill (freezer)
// need. The subtree is made in every hierarchy (Dirs); in the devices one
// it only holds processes: a normal user cannot write device rules (the
// rootless backend binds the few device nodes instead of creating them).
var Controllers = []string{"cpu", "memory", "pids", "freezer"}

// v2Controllers are the cgroup v2 controllers a delegated cgroup must offer.
var v2Controllers = []string{"cpu", "memory", "pids"}

// ownedFiles are the files of a v1 cgroup directory that must belong to
// the user, beside the directory itself: moving a process in writes one
// of them.
var ownedFiles = []string{"cgroup.procs", "tasks"}

// ErrNotDelegated is returned by Check when the user has no usable
// delegated subtree.
var ErrNotDelegated = errors.New("no cgroup subtree delegated to this user")

// ErrV2 is returned by Delegate on cgroup v2, where systemd delegates.
var ErrV2 = errors.New("cgroup v2: delegation is systemd's (run agentnode in a user service or in `systemd-run --user --scope -p Delegate=yes`), not setup's")

// Parent is the delegated subtree of uid, as a cgroup path (the same in
// every v1 hierarchy).
func Parent(uid int) string { return Root + "/" + strconv.Itoa(uid) }

// FixCommand is the one command that delegates a subtree to user: setup
// --delegate on cgroup v1, a delegated systemd scope on cgroup v2.
func FixCommand(user string) string {
	if cgroups.IsCgroup2UnifiedMode() {
		return "systemd-run --user --scope -p Delegate=yes agentnode ... (run agentnode in a delegated scope)"
	}
	return "sudo agentnode setup --delegate " + user
}

// Mounts maps each cgroup v1 controller to the mount point of its
// hierarchy's root (a hierarchy mounted only as a sub-tree is left out:
// absolute cgroup paths do not fit it).
func Mounts() (map[string]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil {
		return nil, fmt.Errorf("cgdelegate: reading cgroup mounts: %w", err)
	}
	found := map[string]string{}
	for _, m := range ms {
		if m.FSType != "cgroup" || m.Root != "/" {
			continue
		}
		for _, opt := range strings.Split(m.VFSOptions, ",") {
			if _, ok := found[opt]; !ok {
				found[opt] = m.Mountpoint
			}
		}
	}
	return found, nil
}

// Dirs are the directories of uid's subtree, one in every cgroup v1
// hierarchy mounted at its root (co-mounted controllers share one), sorted.
// A container runtime given an absolute cgroup path joins every hierarchy
// (cpuset, blkio, devices, the named name=systemd one, …), so the subtree
// is in all of them; Controllers must be among them.
func Dirs(uid int) ([]string, error) {
	mounts, err := Mounts()
	if err != nil {
		return nil, err
	}
	for _, c := range Controllers {
		if _, ok := mounts[c]; !ok {
			return nil, fmt.Errorf("cgdelegate: cgroup v1 controller %q is not mounted", c)
		}
	}
	var dirs []string
	for _, mp := range mounts {
		d := filepath.Join(mp, Parent(uid))
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}

// initCpuset gives the new cpuset cgroups from the hierarchy's root down to
// d the parent's cpus and mems where they have none: a cpuset cgroup
// without them takes no process.
func initCpuset(d string) error {
	mounts, err := Mounts()
	if err != nil {
		return err
	}
	mp, ok := mounts["cpuset"]
	if !ok || !strings.HasPrefix(d, mp+"/") {
		return nil
	}
	rel := strings.Split(strings.TrimPrefix(d, mp+"/"), "/")
	parent := mp
	for _, part := range rel {
		dir := filepath.Join(parent, part)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return fmt.Errorf("cgdelegate: %w", err)
			}
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			val, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("cgdelegate: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), val, 0); err != nil {
				return fmt.Errorf("cgdelegate: %s: %w", filepath.Join(dir, f), err)
			}
		}
		parent = dir
	}
	return nil
}

// Delegate creates uid's subtree under every controller in Controllers
// (cgroup v1) and gives it to uid:gid. Root (Root's own directory) stays
// root's. It is idempotent and returns the subtree's directories. It needs
// root.
func Delegate(uid, gid int) ([]string, error) {
	if uid == 0 {
		return nil, errors.New("cgdelegate: root needs no delegation")
	}
	if cgroups.IsCgroup2UnifiedMode() {
		return nil, ErrV2
	}
	dirs, err := Dirs(uid)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgdelegate: %w", err)
		}
		if err := initCpuset(d); err != nil {
			return nil, err
		}
		for _, p := range append([]string{d}, filesOf(d)...) {
			if err := os.Lchown(p, uid, gid); err != nil {
				return nil, fmt.Errorf("cgdelegate: %w", err)
			}
		}
	}
	return dirs, nil
}

// Undelegate removes uid's subtree, which must hold no cgroup with a
// process in it. A subtree that is not there is no error.
func Undelegate(uid int) error {
	if cgroups.IsCgroup2UnifiedMode() {
		return ErrV2
	}
	dirs, err := Dirs(uid)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		// Children first: cgroup directories go with rmdir only.
		var all []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			if err := rmdirCgroup(all[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirCgroup removes the cgroup directory d. A cgroup whose last process
// has just exited may still be busy for a moment (the kernel takes it
// offline asynchronously): EBUSY is retried, for at most a second.
func rmdirCgroup(d string) error {
	for i := 0; ; i++ {
		err := os.Remove(d)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
			return nil
		case errors.Is(err, syscall.EBUSY) && i < 100:
			time.Sleep(10 * time.Millisecond)
		default:
			return fmt.Errorf("cgdelegate: %w", err)
		}
	}
}

func filesOf(d string) []string {
	out := make([]string, len(ownedFiles))
	for i, f := range ownedFiles {
		out[i] = filepath.Join(d, f)
	}
	return out
}

// Check reports whether uid may create limited cgroups: on cgroup v1 its
// subtree under every controller in Controllers, owned by uid; on cgroup
// v2 the calling process's own cgroup, owned by uid and offering cpu,
// memory and pids. It returns the cgroup path runs go under, or an error
// wrapping ErrNotDelegated that says what is missing.
func Check(uid int) (string, error) {
	if cgroups.IsCgroup2UnifiedMode() {
		return checkV2(uid)
	}
	dirs, err := Dirs(uid)
	if err != nil {
		return "", err
	}
	for _, d := range dirs {
		for _, p := range append([]string{d}, filesOf(d)...) {
			fi, err := os.Stat(p)
			if err != nil {
				return "", fmt.Errorf("%w: %w", ErrNotDelegated, err)
			}
			if owner := fi.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
				return "", fmt.Errorf("%w: %s belongs to uid %d, not %d", ErrNotDelegated, p, owner, uid)
			}
		}
	}
	return Parent(uid), nil
}

// checkV2 checks the calling process's own cgroup v2 (unified) cgroup.
func checkV2(uid int) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgdelegate: %w", err)
	}
	defer f.Close()
	own := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", fmt.Errorf("%w: no cgroup v2 path in /proc/self/cgroup", ErrNotDelegated)
	}
	dir := filepath.Join("/sys/fs/cgroup", own)
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotDelegated, err)
	}
	if owner := fi.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
		return "", fmt.Errorf("%w: own cgroup %s belongs to uid %d, not %d (start agentnode in a delegated systemd unit)", ErrNotDelegated, own, owner, uid)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotDelegated, err)
	}
	have := strings.Fields(string(data))
	for _, c := range v2Controllers {
		if !slices.Contains(have, c) {
			return "", fmt.Errorf("%w: controller %q not delegated to %s", ErrNotDelegated, c, own)
		}
	}
	return own, nil
}
