package confine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// dropCapabilities empties the calling thread's capability bounding set
// (when it holds CAP_SETPCAP) and its ambient, inheritable, effective and
// permitted sets. A process forked from the thread and exec'd has no
// capabilities, even as root: root's permitted set after execve is limited
// by the bounding set. All of these are per-thread: the rest of agentnode
// keeps its capabilities.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c < 64; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			if err != nil {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil &&
		!errors.Is(err, unix.EINVAL) { // EINVAL: a kernel without ambient capabilities
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	// A uid-0 process regains its bounding set at exec: refuse to go on
	// when that set could not be emptied.
	if unix.Geteuid() == 0 || unix.Getuid() == 0 {
		for c := 0; c < 64; c++ {
			v, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0)
			if errno == unix.EINVAL {
				break
			}
			if errno != 0 || v != 0 {
				return fmt.Errorf("capability %d is still in the bounding set of a root process (%v)", c, errno)
			}
		}
	}
	return nil
}
