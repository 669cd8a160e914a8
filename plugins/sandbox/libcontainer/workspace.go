package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Every run gets a root of its own, a mount of the image's rootfs at
// <state root>-roots/<run id>/root, for two reasons.
//
// The container's root user is an unprivileged host id (userns.go), and
// libcontainer's init, running as it, sets the root up by its path: every
// directory on the way must let others pass. The image store sits in the
// user's 0700 AGENTNODE_HOME; the run's root sits below directories made
// 0711 (others may pass, not list), and a read-only bind mount of the
// rootfs is all a run without a workspace needs.
//
// A run with a workspace (sandbox.Spec.Workspace) binds a host directory
// at its own absolute path, say /home/u/project. runc creates a missing
// mount point inside the root filesystem, which here is the unpacked image
// the host verified by hash before the run: creating /home/u/project in it
// would change the image, and the next run would fail its check. So such a
// run's root is a read-only overlay whose top layer is a skeleton holding
// only the workspace's directory chain, over the image's rootfs. The image
// is a lower layer of a read-only overlay with no upper layer, so nothing,
// runc included, can write to it through this root; the mount point exists
// in the skeleton, and the image's own directories (/home's content, say)
// still show through.
//
// The run's directory holds an owner file naming this plugin process; the
// root is unmounted and removed with the container, and a later plugin
// process removes one whose owner is gone (reapOrphanRoots).
//
// The workspace itself is an idmapped mount (workspaceIDMapping): its
// owner's files are the sandbox user's inside, so a writable workspace can
// be written and what the tool writes there is the owner's on the host.

// rootsDir holds the per-run roots.
func (b *backend) rootsDir() string { return b.stateRoot + "-roots" }

// runRoot is one run's root.
type runRoot struct {
	dir    string // <rootsDir>/<id>
	merged string // the bind mount or the overlay: the container's rootfs
}

// overlaySafe reports whether p can be named in an overlay lowerdir
// option as is (no escaping of ':', ',' or '\').
func overlaySafe(p string) bool { return !strings.ContainsAny(p, ":,\\") }

// makeRunRoot builds run id's root: a read-only bind mount of rootfs, or
// with a workspace (absolute, clean; "" for none) an overlay over rootfs
// with the workspace's directory chain in its skeleton.
func (b *backend) makeRunRoot(id, rootfs, workspace string) (*runRoot, error) {
	if workspace != "" && (!overlaySafe(rootfs) || !overlaySafe(b.rootsDir())) {
		return nil, fmt.Errorf("run root: %s or %s cannot be an overlay layer (':', ',' or '\\' in the path)", rootfs, b.rootsDir())
	}
	if err := b.ensureRootsDir(); err != nil {
		return nil, err
	}
	r := &runRoot{dir: filepath.Join(b.rootsDir(), id)}
	if err := os.Mkdir(r.dir, 0o711); err != nil {
		// Someone else's run (or a leftover a later start removes).
		return nil, fmt.Errorf("run root: %w", err)
	}
	r.merged = filepath.Join(r.dir, "root")
	skel := filepath.Join(r.dir, "skel")
	err := os.Chmod(r.dir, 0o711) // the umask narrowed it
	if err == nil {
		err = os.WriteFile(filepath.Join(r.dir, "owner"), []byte(b.owner), 0o600)
	}
	if err == nil {
		err = os.Mkdir(r.merged, 0o755)
	}
	if err == nil {
		if workspace == "" {
			err = bindReadOnly(rootfs, r.merged)
		} else {
			err = overlayRoot(rootfs, skel, r.merged, workspace)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("run root: %w", err), r.remove())
	}
	return r, nil
}

// overlayRoot mounts at target a read-only overlay of skel, made to hold
// the directory chain of workspace, over rootfs.
func overlayRoot(rootfs, skel, target, workspace string) error {
	// 0755 root-owned directories: the sandbox user can pass them.
	if err := os.MkdirAll(filepath.Join(skel, workspace), 0o755); err != nil {
		return err
	}
	if err := chmodChain(skel, workspace, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV,
		"lowerdir="+skel+":"+rootfs); err != nil {
		return fmt.Errorf("mounting the overlay: %w", err)
	}
	return nil
}

// bindReadOnly bind-mounts dir (not recursively: an image has no mounts)
// at target, read-only, nosuid, nodev.
func bindReadOnly(dir, target string) error {
	if err := unix.Mount(dir, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the rootfs: %w", err)
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the rootfs bind read-only: %w", err)
	}
	return nil
}

// ensureRootsDir creates the roots directory 0711, below a parent others
// may pass: container root, an unprivileged host id, must reach the run's
// root by its path.
func (b *backend) ensureRootsDir() error {
	parent := filepath.Dir(b.rootsDir())
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return fmt.Errorf("run root: %w", err)
	}
	fi, err := os.Stat(parent)
	if err != nil {
		return fmt.Errorf("run root: %w", err)
	}
	if fi.Mode().Perm()&0o001 == 0 {
		// Our own directory (/run/agentnode), made 0700 by an older
		// version: let others pass, never list.
		if err := os.Chmod(parent, fi.Mode().Perm()|0o011); err != nil {
			return fmt.Errorf("run root: %w", err)
		}
	}
	if err := os.Mkdir(b.rootsDir(), 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("run root: %w", err)
	}
	if err := os.Chmod(b.rootsDir(), 0o711); err != nil {
		return fmt.Errorf("run root: %w", err)
	}
	return nil
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
func (r *runRoot) remove() error {
	if r == nil {
		return nil
	}
	if err := unix.Unmount(r.merged, unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("run root: unmounting %s: %w", r.merged, err)
	}
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("run root: %w", err)
	}
	var left []string
	if err := absent(r.dir); err != nil {
		left = append(left, err.Error())
	}
	if n, err := countMountsUnder(r.dir); err != nil || n > 0 {
		left = append(left, fmt.Sprintf("%d mount(s) below %s (%v)", n, r.dir, err))
	}
	if len(left) > 0 {
		return fmt.Errorf("run root not cleaned up: %s", strings.Join(left, "; "))
	}
	return nil
}

// removeOwnedRoot removes run id's root if owner made it (the reaper's
// final reap of a run whose plugin died).
func (b *backend) removeOwnedRoot(id, owner string) error {
	dir := filepath.Join(b.rootsDir(), id)
	got, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil || string(got) != owner {
		return nil // none, or not the armed run's
	}
	r := &runRoot{dir: dir, merged: filepath.Join(dir, "root")}
	return r.remove()
}

// reapOrphanRoots removes the run roots whose owning plugin process
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
		b.log.Warn("removing a run root orphaned by a dead plugin process", "run_id", e.Name(), "owner", string(owner))
		r := &runRoot{dir: dir, merged: filepath.Join(dir, "root")}
		if err := r.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
