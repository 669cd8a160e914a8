package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The foreign-ABI checks (sys-int80, sys-x32) cannot be decided from inside
// the sandbox alone: what int $0x80 does depends on the host kernel. With
// the i386 ABI (CONFIG_IA32_EMULATION, not booted with ia32_emulation=0)
// int $0x80 enters the kernel's 32-bit entry, where a seccomp filter sees
// it (as AUDIT_ARCH_I386) and must refuse it. Without it the kernel has no
// gate for vector 0x80: the instruction raises a general protection fault,
// SIGSEGV with si_code SI_KERNEL, before any seccomp filter runs - on the
// host exactly as in any sandbox. x32 is a plain syscall instruction with
// __X32_SYSCALL_BIT set: seccomp always sees it first, and a kernel without
// x32 answers ENOSYS, so it never faults; it gets the same treatment for
// uniformity.
//
// So the suite measures the host's answer first, by running this probe
// unconfined on the host ("probe abi-host int80|x32"), and passes it to the
// check as its argument; abiVerdict judges the sandbox's outcome against it.
//
// Why a faulting host once looked like "failed with ENOENT": the attempt is
// made in a raw child (raw_amd64.s), a fork of the Go program that inherits
// the Go runtime's signal handlers. A fault there ran the runtime's SIGSEGV
// handler in the child, which printed "fatal error: fault" and exited with
// status 2, and the parent read the exit status as the child's errno:
// 2 = ENOENT. The children now reset SIGSEGV and SIGSYS to their default
// actions before the attempt (FAULT_SIGNALS_DEFAULT), so a fault is a death
// by SIGSEGV, and a SECCOMP_RET_TRAP a death by SIGSYS.

// abiOutcome is what became of one attempt through a foreign ABI in a raw
// child: it exited with an errno (0: the call returned a pid), or was killed
// by a signal; a non-empty unknown means neither could be learnt.
type abiOutcome struct {
	errno   syscall.Errno
	signal  syscall.Signal
	unknown string
}

// String is the outcome's token, as "probe abi-host" prints it and the check
// takes it: "ok", "errno:N", "signal:N" or "unknown:WHY".
func (o abiOutcome) String() string {
	switch {
	case o.unknown != "":
		return "unknown:" + o.unknown
	case o.signal != 0:
		return "signal:" + strconv.Itoa(int(o.signal))
	case o.errno != 0:
		return "errno:" + strconv.Itoa(int(o.errno))
	}
	return "ok"
}

// parseABIOutcome reads a token String wrote.
func parseABIOutcome(s string) abiOutcome {
	kind, n, _ := strings.Cut(s, ":")
	v, err := strconv.Atoi(n)
	switch {
	case s == "ok":
		return abiOutcome{}
	case kind == "unknown":
		return abiOutcome{unknown: n}
	case err != nil || v <= 0:
	case kind == "errno":
		return abiOutcome{errno: syscall.Errno(v)}
	case kind == "signal":
		return abiOutcome{signal: syscall.Signal(v)}
	}
	return abiOutcome{unknown: fmt.Sprintf("unreadable outcome %q", s)}
}

// describe says what happened, after the attempt's name.
func (o abiOutcome) describe() string {
	switch {
	case o.unknown != "":
		return "has no known outcome (" + o.unknown + ")"
	case o.signal != 0:
		name := unix.SignalName(o.signal)
		if name == "" {
			name = "signal " + strconv.Itoa(int(o.signal))
		}
		return "killed the child by " + name
	case o.errno != 0:
		return "failed with " + errText(o.errno)
	}
	return "returned a pid"
}

// childOutcome reaps the raw child r (a pid, or -errno of the fork) and
// tells what became of its attempt.
func childOutcome(r int64) abiOutcome {
	if !rawSupported {
		return abiOutcome{unknown: "cannot run on " + runtime.GOARCH}
	}
	if r < 0 {
		return abiOutcome{unknown: "fork failed: " + errText(rawErr(r))}
	}
	ws, err := reap(int(r))
	switch {
	case err != nil:
		return abiOutcome{unknown: err.Error()}
	case ws.Exited():
		return abiOutcome{errno: syscall.Errno(ws.ExitStatus())}
	case ws.Signaled():
		return abiOutcome{signal: ws.Signal()}
	}
	return abiOutcome{unknown: fmt.Sprintf("unexpected wait status %#x", ws)}
}

// abiVerdict judges got, the outcome of a foreign-ABI attempt in the
// sandbox, against host, the outcome of the same attempt on the host
// without a sandbox:
//
//   - success fails, whatever the host does;
//   - a SIGSYS kill, EPERM or ENOSYS is a refusal (by the filter, or by a
//     kernel without the ABI) and passes, whatever the host does;
//   - SIGSEGV passes only when the host faults too: then the kernel has no
//     such ABI and nothing can reach the kernel through it. Where the host
//     serves or refuses the call, a fault in the sandbox is unexplained and
//     proves no filter, so it fails;
//   - anything else (another errno, another signal, no outcome) fails.
func abiVerdict(what string, host, got abiOutcome) (bool, string) {
	control := "without a sandbox the same call " + host.describe()
	switch {
	case got.unknown != "":
		return false, what + " " + got.describe()
	case got.signal == 0 && got.errno == 0:
		return false, what + " succeeded (" + control + ")"
	case got.signal == unix.SIGSYS:
		return true, what + " refused: the child was killed by SIGSYS (seccomp kill action); " + control
	case got.signal == 0 && refused(got.errno):
		return true, what + " refused: " + errText(got.errno) + "; " + control
	case got.signal == unix.SIGSEGV && host.unknown == "" && host.signal == unix.SIGSEGV:
		return true, what + " faulted (SIGSEGV) as it does on this host without a sandbox: this kernel does not " +
			"have the ABI, so nothing reaches the kernel through it (whether the filter would refuse it is unproven here)"
	case got.signal == unix.SIGSEGV:
		return false, what + " faulted (SIGSEGV) in the sandbox, but " + control +
			": the fault is not the kernel's and proves no refusal"
	case got.signal != 0:
		return false, what + " " + got.describe() + ", not SIGSYS (seccomp kill action); " + control
	}
	if underGVisor() && got.signal == 0 {
		return true, what + " failed with " + errText(got.errno) + " under gVisor, whose kernel has no i386 " +
			"system call table (the trap never reaches the host kernel, and no pid came back); " + control
	}
	return false, what + " failed with " + errText(got.errno) +
		", not EPERM/ENOSYS: it was not refused, only rejected later by the kernel; " + control
}

// foreignABI is one foreign system call ABI the probe tries.
type foreignABI struct {
	what string
	fork func() int64 // a raw child making the attempt
}

var foreignABIs = map[string]foreignABI{
	"int80": {"getpid via int $0x80 (i386 ABI)", forkInt80},
	"x32":   {"getpid via the x32 ABI", forkX32},
}

// abiCheck is sys-int80 or sys-x32: HOSTOUTCOME is the token the suite
// measured on the host with "probe abi-host ABI".
func abiCheck(abi string) checkFunc {
	return func(args []string) (bool, string) {
		a := foreignABIs[abi]
		host := abiOutcome{unknown: "not measured: the suite passed no host outcome"}
		if len(args) > 0 {
			host = parseABIOutcome(args[0])
		}
		return abiVerdict(a.what, host, childOutcome(a.fork()))
	}
}

// abiHost is the helper mode "abi-host ABI": it makes the attempt (on the
// host, unconfined) and prints the outcome's token.
func abiHost(args []string) {
	a, ok := foreignABIs[arg(args, 0)]
	if !ok {
		fmt.Fprintf(os.Stderr, "probe: abi-host: unknown ABI %q (int80, x32)\n", arg(args, 0))
		os.Exit(2)
	}
	fmt.Println(childOutcome(a.fork()).String())
}
