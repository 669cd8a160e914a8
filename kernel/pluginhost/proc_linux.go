package pluginhost

import "syscall"

// sysProcAttr puts a plugin in its own process group, so Close can kill it
// with everything it started, and asks the kernel to SIGKILL it when the
// launching thread (see launch.go) dies, i.e. when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
