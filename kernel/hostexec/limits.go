package hostexec

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/reason"
)

// ErrLimitsChanged marks a tool run after which agentnode's own resource
// limits were not what they were when agentnode started: a process it
// started reached out and changed them (prlimit on its parent). A confined
// tool cannot (its seccomp filter allows prlimit64 on itself only); this is
// the second line, for what got through anyway and for unconfined runs.
var ErrLimitsChanged = errors.New("a tool changed agentnode's resource limits")

// limitNames are the resource limits RestoreLimits checks, by their
// prlimit(1) names.
var limitNames = [...]string{
	unix.RLIMIT_CPU: "CPU", unix.RLIMIT_FSIZE: "FSIZE", unix.RLIMIT_DATA: "DATA",
	unix.RLIMIT_STACK: "STACK", unix.RLIMIT_CORE: "CORE", unix.RLIMIT_RSS: "RSS",
	unix.RLIMIT_NPROC: "NPROC", unix.RLIMIT_NOFILE: "NOFILE", unix.RLIMIT_MEMLOCK: "MEMLOCK",
	unix.RLIMIT_AS: "AS", unix.RLIMIT_LOCKS: "LOCKS", unix.RLIMIT_SIGPENDING: "SIGPENDING",
	unix.RLIMIT_MSGQUEUE: "MSGQUEUE", unix.RLIMIT_NICE: "NICE", unix.RLIMIT_RTPRIO: "RTPRIO",
	unix.RLIMIT_RTTIME: "RTTIME",
}

// startLimits are this process's resource limits as it started (package
// initialisation, after the Go runtime raised its NOFILE soft limit and
// before any tool exists). agentnode never changes its own limits, so any
// later difference came from outside.
var startLimits = readLimits()

type limits [len(limitNames)]struct {
	rlim unix.Rlimit
	ok   bool // getrlimit answered (a kernel without the resource does not)
}

func readLimits() *limits {
	var l limits
	for r := range l {
		l[r].ok = unix.Getrlimit(r, &l[r].rlim) == nil
	}
	return &l
}

// RestoreLimits puts back every resource limit of this process that is no
// longer what it was at start, and returns the names of those it found
// changed. Raising a hard limit needs CAP_SYS_RESOURCE: without it a
// lowered hard limit stays lowered (the soft limit is raised to it), and
// err (wrapping ErrLimitsChanged) names it. Run calls it once a tool is reaped, and
// writers of the audit record call it before they write, so that a file
// size limit of 0 set from outside cannot stop the outcome record.
func RestoreLimits() (changed []string, err error) {
	var failed []error
	now := readLimits()
	for r := range now {
		want := startLimits[r]
		if !want.ok || !now[r].ok || now[r].rlim == want.rlim {
			continue
		}
		changed = append(changed, limitNames[r])
		if serr := unix.Setrlimit(r, &want.rlim); serr != nil {
			// The hard limit is lower than it was: at least raise the
			// soft limit as far as it goes.
			part := unix.Rlimit{Cur: min(want.rlim.Cur, now[r].rlim.Max), Max: now[r].rlim.Max}
			_ = unix.Setrlimit(r, &part)
			failed = append(failed, fmt.Errorf("RLIMIT_%s is %s, was %s: %w",
				limitNames[r], fmtRlimit(now[r].rlim), fmtRlimit(want.rlim), serr))
		}
	}
	if len(failed) > 0 {
		return changed, fmt.Errorf("%w; not restored: %w", ErrLimitsChanged, errors.Join(failed...))
	}
	return changed, nil
}

// checkLimits is RestoreLimits after a run of entrypoint: nil when nothing
// had changed, else a sandbox_unavailable error saying what was changed and
// whether it was put back.
func checkLimits(entrypoint string) error {
	changed, err := RestoreLimits()
	switch {
	case err != nil:
		return reason.New(reason.SandboxUnavailable, "hostexec: after tool %s: %w", entrypoint, err)
	case len(changed) > 0:
		return reason.New(reason.SandboxUnavailable, "hostexec: after tool %s: %w (%s; restored)",
			entrypoint, ErrLimitsChanged, strings.Join(changed, ", "))
	}
	return nil
}

func fmtRlimit(r unix.Rlimit) string {
	f := func(v uint64) string {
		if v == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return fmt.Sprint(v)
	}
	return f(r.Cur) + ":" + f(r.Max)
}
