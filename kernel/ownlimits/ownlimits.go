// Package ownlimits keeps agentnode's own resource limits what they were
// when the process started: it records them at package initialisation and
// Restore puts back any a process agentnode started has changed since
// (prlimit on its parent).
//
// It belongs in the trusted core because it is the audit writer's
// self-protection, not part of any backend: kernel/dispatch calls Restore
// before it writes each decision and outcome record, so that a file size
// limit of 0 (or a NOFILE limit too low to open the log) set from outside
// cannot stop the record, whichever backend ran the process that set it.
// The snapshot must be taken before any tool exists, which initialisation
// of a package the kernel imports guarantees. The host backend
// (executor/hostexec) calls Restore too, after every tool it reaps, to
// report the change as the run's failure.
package ownlimits

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrChanged marks a run after which agentnode's own resource limits were
// not what they were when agentnode started: a process it started reached
// out and changed them (prlimit on its parent). A confined tool cannot
// (its seccomp filter allows prlimit64 on itself only); this is the second
// line, for what got through anyway and for unconfined runs.
var ErrChanged = errors.New("a tool changed agentnode's resource limits")

// names are the resource limits Restore checks, by their prlimit(1) names.
var names = [...]string{
	unix.RLIMIT_CPU: "CPU", unix.RLIMIT_FSIZE: "FSIZE", unix.RLIMIT_DATA: "DATA",
	unix.RLIMIT_STACK: "STACK", unix.RLIMIT_CORE: "CORE", unix.RLIMIT_RSS: "RSS",
	unix.RLIMIT_NPROC: "NPROC", unix.RLIMIT_NOFILE: "NOFILE", unix.RLIMIT_MEMLOCK: "MEMLOCK",
	unix.RLIMIT_AS: "AS", unix.RLIMIT_LOCKS: "LOCKS", unix.RLIMIT_SIGPENDING: "SIGPENDING",
	unix.RLIMIT_MSGQUEUE: "MSGQUEUE", unix.RLIMIT_NICE: "NICE", unix.RLIMIT_RTPRIO: "RTPRIO",
	unix.RLIMIT_RTTIME: "RTTIME",
}

// start are this process's resource limits as it started (package
// initialisation, after the Go runtime raised its NOFILE soft limit and
// before any tool exists). agentnode never changes its own limits, so any
// later difference came from outside.
var start = read()

type limits [len(names)]struct {
	rlim unix.Rlimit
	ok   bool // getrlimit answered (a kernel without the resource does not)
}

func read() *limits {
	var l limits
	for r := range l {
		l[r].ok = unix.Getrlimit(r, &l[r].rlim) == nil
	}
	return &l
}

// Restore puts back every resource limit of this process that is no
// longer what it was at start, and returns the names of those it found
// changed. Raising a hard limit needs CAP_SYS_RESOURCE: without it a
// lowered hard limit stays lowered (the soft limit is raised to it), and
// err (wrapping ErrChanged) names it.
func Restore() (changed []string, err error) {
	var failed []error
	now := read()
	for r := range now {
		want := start[r]
		if !want.ok || !now[r].ok || now[r].rlim == want.rlim {
			continue
		}
		changed = append(changed, names[r])
		if serr := unix.Setrlimit(r, &want.rlim); serr != nil {
			// The hard limit is lower than it was: at least raise the
			// soft limit as far as it goes.
			part := unix.Rlimit{Cur: min(want.rlim.Cur, now[r].rlim.Max), Max: now[r].rlim.Max}
			_ = unix.Setrlimit(r, &part)
			failed = append(failed, fmt.Errorf("RLIMIT_%s is %s, was %s: %w",
				names[r], Format(now[r].rlim), Format(want.rlim), serr))
		}
	}
	if len(failed) > 0 {
		return changed, fmt.Errorf("%w; not restored: %w", ErrChanged, errors.Join(failed...))
	}
	return changed, nil
}

// Format is r as prlimit(1) shows it: SOFT:HARD, "unlimited" for
// RLIM_INFINITY.
func Format(r unix.Rlimit) string {
	f := func(v uint64) string {
		if v == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return fmt.Sprint(v)
	}
	return f(r.Cur) + ":" + f(r.Max)
}
