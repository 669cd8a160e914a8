package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// verifyGone proves that nothing of container id is left on the host:
//
//   - its state directory under the state root;
//   - its cgroup directory <parent>/<id> in every mounted cgroup hierarchy
//     (each v1 controller, named hierarchies such as name=systemd, and the
//     unified v2 hierarchy), found from /proc/self/mountinfo rather than
//     from a fixed list;
//   - any mount at or below its rootfs beyond those present before the run
//     (baseline), and any mount below its state directory, in
//     /proc/self/mountinfo;
//   - and that this process is still in the mount namespace it started in,
//     so that /proc/self/mountinfo is the host's table and no thread of ours
//     keeps a container's mount namespace alive.
//
// It returns an error naming everything that was left.
func (b *backend) verifyGone(id, rootfs string, baseline int) error {
	var left []string
	stateDir := filepath.Join(b.stateRoot, id)
	if err := absent(stateDir); err != nil {
		left = append(left, "state dir: "+err.Error())
	}
	if ns, err := os.Readlink("/proc/self/ns/mnt"); err != nil || ns != b.mntNS {
		left = append(left, fmt.Sprintf("mount namespace: this process is in %q, started in %q (%v)", ns, b.mntNS, err))
	}

	mounts, err := selfMounts(nil)
	if err != nil {
		return fmt.Errorf("libcontainer: cleanup of %s unverified: %w", id, err)
	}
	cg := b.cgroupParent + "/" + id
	hierarchies, underRootfs := 0, 0
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup", "cgroup2":
			p, ok := cgroupDir(m, cg)
			if !ok {
				continue
			}
			hierarchies++
			if err := absent(p); err != nil {
				left = append(left, "cgroup: "+err.Error())
			}
		}
		if within(m.Mountpoint, rootfs) {
			underRootfs++
		}
		if within(m.Mountpoint, stateDir) {
			left = append(left, "mount: "+m.Mountpoint)
		}
	}
	if hierarchies == 0 {
		left = append(left, "cgroup: no cgroup hierarchy found to check")
	}
	if underRootfs > baseline {
		left = append(left, fmt.Sprintf("mount: %d new mount(s) at or below rootfs %s", underRootfs-baseline, rootfs))
	}
	if len(left) > 0 {
		return fmt.Errorf("libcontainer: container %s not cleaned up: %s", id, strings.Join(left, "; "))
	}
	return nil
}

// cgroupDir maps the absolute cgroup path cg into hierarchy mount m.
func cgroupDir(m *mountinfo.Info, cg string) (string, bool) {
	if m.Root == "/" {
		return filepath.Join(m.Mountpoint, cg), true
	}
	if rel, ok := strings.CutPrefix(cg, m.Root+"/"); ok {
		return filepath.Join(m.Mountpoint, rel), true
	}
	return "", false // not visible through this mount
}

// absent returns nil only when path provably does not exist.
func absent(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("%s exists", path)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return err
	}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// selfMounts parses /proc/self/mountinfo: the mount table of this process
// (its main thread), not of the calling thread.
func selfMounts(filter mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mountinfo.GetMountsFromReader(f, filter)
}

// countMountsUnder counts mounts at or below dir in /proc/self/mountinfo.
func countMountsUnder(dir string) (int, error) {
	mounts, err := selfMounts(func(m *mountinfo.Info) (bool, bool) {
		return !within(m.Mountpoint, dir), false
	})
	if err != nil {
		return 0, fmt.Errorf("reading mount table: %w", err)
	}
	return len(mounts), nil
}
