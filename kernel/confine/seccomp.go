package confine

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DeniedSyscalls fail with EPERM for every confined tool.
var DeniedSyscalls = []string{
	// other processes' memory and files
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	// mounts, root and namespaces
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "unshare", "setns",
	// kernel attack surface and kernel state
	"bpf", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "fanotify_init",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"swapon", "swapoff", "reboot", "acct", "syslog", "iopl", "ioperm",
	"sethostname", "setdomainname", "quotactl", "quotactl_fd", "vhangup", "uselib",
}

// compiled caches the BPF program of each network setting: libseccomp
// compiles once per process.
var compiled struct {
	sync.Mutex
	prog map[bool][]unix.SockFilter
}

// filterProgram returns the compiled BPF program for network.
func filterProgram(network bool) ([]unix.SockFilter, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if p, ok := compiled.prog[network]; ok {
		return p, nil
	}
	prog, err := compileFilter(network)
	if err != nil {
		return nil, err
	}
	if compiled.prog == nil {
		compiled.prog = map[bool][]unix.SockFilter{}
	}
	compiled.prog[network] = prog
	return prog, nil
}

// loadFilter attaches prog to the calling thread only (no TSYNC: the rest
// of agentnode stays unfiltered). The thread must have no_new_privs set.
func loadFilter(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}
