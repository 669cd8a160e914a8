//go:build unix && !linux

package pluginhost

import "syscall"

// sysProcAttr puts a plugin in its own process group. Without Pdeathsig,
// plugins rely on the sdk's parent watchdog to exit when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
