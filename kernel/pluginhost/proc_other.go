//go:build unix && !linux

package pluginhost

import (
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts a plugin in its own process group. Without Pdeathsig,
// plugins rely on the sdk's parent watchdog to exit when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// execPath is the path under which exec runs exactly the open file f
// (fdescfs: /dev/fd/<n> opens the file the descriptor refers to).
func execPath(f *os.File) string { return "/dev/fd/" + strconv.Itoa(int(f.Fd())) }
