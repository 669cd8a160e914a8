package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// Warming the cgroup migration lock.
//
// On cgroup v1 every write to a cgroup.procs or tasks file takes the
// kernel's global cgroup_threadgroup_rwsem for writing. When no such write
// happened in the last ~10 ms, taking it first waits for a full RCU grace
// period (percpu_down_write → rcu_sync_enter → synchronize_rcu); the writes
// right after are then cheap. Every run pays that wait in libcontainer's
// cgroup Apply, before the container's init may even start: 4 to 19 ms
// (mean 11) of a cold `agentnode run` of 80 to 90 ms on the 2-vCPU test VM,
// and runc pays it the same way.
//
// A run is announced before it happens: the host starts this plugin and asks
// Availability first, and Run reaches Apply 13 to 22 ms after the plugin
// started. So at both points the plugin moves a throwaway thread of its own
// into the cgroup that thread is already in. That no-op migration takes the
// same lock, the grace period elapses while the host finishes its pipeline,
// and Apply finds the lock warm. Nothing else changes: the thread stays
// where it was and exits at once, and while the grace period lasts other
// cgroup writers on the host wait exactly as they do for any container
// start. It is best effort and off every critical path: if it fails or
// comes too early, Run waits for the grace period itself, as before.

// warmTasksRoot is the mount point of the cgroup v1 pids hierarchy (mounted
// at its root), or "" when there is none to warm with: cgroup v2 migrates
// whole processes only, and moving this whole process is not a no-op we
// could prove against a cgroup manager moving it at the same moment.
var warmTasksRoot = sync.OnceValue(func() string {
	if cgroups.IsCgroup2UnifiedMode() {
		return ""
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		if m.Root != "/" {
			continue
		}
		for _, opt := range strings.Split(m.VFSOptions, ",") {
			if opt == "pids" {
				return m.Mountpoint
			}
		}
	}
	return ""
})

// warmCgroupLock starts a warm-up on a thread of its own and returns at
// once; a warm-up already under way makes it a no-op.
func (b *backend) warmCgroupLock() {
	if b.rootless || !b.warming.CompareAndSwap(false, true) {
		return // a normal user may not write the hierarchy's root tasks file
	}
	go func() {
		defer b.warming.Store(false)
		root := warmTasksRoot()
		if root == "" {
			return
		}
		// Never unlocked: the runtime ends the thread with this goroutine,
		// so no other goroutine ever runs on the thread that was moved.
		runtime.LockOSThread()
		if err := migrateSelfThread(root); err != nil {
			b.log.Debug("cgroup lock warm-up failed", "error", err)
		}
	}()
}

// migrateSelfThread writes the calling thread's id into the tasks file of
// the pids cgroup it is in, under the hierarchy mounted at root. Should a
// cgroup manager move this process between the read and the write, the
// thread alone stays behind, and it exits right after.
func migrateSelfThread(root string) error {
	data, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return err
	}
	rel, err := pidsCgroup(string(data))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(root, rel, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(strconv.Itoa(unix.Gettid())); err != nil {
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	return nil
}

// pidsCgroup returns the pids hierarchy's path in a /proc/<pid>/cgroup
// listing, refusing anything but a clean absolute path.
func pidsCgroup(listing string) (string, error) {
	for _, line := range strings.Split(listing, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), "pids") {
			continue
		}
		p := parts[2]
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return "", fmt.Errorf("unexpected pids cgroup path %q", p)
		}
		return p, nil
	}
	return "", errors.New("no pids cgroup in the listing")
}
