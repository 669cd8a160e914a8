package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups/fscommon"
	"golang.org/x/sys/unix"
)

// A run's own cgroup: every run gets a cgroup parent of its own,
// <b.cgroupParent>/run-<owner pid>-<owner start time>-<nonce>, under which
// podman's cgroupfs manager creates the container's cgroup
// (<run cgroup>/libpod-<container id>). It is how an OOM kill is told from
// any other SIGKILL: `podman run --rm` removes the container, its cgroup and
// the state in which libpod records an OOM kill before podman run returns,
// but the run's cgroup outlives them until the plugin removes it.
//
//   - cgroup v1: the kernel counts an OOM kill (memory.oom_control's
//     oom_kill) in the victim's own memory cgroup only, which podman removes,
//     and the OOM notification (cgroup.event_control on memory.oom_control)
//     reaches the cgroup whose limit was hit and its descendants, never its
//     ancestors. So the memory limits (memory.limit_in_bytes,
//     memory.memsw.limit_in_bytes) are set on the run's cgroup, not on the
//     container's (whose limit would be hit first), and an eventfd
//     registered there before podman starts counts the OOM events of the
//     run. memory.failcnt is no evidence: kernels since 6.x no longer count
//     it for most cgroups (it stays 0 through an OOM kill here).
//   - cgroup v2: memory.events is hierarchical, so the run cgroup's oom_kill
//     counts the kills in the container's cgroup below it; the limits stay
//     on the container.
//
// conmon is kept out of the run's cgroup (--cgroups no-conmon: it stays in
// the plugin's cgroup, as podman does under a systemd service): in
// <run cgroup>/conmon it, and the podman process it starts as its exit
// command, would share the tool's memory limit and could themselves be
// OOM-killed at a small one.

// runCgroupRE matches the name of a run's cgroup and captures its owner's
// pid and start time.
var runCgroupRE = regexp.MustCompile(`^run-([0-9]+)-([0-9]+)-[0-9a-f]+$`)

// runCgroup is a run's cgroup parent (see above).
type runCgroup struct {
	path   string // relative to each hierarchy's root, absolute ("/agentnode-podman/run-…")
	v2     bool
	memDir string // the memory hierarchy's (v2: the unified one's) directory of path
	// efd is the eventfd registered on memDir's memory.oom_control (cgroup
	// v1); -1 on v2 or once closed.
	efd int
}

// runCgroupName names the run cgroup of a run of the plugin process owner
// ("<pid>:<start time>", processID) with nonce.
func runCgroupName(owner, nonce string) (string, error) {
	pid, start, ok := strings.Cut(owner, ":")
	name := "run-" + pid + "-" + start + "-" + nonce
	if !ok || !runCgroupRE.MatchString(name) {
		return "", fmt.Errorf("no run cgroup name for owner %q and nonce %q", owner, nonce)
	}
	return name, nil
}

// newRunCgroup creates the run cgroup parent/<name> in the memory hierarchy
// (the other hierarchies' directories podman creates) and, on cgroup v1,
// sets the memory limits there (memory, then memory+swap: both in bytes)
// and registers the OOM eventfd. On any error nothing is left behind.
func newRunCgroup(e *engine, parent, name string, memory, memSwap int64) (rc *runCgroup, err error) {
	if e.memMount == "" {
		return nil, errors.New("no memory cgroup hierarchy")
	}
	rc = &runCgroup{path: filepath.Join(parent, name), v2: e.cgroupV2, efd: -1}
	rc.memDir = filepath.Join(e.memMount, rc.path)
	if err := os.MkdirAll(filepath.Dir(rc.memDir), 0o755); err != nil {
		return nil, fmt.Errorf("run cgroup: %w", err)
	}
	if err := os.Mkdir(rc.memDir, 0o755); err != nil {
		return nil, fmt.Errorf("run cgroup: %w", err)
	}
	defer func() {
		if err != nil {
			rc.close()
			_ = os.Remove(rc.memDir)
			rc = nil
		}
	}()
	if rc.v2 {
		return rc, nil
	}
	// Only a hierarchical memory cgroup limits its descendants (always so
	// since Linux 5.x; checked all the same).
	if h, err := fscommon.GetCgroupParamUint(rc.memDir, "memory.use_hierarchy"); err != nil || h != 1 {
		return nil, fmt.Errorf("run cgroup %s: memory.use_hierarchy is %d (%v), not 1: its limit would not hold its container", rc.memDir, h, err)
	}
	for _, w := range []struct {
		file string
		v    int64
	}{{"memory.limit_in_bytes", memory}, {"memory.memsw.limit_in_bytes", memSwap}} {
		if err := cgroupWrite(rc.memDir, w.file, strconv.FormatInt(w.v, 10)); err != nil {
			return nil, fmt.Errorf("run cgroup: %w", err)
		}
	}
	if rc.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("run cgroup: eventfd: %w", err)
	}
	ctl, err := os.Open(filepath.Join(rc.memDir, "memory.oom_control"))
	if err != nil {
		return nil, fmt.Errorf("run cgroup: %w", err)
	}
	defer ctl.Close() // the registration holds the eventfd, not this file
	if err := cgroupWrite(rc.memDir, "cgroup.event_control", fmt.Sprintf("%d %d", rc.efd, ctl.Fd())); err != nil {
		return nil, fmt.Errorf("run cgroup: registering for OOM events: %w", err)
	}
	return rc, nil
}

// cgroupWrite writes v to dir/file (an existing cgroup control file).
func cgroupWrite(dir, file, v string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", v, f.Name(), err)
	}
	return nil
}

// oomEvents returns how many OOM events the run's cgroup saw: on v1 the
// OOM notifications of the run cgroup's limit (each ends in a kill by the
// OOM killer, unless the process it would kill was already dying), on v2
// the oom_kill count of memory.events. Read it after podman run exited and
// before remove: removing the cgroup signals the eventfd too. On v1 it can
// be read once.
func (rc *runCgroup) oomEvents() (uint64, error) {
	if rc.v2 {
		return fscommon.GetValueByKey(rc.memDir, "memory.events", "oom_kill")
	}
	if rc.efd < 0 {
		return 0, errors.New("the OOM eventfd is closed")
	}
	var buf [8]byte
	n, err := unix.Read(rc.efd, buf[:])
	switch {
	case errors.Is(err, unix.EAGAIN):
		return 0, nil // no event
	case err != nil:
		return 0, fmt.Errorf("reading the OOM eventfd: %w", err)
	case n != 8:
		return 0, fmt.Errorf("reading the OOM eventfd: %d bytes", n)
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}

// close closes the eventfd (which ends its registration).
func (rc *runCgroup) close() {
	if rc.efd >= 0 {
		_ = unix.Close(rc.efd)
		rc.efd = -1
	}
}

// remove removes the run cgroup in every hierarchy (podman created it in
// each, with the container's cgroup below it, which must be gone already)
// and proves it absent. A directory still in use (EBUSY) is an error.
func (rc *runCgroup) remove() error {
	rc.close()
	cgs, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range cgs {
		d := filepath.Join(m.point, rc.path)
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("run cgroup: %w", err))
		} else if err := absent(d); err != nil {
			errs = append(errs, fmt.Errorf("run cgroup %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeStaleRunCgroups removes the run cgroups under parent, in every
// hierarchy, whose owning plugin process is gone (it died mid-run, before
// removing its own): rmdir removes only an empty cgroup, and a run cgroup
// of a live process is never touched (between its creation and podman's
// container cgroup in it, it is empty).
func removeStaleRunCgroups(parent string) {
	cgs, err := cgroupMounts()
	if err != nil {
		return
	}
	for _, m := range cgs {
		ents, err := os.ReadDir(filepath.Join(m.point, parent))
		if err != nil {
			continue
		}
		for _, ent := range ents {
			g := runCgroupRE.FindStringSubmatch(ent.Name())
			if g == nil || !ent.IsDir() || alive(g[1]+":"+g[2]) {
				continue
			}
			_ = os.Remove(filepath.Join(m.point, parent, ent.Name()))
		}
	}
}
