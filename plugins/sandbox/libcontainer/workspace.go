package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A run with a workspace (sandbox.Spec.Workspace) binds a host directory
// at its own absolute path, say /home/u/project. runc creates a missing
// mount point inside the root filesystem, which here is the unpacked image
// the host verified by hash before the run: creating /home/u/project in it
// would change the image, and the next run would fail its check. So such a
// run gets a root of its own instead: a read-only overlay whose top layer is
// a skeleton holding only the workspace's directory chain, over the image's
// rootfs. The image is a lower layer of a read-only overlay with no upper
// layer, so nothing, runc included, can write to it through this root; the
// mount point exists in the skeleton, and the image's own directories
// (/home's content, say) still show through. The overlay lives under
// <state root>-roots/<run id>, with an owner file naming this plugin
// process; it is unmounted and removed with the container, and a later
// plugin process removes one whose owner is gone (reapOrphanRoots).

// rootsDir holds the per-run roots of runs with a workspace.
func (b *backend) rootsDir() string { return b.stateRoot + "-roots" }

// workspaceRoot is one run's overlay root.
type workspaceRoot struct {
	dir    string // <rootsDir>/<id>
	merged string // the overlay: the container's rootfs
}

// overlaySafe reports whether p can be named in an overlay lowerdir
// option as is (no escaping of ':', ',' or '\').
func overlaySafe(p string) bool { return !strings.ContainsAny(p, ":,\\") }

// makeWorkspaceRoot builds run id's overlay root over rootfs with the
// directory chain of workspace (absolute, clean) in its skeleton.
func (b *backend) makeWorkspaceRoot(id, rootfs, workspace string) (*workspaceRoot, error) {
	if !overlaySafe(rootfs) || !overlaySafe(b.rootsDir()) {
		return nil, fmt.Errorf("workspace root: %s or %s cannot be an overlay layer (':', ',' or '\\' in the path)", rootfs, b.rootsDir())
	}
	if err := os.MkdirAll(b.rootsDir(), 0o700); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	r := &workspaceRoot{dir: filepath.Join(b.rootsDir(), id)}
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		// Someone else's run (or a leftover a later start removes).
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	r.merged = filepath.Join(r.dir, "root")
	skel := filepath.Join(r.dir, "skel")
	err := os.WriteFile(filepath.Join(r.dir, "owner"), []byte(b.owner), 0o600)
	if err == nil {
		err = os.Mkdir(r.merged, 0o755)
	}
	if err == nil {
		// 0755 root-owned directories: the sandbox user can pass them.
		err = os.MkdirAll(filepath.Join(skel, workspace), 0o755)
	}
	if err == nil {
		err = chmodChain(skel, workspace, 0o755)
	}
	if err == nil {
		err = unix.Mount("overlay", r.merged, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV,
			"lowerdir="+skel+":"+rootfs)
		if err != nil {
			err = fmt.Errorf("mounting the overlay: %w", err)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("workspace root: %w", err), r.remove())
	}
	return r, nil
}

// chmodChain sets mode on every directory of p's chain below root (the
// umask may have narrowed what MkdirAll made).
func chmodChain(root, p string, mode os.FileMode) error {
	cur := root
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur = filepath.Join(cur, part)
		if err := os.Chmod(cur, mode); err != nil {
			return err
		}
	}
	return nil
}

// remove unmounts the overlay and removes the run's directory, and proves
// both gone.
func (r *workspaceRoot) remove() error {
	if r == nil {
		return nil
	}
	if err := unix.Unmount(r.merged, unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("workspace root: unmounting %s: %w", r.merged, err)
	}
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("workspace root: %w", err)
	}
	var left []string
	if err := absent(r.dir); err != nil {
		left = append(left, err.Error())
	}
	if n, err := countMountsUnder(r.dir); err != nil || n > 0 {
		left = append(left, fmt.Sprintf("%d mount(s) below %s (%v)", n, r.dir, err))
	}
	if len(left) > 0 {
		return fmt.Errorf("workspace root not cleaned up: %s", strings.Join(left, "; "))
	}
	return nil
}

// reapOrphanRoots removes the workspace roots whose owning plugin process
// is gone (it died mid-run). Roots of live owners are never touched.
func (b *backend) reapOrphanRoots() error {
	entries, err := os.ReadDir(b.rootsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("libcontainer: listing %s: %w", b.rootsDir(), err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || validateRunID(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(b.rootsDir(), e.Name())
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil || len(owner) == 0 || alive(string(owner)) {
			continue // being made, or a live neighbour's
		}
		b.log.Warn("removing a workspace root orphaned by a dead plugin process", "run_id", e.Name(), "owner", string(owner))
		r := &workspaceRoot{dir: dir, merged: filepath.Join(dir, "root")}
		if err := r.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
