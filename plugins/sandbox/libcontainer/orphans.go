package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// ownerLabel marks every container with the plugin process that owns it
// ("<pid>:<start time in clock ticks>"), so that a later plugin process can
// tell a live neighbour's container from one orphaned by a crash.
const ownerLabel = "org.agentnode.owner"

// processID identifies a process across pid reuse.
func processID(pid int) (string, error) {
	st, err := system.Stat(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", pid, st.StartTime), nil
}

// alive reports whether the process named by processID still runs.
func alive(owner string) bool {
	pidStr, _, ok := strings.Cut(owner, ":")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	id, err := processID(pid)
	return err == nil && id == owner
}

func ownerOf(c *libcontainer.Container) string {
	for _, l := range c.Config().Labels {
		if v, ok := strings.CutPrefix(l, ownerLabel+"="); ok {
			return v
		}
	}
	return ""
}

// reapOrphans kills and destroys the containers under the state root whose
// owning plugin process is gone (it crashed or was killed mid-run, and its
// reaper, which normally does this at once, was killed too), and proves
// each is cleaned up. It
// never touches a container whose owner is alive, or one it cannot load
// (still being created, or not ours). It is run once when the plugin
// starts, off the hot path.
func (b *backend) reapOrphans() (reaped int, err error) {
	// gVisor runs' containers (gvisor.go), before their roots go.
	reaped, gerr := b.reapGVisorOrphans()
	entries, err := os.ReadDir(b.stateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return reaped, gerr
	}
	if err != nil {
		return reaped, errors.Join(gerr, fmt.Errorf("libcontainer: listing %s: %w", b.stateRoot, err))
	}
	errs := []error{gerr}
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || validateRunID(id) != nil {
			continue
		}
		c, err := libcontainer.Load(b.stateRoot, id)
		if err != nil {
			continue
		}
		owner := ownerOf(c)
		if owner == "" || alive(owner) {
			continue
		}
		b.log.Warn("destroying a container orphaned by a dead plugin process", "run_id", id, "owner", owner)
		if err := b.reapContainer(c, id); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped++
	}
	return reaped, errors.Join(errs...)
}

// reapContainer kills container c (run id), whose plugin process is gone,
// waits for it to stop, destroys it and proves it gone.
func (b *backend) reapContainer(c *libcontainer.Container, id string) error {
	_ = c.Signal(unix.SIGKILL)
	// The init is no longer our child: wait for it to die rather
	// than for a wait status.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := c.Status(); st == libcontainer.Stopped {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Mounts of a container live in its own mount namespace; what is
	// mounted at its rootfs on the host now is the host's business.
	rootfs := c.Config().Rootfs
	baseline, err := countMountsUnder(rootfs)
	if err != nil {
		return err
	}
	return b.destroyAndVerify(c, id, rootfs, baseline)
}

// reapTarget is what a run hands the plugin's reaper (sdk/sandbox/reaper):
// where its container lives and which plugin process owns it.
type reapTarget struct {
	StateRoot    string `json:"state_root"`
	CgroupParent string `json:"cgroup_parent"`
	ID           string `json:"id"`
	Owner        string `json:"owner"`
	// Runsc: a gVisor run (gvisor.go), in runsc's root, not libcontainer's.
	Runsc bool `json:"runsc,omitempty"`
}

// reapRun is the reaper's Reap (it runs in the reaper process): kill the
// run's container, and when final (the plugin is gone) destroy it and
// prove it gone. A container that does not exist (never started, or
// already destroyed) or that another plugin process owns is left alone.
func reapRun(_ context.Context, raw json.RawMessage, final bool) error {
	var t reapTarget
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("libcontainer: reap target: %w", err)
	}
	if err := validateRunID(t.ID); err != nil {
		return err
	}
	if !filepath.IsAbs(t.StateRoot) || !filepath.IsAbs(t.CgroupParent) || t.Owner == "" {
		return fmt.Errorf("libcontainer: reap target %q: incomplete", t.ID)
	}
	b := newBackend(nil)
	b.stateRoot, b.cgroupParent = t.StateRoot, t.CgroupParent
	if t.Runsc {
		return b.reapGVisor(t.ID, t.Owner, final)
	}
	c, err := libcontainer.Load(b.stateRoot, t.ID)
	switch {
	case errors.Is(err, libcontainer.ErrNotExist):
	case err != nil:
		return fmt.Errorf("libcontainer: loading %s: %w", t.ID, err)
	case ownerOf(c) != t.Owner:
		return nil // not the container that was armed
	case !final:
		if err := c.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
			return fmt.Errorf("libcontainer: killing %s: %w", t.ID, err)
		}
		return nil
	default:
		if err := b.reapContainer(c, t.ID); err != nil {
			return err
		}
	}
	if !final {
		return nil
	}
	// The run's own root (workspace.go), once its container is gone.
	return b.removeOwnedRoot(t.ID, t.Owner)
}
