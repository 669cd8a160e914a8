package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/moby/sys/mountinfo"
)

const (
	// cleanupTimeout bounds removing one run's container and proving it
	// gone.
	cleanupTimeout = 60 * time.Second
	// removeAttempts is how often a failing remove is tried.
	removeAttempts = 5
	// traceWait is how long a mount or cgroup of a removed container may
	// take to disappear from the host.
	traceWait = 3 * time.Second
	// cgroupRoot is where the cgroup hierarchies are mounted.
	cgroupRoot = "/sys/fs/cgroup"
	// cgroupDepth bounds the search for a container's cgroup directories.
	cgroupDepth = 6
)

// errCleanup marks a cleanup that could not be proven.
var errCleanup = errors.New("container cleanup not verified")

// removeAndVerify force-removes run runID's container (by cid; by name
// when the create never returned an id) and every container labelled with
// the run, then proves they are gone: inspect by id and by name both say
// "no such container", no container carries the run's label, and no mount
// (the container id, its root file system mergedDir) or cgroup named after
// the id is left on the host. A nil error is the proof Run reports as
// CleanupVerified. It works on a fresh context: cleanup happens also when
// the run's ctx is cancelled.
func (b *backend) removeAndVerify(runID, cid, mergedDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cli, err := b.client(ctx)
	if err != nil {
		return fmt.Errorf("docker: run %s: %w: %w", runID, errCleanup, err)
	}
	name := namePrefix + runID
	target := cid
	if target == "" {
		target = name
	}
	if err := remove(ctx, cli, target); err != nil {
		return fmt.Errorf("docker: run %s: %w: %w", runID, errCleanup, err)
	}
	ids := []string{cid}
	for round := 0; ; round++ {
		left, err := engineLeftovers(ctx, cli, runID, cid)
		if err != nil {
			return fmt.Errorf("docker: run %s: %w: %w", runID, errCleanup, err)
		}
		if len(left) == 0 {
			break
		}
		if round > 0 {
			return fmt.Errorf("docker: run %s: %w: still in the engine after removal: %s", runID, errCleanup, strings.Join(left, ", "))
		}
		// Created under our label or name by a create whose answer we
		// never saw: ours too.
		for _, id := range left {
			if err := remove(ctx, cli, id); err != nil {
				return fmt.Errorf("docker: run %s: %w: %w", runID, errCleanup, err)
			}
			ids = append(ids, id)
		}
	}
	if err := hostTraces(ids, mergedDir); err != nil {
		return fmt.Errorf("docker: run %s: %w: %w", runID, errCleanup, err)
	}
	return nil
}

// remove force-removes one container (with its anonymous volumes); one
// that is already gone is fine.
func remove(ctx context.Context, cli *client.Client, target string) error {
	var err error
	for attempt := 0; attempt < removeAttempts; attempt++ {
		_, err = cli.ContainerRemove(ctx, target, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		// "removal already in progress" and transient engine errors.
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", target, err)
}

// engineLeftovers asks the engine, three ways, whether anything of the run
// is left: inspect by id, inspect by name, and a list of all containers
// (running or not) with the run's label. It returns their ids.
func engineLeftovers(ctx context.Context, cli *client.Client, runID, cid string) ([]string, error) {
	var left []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			left = append(left, id)
		}
	}
	for _, ref := range []string{cid, namePrefix + runID} {
		if ref == "" {
			continue
		}
		r, err := cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		switch {
		case err == nil:
			add(r.Container.ID)
		case !cerrdefs.IsNotFound(err):
			return nil, fmt.Errorf("inspecting %s: %w", ref, err)
		}
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", runLabel+"="+runID),
	})
	if err != nil {
		return nil, fmt.Errorf("listing containers labelled %s=%s: %w", runLabel, runID, err)
	}
	for _, c := range list.Items {
		add(c.ID)
	}
	return left, nil
}

// hostTraces waits up to traceWait for the host to show no mount and no
// cgroup of the containers ids (and no mount of mergedDir). It sees what
// the engine leaves in this host's mount namespace and cgroup hierarchies;
// an engine elsewhere (another VM behind a forwarded socket) leaves nothing
// here to see.
func hostTraces(ids []string, mergedDir string) error {
	var keys []string
	for _, id := range ids {
		if len(id) >= 12 {
			keys = append(keys, id)
		}
	}
	if mergedDir != "" {
		keys = append(keys, mergedDir)
	}
	if len(keys) == 0 {
		return nil
	}
	deadline := time.Now().Add(traceWait)
	for {
		traces := mountsMentioning(keys)
		traces = append(traces, cgroupsNamed(ids)...)
		if len(traces) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("left on the host: %s", strings.Join(traces, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountsMentioning returns the mount points of this process's mount
// namespace whose root or mount point contains one of keys.
func mountsMentioning(keys []string) []string {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return []string{"mountinfo unreadable: " + err.Error()}
	}
	var found []string
	for _, m := range ms {
		for _, k := range keys {
			if strings.Contains(m.Root, k) || strings.Contains(m.Mountpoint, k) {
				found = append(found, "mount "+m.Mountpoint)
				break
			}
		}
	}
	return found
}

// cgroupsNamed returns the cgroup directories, in every hierarchy, whose
// name contains one of ids (Docker names them <id> with the cgroupfs
// driver and docker-<id>.scope with systemd's).
func cgroupsNamed(ids []string) []string {
	var found []string
	_ = filepath.WalkDir(cgroupRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // vanished, unreadable, or a control file
		}
		for _, id := range ids {
			if id != "" && strings.Contains(d.Name(), id) {
				found = append(found, "cgroup "+p)
				return fs.SkipDir
			}
		}
		if strings.Count(strings.TrimPrefix(p, cgroupRoot), "/") >= cgroupDepth {
			return fs.SkipDir
		}
		return nil
	})
	return found
}
