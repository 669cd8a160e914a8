package main

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestABIVerdict: every host control outcome (the kernel serves the call,
// faults on it, answers ENOSYS) against every outcome in the sandbox.
func TestABIVerdict(t *testing.T) {
	var (
		success = abiOutcome{}
		sigsys  = abiOutcome{signal: unix.SIGSYS}
		eperm   = abiOutcome{errno: unix.EPERM}
		enosys  = abiOutcome{errno: unix.ENOSYS}
		sigsegv = abiOutcome{signal: unix.SIGSEGV}
		enoent  = abiOutcome{errno: unix.ENOENT} // what a Go-handled fault once looked like
		sigill  = abiOutcome{signal: unix.SIGILL}
		unknown = abiOutcome{unknown: "not measured"}
	)
	hosts := map[string]abiOutcome{"host allows": success, "host faults": sigsegv, "host ENOSYS": enosys}
	// want[host][sandbox]: does the check pass?
	want := map[string]map[string]bool{
		"host allows": {"SIGSYS": true, "EPERM": true, "ENOSYS": true, "SIGSEGV": false, "success": false},
		"host faults": {"SIGSYS": true, "EPERM": true, "ENOSYS": true, "SIGSEGV": true, "success": false},
		"host ENOSYS": {"SIGSYS": true, "EPERM": true, "ENOSYS": true, "SIGSEGV": false, "success": false},
	}
	sandboxed := map[string]abiOutcome{"SIGSYS": sigsys, "EPERM": eperm, "ENOSYS": enosys, "SIGSEGV": sigsegv, "success": success}
	for hn, host := range hosts {
		for sn, got := range sandboxed {
			ok, detail := abiVerdict("getpid via int $0x80", host, got)
			if ok != want[hn][sn] {
				t.Errorf("%s, sandbox %s: ok=%v, want %v (%s)", hn, sn, ok, want[hn][sn], detail)
			}
			if !strings.HasPrefix(detail, "getpid via int $0x80 ") {
				t.Errorf("%s, sandbox %s: detail does not name the attempt: %s", hn, sn, detail)
			}
		}
		// Outcomes that are never a refusal.
		for _, got := range []abiOutcome{enoent, sigill, unknown} {
			if ok, detail := abiVerdict("x", host, got); ok {
				t.Errorf("%s, sandbox %v: passed: %s", hn, got, detail)
			}
		}
	}
	// A host whose answer is unknown explains no fault.
	if ok, detail := abiVerdict("x", unknown, sigsegv); ok {
		t.Errorf("unmeasured host, sandbox SIGSEGV: passed: %s", detail)
	}
	if _, detail := abiVerdict("x", sigsegv, sigsegv); !strings.Contains(detail, "unproven") {
		t.Errorf("a fault on a faulting host must say the filter is unproven: %s", detail)
	}
}

// TestABIOutcomeToken: the token the suite passes from the host round-trips,
// and anything else is an unknown outcome, never a refusal.
func TestABIOutcomeToken(t *testing.T) {
	for _, o := range []abiOutcome{{}, {errno: unix.ENOSYS}, {errno: unix.EPERM}, {signal: unix.SIGSEGV}, {signal: unix.SIGSYS}, {unknown: "fork failed: EAGAIN"}} {
		if got := parseABIOutcome(o.String()); got != o {
			t.Errorf("%v round-trips to %v", o, got)
		}
	}
	for _, s := range []string{"", "errno", "errno:x", "errno:0", "signal:-1", "pid:7", "OK"} {
		if got := parseABIOutcome(s); got.unknown == "" {
			t.Errorf("%q parses to %v, want unknown", s, got)
		}
	}
}

// TestFaultingChildDiesBySIGSEGV: a raw child that faults (int $0x81, the
// general protection fault int $0x80 raises on a kernel without the i386
// ABI) is seen as killed by SIGSEGV, not as a Go runtime crash (exit 2,
// which reads as ENOENT).
func TestFaultingChildDiesBySIGSEGV(t *testing.T) {
	if !rawSupported {
		t.Skip("no raw fork helpers on this architecture")
	}
	if got := childOutcome(forkFault()); got.signal != unix.SIGSEGV {
		t.Fatalf("a faulting child: %v (%s), want killed by SIGSEGV", got, got.describe())
	}
}

// TestABIHostOutcomes: unconfined, each foreign ABI gives one of the
// outcomes a kernel gives (a pid, a fault, ENOSYS; EPERM or SIGSYS if this
// test itself runs under a filter), never a crash of the child.
func TestABIHostOutcomes(t *testing.T) {
	if !rawSupported {
		t.Skip("no raw fork helpers on this architecture")
	}
	for name, a := range foreignABIs {
		o := childOutcome(a.fork())
		t.Logf("%s: %s", a.what, o.describe())
		switch {
		case o.unknown != "":
			t.Errorf("%s: %s", name, o.describe())
		case o.signal != 0 && o.signal != unix.SIGSEGV && o.signal != unix.SIGSYS:
			t.Errorf("%s: %s", name, o.describe())
		case o.signal == 0 && o.errno != 0 && !refused(o.errno):
			t.Errorf("%s: %s", name, o.describe())
		}
	}
}
