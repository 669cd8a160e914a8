package pluginhost

import (
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts a plugin in its own process group, so Close can kill it
// with everything it started, and asks the kernel to SIGKILL it when the
// launching thread (see launch.go) dies, i.e. when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// execPath is the path under which exec runs exactly the open file f:
// /proc/self/fd/<n> is a link to the open file itself, not to a path.
func execPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }
