package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// checkEnvSecretAbsent: NAME, set in the suite's own process, must not be in
// this process's environment, nor in that of pid 1.
func checkEnvSecretAbsent(args []string) (bool, string) {
	if len(args) != 1 || args[0] == "" {
		return false, "want argument NAME"
	}
	name := args[0]
	if v, ok := os.LookupEnv(name); ok {
		return false, fmt.Sprintf("the host's %s is in the environment (%d bytes)", name, len(v))
	}
	env, err := os.ReadFile("/proc/1/environ")
	if err == nil {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, []byte(name+"=")) {
				return false, "the host's " + name + " is in the environment of pid 1"
			}
		}
	}
	return true, fmt.Sprintf("%s absent; environment has %d variables", name, len(os.Environ()))
}

// checkEnvPassed: every KEY=VALUE argument (from Spec.Env) must be set.
func checkEnvPassed(args []string) (bool, string) {
	if len(args) == 0 {
		return false, "want arguments KEY=VALUE..."
	}
	for _, kv := range args {
		k, v, _ := strings.Cut(kv, "=")
		got, ok := os.LookupEnv(k)
		if !ok || got != v {
			return false, fmt.Sprintf("%s: got %q (set: %v), want %q", k, got, ok, v)
		}
	}
	return true, fmt.Sprintf("%v set", args)
}

// procStart returns field 22 (starttime, clock ticks since boot) of
// /proc/PID/stat.
func procStart(pid string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// comm may contain spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%s/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("short /proc/%s/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after comm
}

// maxVisiblePids is how many processes a sandbox may show: the probe, its
// helpers and an init.
const maxVisiblePids = 16

// checkHostPids: SUITEPID SUITESTART INITSTART. Neither the suite's process
// (pid and start time on the host) nor the host's pid 1 may be visible, and
// only a handful of processes may be.
func checkHostPids(args []string) (bool, string) {
	if len(args) != 3 {
		return false, "want arguments SUITEPID SUITESTART INITSTART"
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, "reading /proc: " + err.Error()
	}
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, e.Name())
		}
	}
	var problems []string
	if len(pids) > maxVisiblePids {
		problems = append(problems, fmt.Sprintf("%d processes visible (more than %d)", len(pids), maxVisiblePids))
	}
	if st, err := procStart(args[0]); err == nil && strconv.FormatUint(st, 10) == args[1] {
		problems = append(problems, "the suite's process (host pid "+args[0]+") is visible")
	}
	if st, err := procStart("1"); err == nil && strconv.FormatUint(st, 10) == args[2] {
		problems = append(problems, "pid 1 is the host's init")
	}
	comm, _ := os.ReadFile("/proc/1/comm")
	detail := fmt.Sprintf("%d processes visible, pid 1 is %q, own pid %d", len(pids), strings.TrimSpace(string(comm)), os.Getpid())
	if len(problems) > 0 {
		return false, strings.Join(problems, "; ") + "; " + detail
	}
	return true, detail
}

// checkHostname: the UTS hostname must differ from the host's (argument).
func checkHostname(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument HOSTNAME"
	}
	h, err := os.Hostname()
	if err != nil {
		return false, "hostname: " + err.Error()
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		if n := unix.ByteSliceToString(uts.Nodename[:]); n != h {
			h = n
		}
	}
	if h == args[0] {
		return false, fmt.Sprintf("hostname %q is the host's", h)
	}
	return true, fmt.Sprintf("hostname %q, host's %q", h, args[0])
}

// checkSetuid runs as /pack/probe-suid, a setuid copy owned by OWNERUID
// (root when the suite runs as root): no uid may have become the owner's.
func checkSetuid(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument OWNERUID"
	}
	owner, err := strconv.Atoi(args[0])
	if err != nil {
		return false, "bad OWNERUID: " + err.Error()
	}
	exe, _ := os.Readlink("/proc/self/exe")
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return false, "stat /proc/self/exe: " + err.Error()
	}
	if fi.Mode()&os.ModeSetuid == 0 {
		return false, exe + " is not setuid: the package directory did not keep the setuid bit, the check proves nothing"
	}
	r, e, s := unix.Getresuid()
	detail := fmt.Sprintf("running %s (setuid, owner %d): ruid=%d euid=%d suid=%d", exe, owner, r, e, s)
	if r == owner || e == owner || s == owner || e == 0 || s == 0 {
		return false, detail + ": the setuid bit elevated"
	}
	return true, detail
}

// devAllowed are the entries /dev may have. For device nodes, the expected
// major:minor.
var devAllowed = map[string]string{
	"null": "1:3", "zero": "1:5", "full": "1:7", "random": "1:8", "urandom": "1:9", "tty": "5:0",
	"console": "", // a pty when the engine allocates a terminal
	"ptmx":    "", // a link to pts/ptmx, or 5:2
	"pts":     "", "shm": "", "mqueue": "",
	"fd": "", "stdin": "", "stdout": "", "stderr": "", "core": "", // links into /proc
}

// gvisorDevs are the devices gVisor's own kernel always provides: they
// are the Sentry's emulations, no host device stands behind them (with
// --network=none there is no network stack a tun could reach).
var gvisorDevs = map[string]bool{"fuse": true, "net": true}

func checkDevMinimal([]string) (bool, string) {
	ents, err := os.ReadDir("/dev")
	if err != nil {
		return false, "reading /dev: " + err.Error()
	}
	var names, problems []string
	for _, e := range ents {
		n := e.Name()
		names = append(names, n)
		want, ok := devAllowed[n]
		if !ok && underGVisor() && gvisorDevs[n] {
			continue
		}
		if !ok {
			problems = append(problems, "/dev/"+n+" should not exist")
			continue
		}
		if want == "" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat("/dev/"+n, &st); err != nil {
			problems = append(problems, "/dev/"+n+": "+err.Error())
			continue
		}
		got := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || got != want {
			problems = append(problems, fmt.Sprintf("/dev/%s is not the character device %s (mode %o, %s)", n, want, st.Mode, got))
		}
	}
	for _, n := range []string{"sda", "vda", "nvme0n1", "mem", "kmem", "port", "kmsg", "kvm", "fuse", "net/tun", "userfaultfd"} {
		if underGVisor() && (n == "fuse" || n == "net/tun") {
			continue // gVisor's own (gvisorDevs)
		}
		if _, err := os.Lstat("/dev/" + n); err == nil && !strings.Contains(strings.Join(problems, " "), "/dev/"+n+" ") {
			problems = append(problems, "/dev/"+n+" exists")
		}
	}
	sort.Strings(names)
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return false, strings.Join(problems, "; ") + fmt.Sprintf("; /dev has %d entries", len(names))
	}
	return true, fmt.Sprintf("/dev has %v", names)
}
