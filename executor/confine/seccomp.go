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

// MetadataSyscalls change a file's mode, owner, timestamps, extended
// attributes (ACLs among them) or inode flags. Landlock does not mediate
// any of them, and their file is a path or a descriptor, which seccomp
// cannot read: every one fails with EPERM for every confined tool (see
// the package documentation for why, and for the one form of utimensat
// that stays).
var MetadataSyscalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat",
	"setxattr", "lsetxattr", "fsetxattr", "setxattrat",
	"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"file_setattr",
}

// newerSyscalls are system calls younger than libseccomp releases still
// shipped (2.5.4 knows none of setxattrat, removexattrat and file_setattr;
// fchmodat2 only where distributions backported it): when libseccomp does
// not know the name, the rule uses the number of the build's architecture
// from golang.org/x/sys. A name in neither place fails the filter (and so
// every confined run), never silently drops the rule.
var newerSyscalls = map[string]int{
	"fchmodat2":     unix.SYS_FCHMODAT2,
	"setxattrat":    unix.SYS_SETXATTRAT,
	"removexattrat": unix.SYS_REMOVEXATTRAT,
	"file_setattr":  unix.SYS_FILE_SETATTR,
}

// Inode-flag ioctls (chattr: FS_IOC_SETFLAGS and its 32-bit twin,
// FS_IOC_FSSETXATTR, FS_IOC_SETVERSION and its twin): the file's owner may
// use them on any descriptor, even one opened read-only.
const (
	fsIOCSetFlags     = unix.FS_IOC_SETFLAGS
	fsIOC32SetFlags   = 0x40046602 // _IOW('f', 2, int)
	fsIOCFSSetXattr   = 0x401c5820 // _IOW('X', 32, struct fsxattr)
	fsIOCSetVersion   = 0x40087602 // _IOW('v', 2, long)
	fsIOC32SetVersion = 0x40047602 // _IOW('v', 2, int)
)

// deniedIoctls fail with EPERM: terminal input injection (TIOCSTI,
// TIOCLINUX) and the inode-flag ioctls.
var deniedIoctls = []uint64{unix.TIOCSTI, unix.TIOCLINUX,
	fsIOCSetFlags, fsIOC32SetFlags, fsIOCFSSetXattr, fsIOCSetVersion, fsIOC32SetVersion}

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
