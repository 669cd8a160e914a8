package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
)

// verifyTries bounds how often removal and its proof are retried: a
// cgroup can outlive its last task by a moment, and the exit command conmon
// runs races with podman rm.
const verifyTries = 4

// removeAndVerify removes the run's container and proves it is gone. cid
// is the container's ID when podman wrote it; when it did not (podman died
// or failed early), the container is looked up by the run's nonce label, so
// that a container of the same name that is not ours is never touched.
//
// A --rm run that podman ended by itself has already been removed by
// podman; when libpod's database, read after podman exited, holds the
// container's exit status (which proves it is podman's live database) and
// nothing else of it, verifyGoneDirect proves the removal without another
// podman call. Otherwise, or when that proof fails, the container is
// removed with podman rm and the removal proven with podman ps.
//
// Then the run's own cgroup (runcgroup.go), empty once the container's is
// gone, is removed in every hierarchy and proven gone; while the
// container's removal is unproven, only what of it is empty is removed.
func (b *backend) removeAndVerify(rs *runState, cid string) error {
	err := b.removeContainerAndVerify(rs, cid)
	if rs.cg == nil {
		return err
	}
	if err != nil {
		// The container may still be in it: rmdir removes only empty
		// cgroups, and what is left waits for the sweep of a later
		// plugin process (removeStaleRunCgroups).
		_ = rs.cg.remove()
		return err
	}
	if err := rs.cg.remove(); err != nil {
		return fmt.Errorf("podman: cleanup of run %s unverified: %w", rs.req.RunID, err)
	}
	return nil
}

// removeContainerAndVerify is removeAndVerify for the container.
func (b *backend) removeContainerAndVerify(rs *runState, cid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer os.Remove(rs.cidfile)
	if cid == "" {
		cid = readCID(rs.cidfile)
	}
	if rs.autoRemove && cid != "" && rs.snap != nil && rs.snap.exited {
		err := b.verifyGoneDirect(rs, cid, rs.snap)
		if err == nil {
			return nil
		}
		rs.log.Debug("removal not proven from podman's state; removing with podman", "error", err)
	}
	ids := []string{}
	if cid != "" {
		ids = append(ids, cid)
	} else {
		found, err := b.containersLabelled(ctx, rs.e, nonceLabel+"="+rs.nonce)
		if err != nil {
			return fmt.Errorf("podman: cleanup of run %s unverified: %w", rs.req.RunID, err)
		}
		for _, c := range found {
			ids = append(ids, c.ID)
		}
	}

	var err error
	for try := 0; try < verifyTries; try++ {
		if try > 0 {
			time.Sleep(time.Duration(25<<try) * time.Millisecond)
		}
		var rmErr error
		if len(ids) > 0 {
			// -t 0: no SIGTERM and ten seconds of grace; SIGKILL at once.
			_, rmErr = rs.e.call(ctx, append([]string{"rm", "--force", "--time", "0", "--ignore"}, ids...)...)
		}
		err = b.verifyGone(ctx, rs, ids)
		if err == nil {
			return nil
		}
		if rmErr != nil {
			err = fmt.Errorf("%w; podman rm: %w", err, rmErr)
		}
	}
	return fmt.Errorf("podman: cleanup of run %s unverified: %w", rs.req.RunID, err)
}

// psEntry is one container of `podman ps --format json`.
type psEntry struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Labels map[string]string `json:"Labels"`
}

// listContainers lists every container podman knows: libpod's and, with
// --external, those only in containers/storage.
func listContainers(ctx context.Context, e *engine, filters ...string) ([]psEntry, error) {
	args := []string{"ps", "--all", "--external", "--no-trunc", "--format", "json"}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	out, err := e.call(ctx, args...)
	if err != nil {
		return nil, err
	}
	var list []psEntry
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("podman ps: %w", err)
	}
	return list, nil
}

func (b *backend) containersLabelled(ctx context.Context, e *engine, label string) ([]psEntry, error) {
	list, err := listContainers(ctx, e, "label="+label)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, c := range list {
		if hexID.MatchString(c.ID) {
			out = append(out, c)
		}
	}
	return out, nil
}

// verifyGone proves that nothing of the run's containers (ids) is left:
//
//   - no container in podman's whole list (one snapshot of libpod's
//     database and containers/storage, the data `podman container exists`
//     consults) has one of the IDs, the run's name, or its run or nonce
//     label;
//   - and hostLeftovers finds nothing of them.
func (b *backend) verifyGone(ctx context.Context, rs *runState, ids []string) error {
	var left []string
	list, err := listContainers(ctx, rs.e)
	if err != nil {
		return err
	}
	for _, c := range list {
		switch {
		case contains(ids, c.ID):
			left = append(left, "container "+c.ID)
		case contains(c.Names, rs.name):
			left = append(left, fmt.Sprintf("a container named %s (%s)", rs.name, c.ID))
		case c.Labels[runLabel] == rs.req.RunID:
			left = append(left, fmt.Sprintf("a container labelled %s=%s (%s)", runLabel, rs.req.RunID, c.ID))
		case c.Labels[nonceLabel] == rs.nonce:
			left = append(left, fmt.Sprintf("a container with this run's nonce (%s)", c.ID))
		}
	}
	host, err := b.hostLeftovers(rs, ids)
	if err != nil {
		return err
	}
	if left = append(left, host...); len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// verifyGoneDirect is verifyGone without podman, for container cid of a
// --rm run, from snap (libpod's database, read after podman run exited)
// and containers/storage's container lists read now:
//
//   - snap holds cid's exit status: the file read is podman's live
//     database (see dbSnapshot), so what it lacks, podman lacks;
//   - neither libpod's database (containers, ID and name registries) nor
//     storage's lists have the ID or the run's name, and no container in
//     the database carries the run's run or nonce label;
//   - and hostLeftovers finds nothing (cgroups, mounts, storage
//     directories), as for verifyGone.
func (b *backend) verifyGoneDirect(rs *runState, cid string, snap *dbSnapshot) error {
	if !snap.exited {
		return fmt.Errorf("libpod's database has no exit status of container %s: it does not prove the removal", cid)
	}
	left := slices.Clone(snap.left)
	stored, err := rs.e.state.storageLeftovers(rs.marks(cid))
	if err != nil {
		return err
	}
	host, err := b.hostLeftovers(rs, []string{cid})
	if err != nil {
		return err
	}
	if left = append(append(left, stored...), host...); len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// hostLeftovers lists what of containers ids is left outside podman's
// lists: a cgroup directory <run cgroup>/libpod-<id> in any mounted hierarchy
// (each v1 controller, named hierarchies, the unified one: a cgroup that
// still had a task could not have been removed), a mount in this process's
// (the host's) table naming an ID, or a storage directory of the container
// in podman's graph and run roots.
func (b *backend) hostLeftovers(rs *runState, ids []string) ([]string, error) {
	e := rs.e
	parent := b.cgroupParent
	if rs.cg != nil {
		parent = rs.cg.path
	}
	if len(ids) == 0 {
		return nil, nil
	}
	cgs, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	if len(cgs) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted: cannot check the container's cgroups")
	}
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	var left []string
	for _, id := range ids {
		for _, m := range cgs {
			if err := absent(filepath.Join(m.point, parent, "libpod-"+id)); err != nil {
				left = append(left, "cgroup "+err.Error())
			}
		}
		if mountNaming(mounts, id) {
			left = append(left, "a mount naming "+id)
		}
		for _, root := range []string{e.graphRoot, e.runRoot} {
			if err := absent(filepath.Join(root, e.graphDriver+"-containers", id)); err != nil {
				left = append(left, "storage "+err.Error())
			}
		}
	}
	return left, nil
}

// mountNaming reports whether a mount names id in its mount point, root,
// source or options.
func mountNaming(mounts []*mountinfo.Info, id string) bool {
	for _, m := range mounts {
		for _, f := range []string{m.Mountpoint, m.Root, m.Source, m.Options, m.VFSOptions, m.Optional} {
			if strings.Contains(f, id) {
				return true
			}
		}
	}
	return false
}

// --- orphans ---

// reapOrphans kills and removes this plugin's containers whose owning
// plugin process is gone (it crashed or was killed mid-run, so no one
// enforces their timeout any more). It never touches a container whose
// owner is alive or that has no owner label. It runs once when the plugin
// starts, off the hot path.
func (b *backend) reapOrphans(ctx context.Context) (int, error) {
	e, err := b.engine(ctx)
	if err != nil {
		return 0, nil // unavailable: nothing of ours can be running
	}
	list, err := b.containersLabelled(ctx, e, ownerLabel)
	if err != nil {
		return 0, err
	}
	var errs []error
	reaped := 0
	live := make([]string, 0, len(list))
	for _, c := range list {
		live = append(live, c.ID)
	}
	removeStaleCIDFiles(e.stateDir, live)
	// The run cgroups of dead plugin processes, once the loop below has
	// removed the orphaned containers in them.
	defer removeStaleRunCgroups(b.cgroupParent)
	for _, c := range list {
		owner := c.Labels[ownerLabel]
		if owner == "" || alive(owner) {
			continue
		}
		b.log.Warn("removing a container orphaned by a dead plugin process", "container", c.ID, "names", c.Names, "owner", owner)
		if _, err := e.call(ctx, "rm", "--force", "--time", "0", "--ignore", c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped++
	}
	return reaped, errors.Join(errs...)
}

// staleAfter is the age after which a cidfile whose container is gone is
// left over from a plugin process that died.
const staleAfter = time.Minute

// removeStaleCIDFiles deletes the cidfiles in dir that are older than
// staleAfter and name no container in live (a run removes its own cidfile;
// these are from plugin processes that died).
func removeStaleCIDFiles(dir string, live []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), "cid-") {
			continue
		}
		p := filepath.Join(dir, ent.Name())
		fi, err := ent.Info()
		if err != nil || time.Since(fi.ModTime()) < staleAfter || contains(live, readCID(p)) {
			continue
		}
		_ = os.Remove(p)
	}
}

// processID identifies a process across pid reuse: "<pid>:<start time>".
func processID(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.Itoa(pid) + ":" + f[19], nil
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
