package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// underGVisor: the suite runs the probe under gVisor (Config.Runtime,
// passed as SANDBOXTEST_RUNTIME). The checks that read what a kernel
// shows then expect gVisor's kernel, not the host's.
func underGVisor() bool { return os.Getenv("SANDBOXTEST_RUNTIME") == "gvisor" }

// checkGVisorKernel: HOSTVERSION is the host's /proc/version; inside, the
// kernel answering must be another one (gVisor's), in /proc/version and
// uname(2) alike.
func checkGVisorKernel(args []string) (bool, string) {
	host := strings.TrimSpace(arg(args, 0))
	b, err := os.ReadFile("/proc/version")
	if err != nil {
		return false, "reading /proc/version: " + errText(err)
	}
	inside := strings.TrimSpace(string(b))
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, "uname: " + errText(err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	switch {
	case host == "":
		return false, "the suite passed no host /proc/version"
	case inside == host:
		return false, fmt.Sprintf("/proc/version is the host's: %q", inside)
	case strings.Contains(host, " "+release+" "):
		return false, fmt.Sprintf("uname reports the host's release %q (inside /proc/version: %q)", release, inside)
	}
	return true, fmt.Sprintf("/proc/version %q, uname release %q; the host's is %q", inside, release, host)
}

// enosysCandidates are system calls the profile's filter allows, which a
// recent host kernel implements and gVisor (at least the 2022 releases)
// does not. Arguments are harmless: the host answers EINVAL, EBADF or the
// like, never ENOSYS.
var enosysCandidates = []struct {
	name string
	nr   uintptr
	args [3]uintptr
}{
	{"remap_file_pages", unix.SYS_REMAP_FILE_PAGES, [3]uintptr{0, 0, 0}},
	{"futex_waitv", 449, [3]uintptr{0, 0, 0}},
	{"cachestat", 451, [3]uintptr{^uintptr(0), 0, 0}},
	{"mseal", 462, [3]uintptr{0, 0, 0}},
}

// enosysOutcomes makes each candidate call and returns NAME=ERRNO tokens.
func enosysOutcomes() []string {
	var out []string
	for _, c := range enosysCandidates {
		_, _, e := unix.RawSyscall(c.nr, c.args[0], c.args[1], c.args[2])
		out = append(out, fmt.Sprintf("%s=%d", c.name, int(e)))
	}
	return out
}

// enosysHost is the helper mode "enosys-host": the candidates' outcomes
// on the host, unconfined, one line.
func enosysHost([]string) {
	fmt.Println(strings.Join(enosysOutcomes(), ","))
}

// checkGVisorENOSYS: HOSTOUTCOMES is enosys-host's line. Some candidate
// the host implements (not ENOSYS there) must answer ENOSYS inside: the
// call reached a kernel that does not have it.
func checkGVisorENOSYS(args []string) (bool, string) {
	host := map[string]string{}
	for _, kv := range strings.Split(arg(args, 0), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			host[k] = v
		}
	}
	enosys := fmt.Sprint(int(unix.ENOSYS))
	inside := enosysOutcomes()
	for _, kv := range inside {
		k, v, _ := strings.Cut(kv, "=")
		if h, ok := host[k]; ok && h != enosys && v == enosys {
			return true, fmt.Sprintf("%s answers ENOSYS inside, errno %s on the host (inside: %s)", k, h, strings.Join(inside, ","))
		}
	}
	return false, fmt.Sprintf("no system call the host implements answered ENOSYS inside: inside %s, host %s", strings.Join(inside, ","), arg(args, 0))
}
