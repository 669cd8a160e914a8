//go:build unix

package pluginhost

import (
	"errors"
	"syscall"
)

// killGroup sends SIGKILL to the process group led by pid. pid must be a
// plugin started with Setpgid; values below 2 are ignored so that a missing
// pid can never turn into kill(0) (our own group) or kill(-1) (everything).
func killGroup(pid int) error {
	if pid < 2 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
