package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// runtimeEnv tells the probe which runtime it runs under (Config.Runtime):
// under gVisor the checks that read what a kernel shows expect gVisor's.
const runtimeEnv = "SANDBOXTEST_RUNTIME"

// gvisorChecks prove the second kernel of Config.Runtime gvisor; under any
// other runtime they report "not applicable".
var gvisorChecks = []check{
	gvisorCheck("gvisor-kernel", "under gVisor the kernel the process sees is not the host's: /proc/version differs from the host's and uname does not report the host's release",
		func(h *harness) []string { return []string{h.hostVersion} }),
	gvisorCheck("gvisor-enosys", "under gVisor a system call the profile allows and the host kernel implements (remap_file_pages, futex_waitv, cachestat, mseal) answers ENOSYS: it reached a kernel that does not have it",
		func(h *harness) []string { return []string{h.hostENOSYS} }),
}

// gvisorCheck is a probeCheck that applies only under gVisor.
func gvisorCheck(name, what string, args func(h *harness) []string) check {
	return probeCheck(name, what, func(h *harness) ([]string, string) {
		if h.cfg.Runtime != sandbox.RuntimeGVisor {
			return nil, fmt.Sprintf("not applicable: the runtime is %q, not gvisor", h.cfg.Runtime)
		}
		return args(h), ""
	})
}

// measureHostKernel records what the host's kernel says, the gvisor-*
// checks' controls: /proc/version and the ENOSYS candidates' answers
// (the probe run unconfined, "probe enosys-host").
func (h *harness) measureHostKernel(ctx context.Context, probe string) {
	if b, err := os.ReadFile("/proc/version"); err == nil {
		h.hostVersion = strings.TrimSpace(string(b))
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, probe, "enosys-host")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		h.hostENOSYS = fmt.Sprintf("unknown:probe enosys-host on the host: %v: %s", err, strings.TrimSpace(stderr.String()))
		return
	}
	h.hostENOSYS = strings.TrimSpace(string(out))
}

// gvisorSandboxes lists the host processes of gVisor sandboxes: runsc's
// "runsc-sandbox" (the Sentry), which runs every task of its sandbox, in
// the sandbox's cgroups.
func gvisorSandboxes() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(cmd, []byte("runsc-sandbox\x00")) {
			out[pid] = true
		}
	}
	return out
}

// newGVisorSandbox is the one gVisor sandbox started since before (a
// gvisorSandboxes result): the run's, or 0 with the reason when there is
// not exactly one.
func newGVisorSandbox(before map[int]bool) (int, string) {
	var fresh []int
	for pid := range gvisorSandboxes() {
		if !before[pid] {
			fresh = append(fresh, pid)
		}
	}
	if len(fresh) != 1 {
		return 0, fmt.Sprintf("%d gVisor sandboxes (runsc-sandbox) started during the run, not exactly one: %v", len(fresh), fresh)
	}
	return fresh[0], ""
}

// cgroupCPUUsage is the CPU time all processes of pid's cgroup have used:
// cpuacct.usage (cgroup v1) or cpu.stat usage_usec (v2). Under gVisor the
// tasks' own accounting (getrusage inside) is the Sentry's view, not the
// host's: the host's cgroup says what the sandbox really got.
func cgroupCPUUsage(pid int) (time.Duration, error) {
	paths, err := cgroups.ParseCgroupFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return 0, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	if p, ok := paths["cpuacct"]; ok {
		mnt, root, err := cgroups.FindCgroupMountpointAndRoot("", "cpuacct")
		if err != nil {
			return 0, fmt.Errorf("finding the cpuacct hierarchy: %w", err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return 0, fmt.Errorf("the cpuacct cgroup %s of pid %d is outside %s", p, pid, mnt)
		}
		ns, err := fscommon.GetCgroupParamUint(filepath.Join(mnt, rel), "cpuacct.usage")
		return time.Duration(ns), err
	}
	if p, ok := paths[""]; ok {
		mnt := cgroupRoot
		if !cgroups.IsCgroup2UnifiedMode() {
			mnt = filepath.Join(cgroupRoot, "unified")
		}
		us, err := fscommon.GetValueByKey(filepath.Join(mnt, p), "cpu.stat", "usage_usec")
		return time.Duration(us) * time.Microsecond, err
	}
	return 0, fmt.Errorf("pid %d is in no cgroup of the cpuacct controller", pid)
}

// checkPids is pids-limit: the probe's fork bomb must stop at Limits.Pids.
// Under gVisor (its ptrace platform) every address space the bomb makes
// costs host tasks of the Sentry, in the sandbox's pids cgroup; when that
// cgroup is full the Sentry cannot start one and dies, taking the sandbox
// with it, before the probe can report. So under gVisor the suite watches
// the run's Sentry on the host and also passes a run that ended by itself
// (not timed out, cleanup verified) with no result when the Sentry's pids
// cgroup had pids.max = Limits.Pids and counted the limit being hit
// (pids.events max > 0): the limit held, on the host.
func checkPids(ctx context.Context, h *harness) outcome {
	const name = "pids-limit"
	opts := runOpts{args: []string{name, itoa(h.cfg.Limits.Pids)}}
	if h.cfg.Runtime != sandbox.RuntimeGVisor {
		return judge(name, h.exec(ctx, name, opts), false)
	}
	before := gvisorSandboxes()
	stop := make(chan struct{})
	seen := make(chan pidsWatch, 1)
	go func() { seen <- watchGVisorPids(before, stop) }()
	r := h.exec(ctx, name, opts)
	close(stop)
	w := <-seen
	if _, found := parseResult(r.stdout.bytes(), name); found || r.err != nil || len(r.leftovers)+len(r.traces) > 0 {
		return judge(name, r, false)
	}
	switch {
	case r.resp.TimedOut || !r.resp.CleanupVerified:
		return fail("the probe printed no result and the run did not end by itself: %s", r.describe())
	case w.err != "":
		return fail("the probe printed no result (%s) and the suite could not read the gVisor sandbox's pids cgroup: %s", r.describe(), w.err)
	case w.max != h.cfg.Limits.Pids:
		return fail("the probe printed no result (%s); the gVisor sandbox's pids cgroup %s has pids.max %d, not Limits.Pids %d", r.describe(), w.dir, w.max, h.cfg.Limits.Pids)
	case w.events == 0:
		return fail("the probe printed no result (%s); the gVisor sandbox's pids cgroup %s (pids.max %d) never counted the limit being hit", r.describe(), w.dir, w.max)
	}
	return pass("under gVisor the fork bomb filled the sandbox's pids cgroup %s (pids.max %d, hit %d times, at most %d tasks seen) and the Sentry ended the run: %s",
		w.dir, w.max, w.events, w.peak, r.describe())
}

// pidsWatch is what watchGVisorPids saw of the run's Sentry's pids cgroup.
type pidsWatch struct {
	dir               string
	max, events, peak int64
	err               string
}

// watchGVisorPids finds the gVisor sandbox started after before and reads
// its pids cgroup (pids.max, pids.events, pids.current) until stop, keeping
// the last values it could read: the cgroup goes with the sandbox.
func watchGVisorPids(before map[int]bool, stop <-chan struct{}) pidsWatch {
	w := pidsWatch{err: "no gVisor sandbox (runsc-sandbox) started during the run"}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return w
		case <-tick.C:
		}
		if w.dir == "" {
			pid, why := newGVisorSandbox(before)
			if pid == 0 {
				if !strings.HasPrefix(why, "0 ") {
					w.err = why
				}
				continue
			}
			dir, err := pidsCgroupDir(pid)
			if err != nil {
				w.err = err.Error()
				continue
			}
			w.dir, w.err = dir, ""
		}
		if m, err := fscommon.GetCgroupParamString(w.dir, "pids.max"); err == nil {
			w.max, _ = strconv.ParseInt(m, 10, 64)
		}
		if n, err := fscommon.GetValueByKey(w.dir, "pids.events", "max"); err == nil {
			w.events = int64(n)
		}
		if n, err := fscommon.GetCgroupParamUint(w.dir, "pids.current"); err == nil && int64(n) > w.peak {
			w.peak = int64(n)
		}
	}
}

// pidsCgroupDir is the host directory of pid's cgroup of the pids
// controller.
func pidsCgroupDir(pid int) (string, error) {
	paths, err := cgroups.ParseCgroupFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	if p, ok := paths["pids"]; ok {
		mnt, root, err := cgroups.FindCgroupMountpointAndRoot("", "pids")
		if err != nil {
			return "", fmt.Errorf("finding the pids hierarchy: %w", err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("the pids cgroup %s of pid %d is outside %s", p, pid, mnt)
		}
		return filepath.Join(mnt, rel), nil
	}
	if p, ok := paths[""]; ok {
		mnt := cgroupRoot
		if !cgroups.IsCgroup2UnifiedMode() {
			mnt = filepath.Join(cgroupRoot, "unified")
		}
		return filepath.Join(mnt, p), nil
	}
	return "", fmt.Errorf("pid %d is in no cgroup of the pids controller", pid)
}
