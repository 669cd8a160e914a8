package confine

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Readiness is what this kernel and this build of agentnode can do to
// confine a host tool.
type Readiness struct {
	// LandlockABI is the kernel's Landlock ABI, 0 without Landlock.
	LandlockABI int
	// Seccomp is nil when the tool's seccomp filters compile (a cgo build
	// with libseccomp) and the kernel takes seccomp filters with the
	// actions they use; else why not.
	Seccomp error
}

// ErrSeccompUnavailable marks a kernel or build that cannot filter a
// tool's system calls.
var ErrSeccompUnavailable = errors.New("seccomp filtering unavailable")

var probed = sync.OnceValue(probe)

// Probe reports the Readiness of this process: cheap, run once per process
// and cached (neither the kernel's Landlock ABI nor its seccomp support
// changes while it runs). It applies nothing.
func Probe() Readiness { return probed() }

func probe() Readiness {
	r := Readiness{LandlockABI: LandlockABI()}
	for _, network := range []bool{false, true} {
		if _, err := filterProgram(network); err != nil {
			r.Seccomp = fmt.Errorf("%w: %w", ErrSeccompUnavailable, err)
			return r
		}
	}
	// The filters return EPERM/ENOSYS (SECCOMP_RET_ERRNO) and kill the
	// process on a foreign architecture (SECCOMP_RET_KILL_PROCESS, Linux
	// 4.14). SECCOMP_GET_ACTION_AVAIL answers only where filters exist.
	for _, action := range []uint32{unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS} {
		a := action
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0,
			uintptr(unsafe.Pointer(&a))); errno != 0 {
			r.Seccomp = fmt.Errorf("%w: the kernel does not take seccomp filters with action %#x: %w",
				ErrSeccompUnavailable, action, errno)
			return r
		}
	}
	return r
}

// Assess decides, for mode (ModeRequired or ModeBestEffort), how a tool is
// confined with what r says is there. Without seccomp nothing can be
// confined, whatever the mode: an error wrapping ErrUnavailable and
// ErrSeccompUnavailable. Otherwise it is Assess(mode, r.LandlockABI).
func (r Readiness) Assess(mode string) (Assessment, error) {
	if r.Seccomp != nil {
		if _, err := Assess(mode, MinABI); err != nil {
			return Assessment{}, err // an unknown mode says so first
		}
		return Assessment{}, fmt.Errorf("%w: %w", ErrUnavailable, r.Seccomp)
	}
	return Assess(mode, r.LandlockABI)
}
