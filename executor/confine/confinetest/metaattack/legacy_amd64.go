package metaattack

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls only older ABIs have (arm64 and other new ports have the *at
// forms alone).
func init() {
	Checks["chmod"] = func(p string) error {
		return errno(unix.Syscall(unix.SYS_CHMOD, uintptr(unsafe.Pointer(cstr(p))), Mode, 0))
	}
	Checks["chown"] = func(p string) error {
		return errno(unix.Syscall(unix.SYS_CHOWN, uintptr(unsafe.Pointer(cstr(p))), uid(), gid()))
	}
	Checks["lchown"] = func(p string) error {
		return errno(unix.Syscall(unix.SYS_LCHOWN, uintptr(unsafe.Pointer(cstr(p))), uid(), gid()))
	}
	Checks["utime"] = func(p string) error {
		t := unix.Utimbuf{Actime: 1, Modtime: 1}
		return errno(unix.Syscall(unix.SYS_UTIME, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(&t)), 0))
	}
	Checks["utimes"] = func(p string) error {
		tv := [2]unix.Timeval{{Sec: 1}, {Sec: 1}}
		return errno(unix.Syscall(unix.SYS_UTIMES, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(&tv[0])), 0))
	}
	Checks["futimesat"] = func(p string) error {
		tv := [2]unix.Timeval{{Sec: 1}, {Sec: 1}}
		return errno(unix.Syscall(unix.SYS_FUTIMESAT, atFDCWD, uintptr(unsafe.Pointer(cstr(p))), uintptr(unsafe.Pointer(&tv[0]))))
	}
}
