// Package metaattack holds the attacks a host tool makes on what Landlock
// does not mediate: the metadata of files it can name (mode, owner,
// timestamps, extended attributes, inode flags) and the resource limits of
// other processes, its parent among them. The attacker programs of
// executor/hostexec (testdata/escape) and of the attack suite
// (test/attack/hostmeta) run them confined, and their tests run them
// unconfined as the control.
//
// Each attack makes exactly the system call it is named after (raw, not
// through a libc-style wrapper that could pick another one), takes one
// parameter, a path or a pid ("ppid" is the parent), and returns the
// kernel's error: nil when the attack went through. The metadata attacks
// aim to make a file setuid and world-writable, backdate it, or replace
// (or remove) its xattr Name.
package metaattack

import (
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Name and Value are the extended attribute the xattr attacks set
// (removexattr* remove Name).
const (
	Name  = "user.agentnode"
	Value = "pwned"
)

// Mode is what the chmod attacks ask for: setuid and writable by all.
const Mode = 0o4777

// Checks are the attacks by name.
var Checks = map[string]func(param string) error{
	"fchmodat": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_FCHMODAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), Mode, 0, 0, 0))
	},
	"fchmodat2": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_FCHMODAT2, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), Mode, 0, 0, 0))
	},
	"fchmod": func(p string) error {
		return withFD(p, func(fd uintptr) error { return errno(unix.Syscall(unix.SYS_FCHMOD, fd, Mode, 0)) })
	},
	"fchownat": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_FCHOWNAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), uid(), gid(), 0, 0))
	},
	"fchown": func(p string) error {
		return withFD(p, func(fd uintptr) error { return errno(unix.Syscall(unix.SYS_FCHOWN, fd, uid(), gid())) })
	},
	// explicit times through a path, "now" through a path, explicit times
	// through a descriptor (opened read-only), and "now" through a
	// descriptor (futimens(fd, NULL): the one form the filter keeps)
	"utimensat": func(p string) error {
		ts := backdated()
		return errno(unix.Syscall6(unix.SYS_UTIMENSAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0))
	},
	"utimensat_now": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_UTIMENSAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), 0, 0, 0, 0))
	},
	"futimens": func(p string) error {
		return withFD(p, func(fd uintptr) error {
			ts := backdated()
			return errno(unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0))
		})
	},
	"futimens_now": func(p string) error {
		return withFD(p, func(fd uintptr) error { return errno(unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, 0, 0, 0, 0)) })
	},
	"setxattr":  func(p string) error { return setxattrLike(unix.SYS_SETXATTR, p) },
	"lsetxattr": func(p string) error { return setxattrLike(unix.SYS_LSETXATTR, p) },
	"fsetxattr": func(p string) error {
		return withFD(p, func(fd uintptr) error {
			val := []byte(Value)
			return errno(unix.Syscall6(unix.SYS_FSETXATTR, fd, uintptr(unsafe.Pointer(cstr(Name))), uintptr(unsafe.Pointer(&val[0])),
				uintptr(len(val)), 0, 0))
		})
	},
	"setxattrat": func(p string) error {
		path, name, val := cstr(p), cstr(Name), []byte(Value)
		// Nothing is called between taking val's address and the system
		// call, so val cannot move in between.
		args := &xattrArgs{value: uint64(uintptr(unsafe.Pointer(&val[0]))), size: uint32(len(val))}
		err := errno(unix.Syscall6(unix.SYS_SETXATTRAT, atFDCWD, uintptr(unsafe.Pointer(path)), 0,
			uintptr(unsafe.Pointer(name)), uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args)))
		runtime.KeepAlive(val) // args holds its address as an integer
		return err
	},
	"removexattr": func(p string) error {
		return errno(unix.Syscall(unix.SYS_REMOVEXATTR, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(cstr(Name))), 0))
	},
	"lremovexattr": func(p string) error {
		return errno(unix.Syscall(unix.SYS_LREMOVEXATTR, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(cstr(Name))), 0))
	},
	"fremovexattr": func(p string) error {
		return withFD(p, func(fd uintptr) error {
			return errno(unix.Syscall(unix.SYS_FREMOVEXATTR, fd, uintptr(unsafe.Pointer(cstr(Name))), 0))
		})
	},
	"removexattrat": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_REMOVEXATTRAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), 0, uintptr(unsafe.Pointer(cstr(Name))), 0, 0))
	},
	// no-dump (backups skip the file) through file_setattr (Linux 6.17)
	// and through chattr's ioctl on a descriptor opened read-only
	"file_setattr": func(p string) error {
		a := &fileAttr{xflags: fsXflagNodump}
		return errno(unix.Syscall6(unix.SYS_FILE_SETATTR, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(a)),
			unsafe.Sizeof(*a), 0, 0))
	},
	"chattr": func(p string) error {
		return withFD(p, func(fd uintptr) error {
			flags, err := unix.IoctlGetUint32(int(fd), unix.FS_IOC_GETFLAGS)
			if err != nil {
				return err
			}
			flags |= fsNodumpFL
			return errno(unix.Syscall(unix.SYS_IOCTL, fd, unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags))))
		})
	},
	// resource limits of another process (E2) or of the parent (E3)
	"prlimit_cpu":    func(p string) error { return prlimit(p, unix.RLIMIT_CPU, &unix.Rlimit{Cur: 1, Max: 1}) },
	"prlimit_nofile": func(p string) error { return prlimit(p, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: 3}) },
	"prlimit_fsize":  prlimitFsize,
	"prlimit_read":   func(p string) error { return prlimit(p, unix.RLIMIT_NOFILE, nil) },
	// its own limits: through pid 0 (what libc and Go do), through its
	// own pid, and through setrlimit
	"prlimit_self":   func(string) error { return lowerCore(0) },
	"prlimit_ownpid": func(string) error { return lowerCore(os.Getpid()) },
	"setrlimit": func(string) error {
		r := new(unix.Rlimit)
		if err := unix.Getrlimit(unix.RLIMIT_CORE, r); err != nil {
			return err
		}
		r.Cur = 0
		return errno(unix.RawSyscall(unix.SYS_SETRLIMIT, unix.RLIMIT_CORE, uintptr(unsafe.Pointer(r)), 0))
	},
}

// atFDCWD is AT_FDCWD as a system call argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

func uid() uintptr { return uintptr(os.Getuid()) }
func gid() uintptr { return uintptr(os.Getgid()) }

func errno(_, _ uintptr, e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// cstr is s NUL-terminated. Its address goes to a system call as
// uintptr(unsafe.Pointer(cstr(s))) in the call expression itself, which
// keeps it alive for the call.
func cstr(s string) *byte {
	b, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// withFD opens path read-only (what Landlock lets a tool do with the
// system's files and its package) and calls f with the descriptor.
func withFD(path string, f func(fd uintptr) error) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(uintptr(fd))
}

// backdated is a timespec pair for 1 January 1970.
func backdated() [2]unix.Timespec { return [2]unix.Timespec{{Sec: 1}, {Sec: 1}} }

// setxattrLike makes nr(path, Name, Value, len, 0).
func setxattrLike(nr uintptr, p string) error {
	val := []byte(Value)
	return errno(unix.Syscall6(nr, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(cstr(Name))), uintptr(unsafe.Pointer(&val[0])), uintptr(len(val)), 0, 0))
}

// xattrArgs is struct xattr_args (include/uapi/linux/xattr.h).
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// fileAttr is struct file_attr (include/uapi/linux/fs.h).
type fileAttr struct {
	xflags                                uint64
	extsize, nextents, projid, cowextsize uint32
}

// fsXflagNodump is FS_XFLAG_NODUMP, fsNodumpFL FS_NODUMP_FL (chattr +d).
const (
	fsXflagNodump = 0x80
	fsNodumpFL    = 0x40
)

// Pid is the pid a parameter names: a number, or "ppid" for the parent.
func Pid(p string) int {
	if p == "ppid" {
		return os.Getppid()
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		panic("metaattack: not a pid: " + p)
	}
	return n
}

// prlimit sets (or, with set nil, reads) a limit of the process p names.
func prlimit(p string, resource int, set *unix.Rlimit) error {
	var old unix.Rlimit
	return unix.Prlimit(Pid(p), resource, set, &old)
}

// prlimitFsize sets the file size limit of the process p names to 0
// (soft; the hard limit stays as it was, so an unconfined control run
// against a non-root parent can be undone).
func prlimitFsize(p string) error {
	var old unix.Rlimit
	if err := unix.Prlimit(Pid(p), unix.RLIMIT_FSIZE, nil, &old); err != nil {
		return err
	}
	return unix.Prlimit(Pid(p), unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: old.Max}, nil)
}

// lowerCore sets the soft core size limit of pid (0: the caller) to 0.
func lowerCore(pid int) error {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &r); err != nil {
		return err
	}
	return unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: r.Max}, nil)
}
