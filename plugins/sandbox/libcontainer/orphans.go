package main

import (
	"errors"
	"fmt"
	"os"
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
// owning plugin process is gone (it crashed or was killed mid-run, so no
// one enforces their timeout any more), and proves each is cleaned up. It
// never touches a container whose owner is alive, or one it cannot load
// (still being created, or not ours). It is run once when the plugin
// starts, off the hot path.
func (b *backend) reapOrphans() (reaped int, err error) {
	entries, err := os.ReadDir(b.stateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("libcontainer: listing %s: %w", b.stateRoot, err)
	}
	var errs []error
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
			errs = append(errs, err)
			continue
		}
		if err := b.destroyAndVerify(c, id, rootfs, baseline); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped++
	}
	return reaped, errors.Join(errs...)
}
