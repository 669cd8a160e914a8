package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

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
