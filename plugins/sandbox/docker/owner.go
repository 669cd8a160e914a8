package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
)

// processOwner identifies a process of this host across pid reuse and
// across pid namespaces: "<boot id>/<pid namespace>/<pid>:<start time>".
func processOwner(pid int) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", err
	}
	start, err := startTime(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s/%d:%s", strings.TrimSpace(string(boot)), ns, pid, start), nil
}

// startTime is field 22 of /proc/<pid>/stat (clock ticks after boot).
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f[19], nil
}

// orphaned reports whether owner names a process of this boot and this pid
// namespace that no longer runs. An owner from another boot or another pid
// namespace (another machine or container sharing the engine) is never
// judged: its process may be alive where we cannot see it.
func orphaned(owner, self string) bool {
	oPrefix, oProc, ok1 := cutLast(owner, "/")
	sPrefix, _, ok2 := cutLast(self, "/")
	if !ok1 || !ok2 || oPrefix != sPrefix {
		return false
	}
	pidStr, _, ok := strings.Cut(oProc, ":")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	now, err := processOwner(pid)
	return err != nil || now != owner
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// reapOrphans kills and removes, and proves removed, the containers of this
// backend whose owning plugin process died mid-run (crashed or was killed:
// no one enforces their timeout any more). It never touches a container
// whose owner is alive or cannot be judged. It runs once when the plugin
// starts, off the hot path.
func (b *backend) reapOrphans(ctx context.Context) (reaped int, err error) {
	if b.owner == "" {
		return 0, nil
	}
	cli, err := b.client(ctx)
	if err != nil {
		return 0, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", ownerLabel),
	})
	if err != nil {
		return 0, fmt.Errorf("docker: listing containers: %w", err)
	}
	var errs []error
	for _, c := range list.Items {
		runID := c.Labels[runLabel]
		if !orphaned(c.Labels[ownerLabel], b.owner) || validateRunID(runID) != nil {
			continue
		}
		b.log.Warn("removing a container orphaned by a dead plugin process", "run_id", runID, "id", c.ID, "owner", c.Labels[ownerLabel])
		if err := b.removeAndVerify(runID, c.ID, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped++
	}
	if len(errs) > 0 {
		return reaped, fmt.Errorf("docker: orphaned containers: %w", errors.Join(errs...))
	}
	return reaped, nil
}

// reapTarget is what a run hands the plugin's reaper (sdk/sandbox/reaper):
// the engine and the container.
type reapTarget struct {
	Host  string `json:"host"` // unix:///absolute/path of the engine socket
	RunID string `json:"run_id"`
	ID    string `json:"id"` // the container's full ID
}

// containerIDPattern is a container's full ID.
var containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// reapRun is the reaper's Reap (it runs in the reaper process): kill the
// run's container, and when final (the plugin is gone) remove it and prove
// it gone, as Run would have. A container that is already gone is fine.
func reapRun(_ context.Context, raw json.RawMessage, final bool) error {
	var t reapTarget
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("docker: reap target: %w", err)
	}
	if err := validateRunID(t.RunID); err != nil {
		return fmt.Errorf("docker: reap target: %w", err)
	}
	if !containerIDPattern.MatchString(t.ID) {
		return fmt.Errorf("docker: reap target: container id %q", t.ID)
	}
	ep, err := parseHost(t.Host, "reaper")
	if err != nil {
		return fmt.Errorf("docker: reap target: %w", err)
	}
	b := newBackend(nil, ep, nil)
	b.kill(t.ID, t.RunID)
	if !final {
		return nil
	}
	return b.removeAndVerify(t.RunID, t.ID, "")
}
