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
