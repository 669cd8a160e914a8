//go:build cgo

package confine

import (
	"testing"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// TestSyscallNumbers: every call the filter names resolves, to the
// kernel's number for this architecture, whether this libseccomp knows it
// or not (the newer ones then come from newerSyscalls); a name known to
// neither fails instead of dropping its rule.
func TestSyscallNumbers(t *testing.T) {
	kernel := map[string]int{
		"fchmod": unix.SYS_FCHMOD, "fchmodat": unix.SYS_FCHMODAT, "fchmodat2": unix.SYS_FCHMODAT2,
		"fchown": unix.SYS_FCHOWN, "fchownat": unix.SYS_FCHOWNAT, "utimensat": unix.SYS_UTIMENSAT,
		"setxattr": unix.SYS_SETXATTR, "lsetxattr": unix.SYS_LSETXATTR, "fsetxattr": unix.SYS_FSETXATTR,
		"setxattrat": unix.SYS_SETXATTRAT, "removexattr": unix.SYS_REMOVEXATTR,
		"lremovexattr": unix.SYS_LREMOVEXATTR, "fremovexattr": unix.SYS_FREMOVEXATTR,
		"removexattrat": unix.SYS_REMOVEXATTRAT, "file_setattr": unix.SYS_FILE_SETATTR,
		"prlimit64": unix.SYS_PRLIMIT64,
	}
	maj, minor, micro := seccomp.GetLibraryVersion()
	for _, name := range append(append([]string{"utimensat", "prlimit64"}, MetadataSyscalls...), DeniedSyscalls...) {
		sc, err := syscallNumber(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, lerr := seccomp.GetSyscallFromName(name); lerr != nil {
			t.Logf("%s: unknown to libseccomp %d.%d.%d, number %d from x/sys", name, maj, minor, micro, sc)
		}
		if want, ok := kernel[name]; ok && int(sc) != want {
			t.Errorf("%s resolves to %d, the kernel's number is %d", name, sc, want)
		}
	}
	if _, err := syscallNumber("no_such_syscall"); err == nil {
		t.Error("an unknown name resolved")
	}
}
