package confine

import (
	"errors"
	"fmt"
)

// MinABI is the Landlock ABI that full confinement needs: filesystem rules
// with truncate (3) and device ioctls (5), and scoping of abstract unix
// sockets and signals (6).
const MinABI = 6

// Values of sandbox.host_confinement.
const (
	ModeRequired   = "required"
	ModeBestEffort = "best_effort"
)

// Landlock says how Landlock is applied.
type Landlock string

const (
	// LandlockRequired: apply at least MinABI or do not run the tool.
	LandlockRequired Landlock = "required"
	// LandlockBestEffort: apply what the kernel has (an ABI below MinABI).
	LandlockBestEffort Landlock = "best_effort"
	// LandlockOff: the kernel has no Landlock; seccomp only.
	LandlockOff Landlock = "off"
)

// Policy is the confinement of one tool run.
type Policy struct {
	// PackageDir may be read and executed (absolute, symlink-free).
	PackageDir string
	// WorkDir may be read and written, not executed (absolute,
	// symlink-free).
	WorkDir string
	// Workspace, when set, is the user's workspace directory granted to
	// the run (absolute, symlink-free): read, and with WorkspaceWritable
	// written like WorkDir; never executed.
	Workspace         string
	WorkspaceWritable bool
	// Network allows AF_INET and AF_INET6 sockets.
	Network bool
	// Landlock is how Landlock is applied.
	Landlock Landlock
}

// ErrConfine marks a confinement that could not be applied: the tool did
// not start.
var ErrConfine = errors.New("host confinement failed")

// Assessment is what a mode makes of a kernel's Landlock ABI.
type Assessment struct {
	// Landlock goes into Policy.Landlock.
	Landlock Landlock
	// Note is empty for full confinement, else a short marker for the
	// audit record ("unconfined: landlock unavailable").
	Note string
}

// ErrUnavailable marks a required confinement the kernel cannot provide.
var ErrUnavailable = errors.New("host confinement unavailable")

// Assess decides, for mode (ModeRequired or ModeBestEffort) and the
// kernel's Landlock ABI, how Landlock is applied. Required with an
// ABI below MinABI is an error wrapping ErrUnavailable.
func Assess(mode string, abi int) (Assessment, error) {
	switch mode {
	case ModeRequired, ModeBestEffort:
	default:
		return Assessment{}, fmt.Errorf("%w: unknown host_confinement mode %q", ErrUnavailable, mode)
	}
	if abi >= MinABI {
		return Assessment{Landlock: LandlockRequired}, nil
	}
	if mode == ModeRequired {
		if abi <= 0 {
			return Assessment{}, fmt.Errorf("%w: the kernel has no Landlock (sandbox.host_confinement is required; "+
				"set it to best_effort to run with seccomp only)", ErrUnavailable)
		}
		return Assessment{}, fmt.Errorf("%w: the kernel's Landlock ABI is %d, confinement needs %d "+
			"(sandbox.host_confinement is required; set it to best_effort to run partly confined)",
			ErrUnavailable, abi, MinABI)
	}
	if abi <= 0 {
		return Assessment{Landlock: LandlockOff, Note: "unconfined: landlock unavailable"}, nil
	}
	return Assessment{Landlock: LandlockBestEffort,
		Note: fmt.Sprintf("partly confined: landlock ABI %d < %d", abi, MinABI)}, nil
}
