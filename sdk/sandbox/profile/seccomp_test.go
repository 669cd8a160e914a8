package profile

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

func mustSeccomp(t *testing.T) *specs.LinuxSeccomp {
	t.Helper()
	sc, err := Seccomp()
	if err != nil {
		t.Fatalf("Seccomp: %v", err)
	}
	return sc
}

// decide evaluates sc for one call the way the kernel filter libseccomp
// builds from it does: a rule matches when every argument comparison
// holds; a matching rule's action wins, else the default action. It
// returns the action and the errno for SCMP_ACT_ERRNO. Conflicting
// matches are reported as an error (TestSeccompRulesDoNotConflict makes
// sure there are none).
func decide(t *testing.T, sc *specs.LinuxSeccomp, name string, args ...uint64) (specs.LinuxSeccompAction, uint) {
	t.Helper()
	var a [6]uint64
	copy(a[:], args)
	var hit *specs.LinuxSyscall
	for i := range sc.Syscalls {
		r := &sc.Syscalls[i]
		if !slices.Contains(r.Names, name) || !argsMatch(r.Args, a) {
			continue
		}
		if hit != nil && (hit.Action != r.Action || !reflect.DeepEqual(hit.ErrnoRet, r.ErrnoRet)) {
			t.Fatalf("%s%v matches rules with different actions", name, args)
		}
		hit = r
	}
	act, errno := sc.DefaultAction, sc.DefaultErrnoRet
	if hit != nil {
		act, errno = hit.Action, hit.ErrnoRet
	}
	if act != specs.ActErrno {
		return act, 0
	}
	if errno == nil {
		return act, uint(unix.EPERM) // libseccomp's and runc's default errno
	}
	return act, *errno
}

func argsMatch(conds []specs.LinuxSeccompArg, a [6]uint64) bool {
	for _, c := range conds {
		v := a[c.Index]
		var ok bool
		switch c.Op {
		case specs.OpEqualTo:
			ok = v == c.Value
		case specs.OpNotEqual:
			ok = v != c.Value
		case specs.OpLessThan:
			ok = v < c.Value
		case specs.OpLessEqual:
			ok = v <= c.Value
		case specs.OpGreaterThan:
			ok = v > c.Value
		case specs.OpGreaterEqual:
			ok = v >= c.Value
		case specs.OpMaskedEqual:
			ok = v&c.Value == c.ValueTwo
		}
		if !ok {
			return false
		}
	}
	return true
}

func allowed(t *testing.T, sc *specs.LinuxSeccomp, name string, args ...uint64) bool {
	t.Helper()
	act, _ := decide(t, sc, name, args...)
	return act == specs.ActAllow
}

func TestSeccompShape(t *testing.T) {
	sc := mustSeccomp(t)
	if sc.DefaultAction != specs.ActErrno {
		t.Errorf("defaultAction = %s, want SCMP_ACT_ERRNO", sc.DefaultAction)
	}
	if sc.DefaultErrnoRet == nil || *sc.DefaultErrnoRet != uint(unix.EPERM) {
		t.Errorf("defaultErrnoRet = %v, want EPERM", sc.DefaultErrnoRet)
	}
	// x86_64 only: 32-bit x86 (int 0x80) and x32 calls hit the filter's
	// bad-architecture action (kill) instead of being allowed.
	if !slices.Equal(sc.Architectures, []specs.Arch{specs.ArchX86_64}) {
		t.Errorf("architectures = %v, want only SCMP_ARCH_X86_64", sc.Architectures)
	}
	if sc.Flags != nil || sc.ListenerPath != "" || sc.ListenerMetadata != "" {
		t.Errorf("flags %v listener %q %q: want runtime defaults and no listener", sc.Flags, sc.ListenerPath, sc.ListenerMetadata)
	}
	for i, r := range sc.Syscalls {
		switch r.Action {
		case specs.ActAllow:
			if r.ErrnoRet != nil {
				t.Errorf("rule %d: errnoRet on an allow rule", i)
			}
		case specs.ActErrno:
			if r.ErrnoRet == nil {
				t.Errorf("rule %d (%v): errno rule without errnoRet", i, r.Names)
			}
		default:
			t.Errorf("rule %d (%v): action %s", i, r.Names, r.Action)
		}
	}
}

// TestSeccompNamesAreX86_64Syscalls: every name is a real x86_64 system
// call (no typos, no 32-bit-only names that would only pretend to allow
// something).
func TestSeccompNamesAreX86_64Syscalls(t *testing.T) {
	table := amd64Syscalls(t)
	for _, r := range mustSeccomp(t).Syscalls {
		for _, n := range r.Names {
			if _, ok := table[n]; !ok {
				t.Errorf("%q is not an x86_64 system call", n)
			}
		}
	}
}

// TestSeccompRulesDoNotConflict: a name allowed unconditionally appears in
// no other rule, and no name is listed twice in one rule. libseccomp
// refuses some overlaps and resolves others by its own precedence; the
// profile must not depend on either.
func TestSeccompRulesDoNotConflict(t *testing.T) {
	sc := mustSeccomp(t)
	unconditional := map[string]int{}
	for i, r := range sc.Syscalls {
		if len(r.Args) == 0 {
			for _, n := range r.Names {
				if j, dup := unconditional[n]; dup {
					t.Errorf("%s unconditional in rules %d and %d", n, j, i)
				}
				unconditional[n] = i
			}
		}
		seen := map[string]bool{}
		for _, n := range r.Names {
			if seen[n] {
				t.Errorf("rule %d lists %s twice", i, n)
			}
			seen[n] = true
		}
	}
	for i, r := range sc.Syscalls {
		if len(r.Args) == 0 {
			continue
		}
		for _, n := range r.Names {
			if j, ok := unconditional[n]; ok {
				t.Errorf("%s is unconditional in rule %d and conditional in rule %d", n, j, i)
			}
		}
	}
}

// forbidden are refused outright: no allow rule names them, with or without
// argument conditions. They create or enter namespaces, mount, trace, reach
// kernel keyrings, eBPF, perf, modules or kexec, bypass the filter
// (io_uring) or are privileged operations this sandbox never needs.
var forbidden = []string{
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"modify_ldt", "iopl", "ioperm",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "lookup_dcookie", "vhangup",
	"settimeofday", "clock_settime", "sethostname", "setdomainname", "fanotify_init",
	"mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages",
	"uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "listns",
}

func TestSeccompForbiddenSyscalls(t *testing.T) {
	sc := mustSeccomp(t)
	table := amd64Syscalls(t)
	for _, n := range forbidden {
		if _, ok := table[n]; !ok {
			t.Errorf("forbidden list: %q is not an x86_64 system call", n)
		}
		for i, r := range sc.Syscalls {
			if r.Action != specs.ActErrno && slices.Contains(r.Names, n) {
				t.Errorf("%s is allowed by rule %d", n, i)
			}
		}
		if act, errno := decide(t, sc, n); act != specs.ActErrno || errno != uint(unix.EPERM) {
			t.Errorf("%s: %s errno %d, want EPERM", n, act, errno)
		}
	}
}

func TestSeccompClone(t *testing.T) {
	sc := mustSeccomp(t)
	newNS := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET}
	var all uint64
	for _, f := range newNS {
		all |= f
		if allowed(t, sc, "clone", f|uint64(unix.SIGCHLD)) {
			t.Errorf("clone with namespace flag %#x allowed", f)
		}
	}
	if all != 0x7E020000 {
		t.Fatalf("namespace flags %#x", all)
	}
	// Every clone rule must be conditional and mask all of them.
	for i, r := range sc.Syscalls {
		if !slices.Contains(r.Names, "clone") {
			continue
		}
		if len(r.Names) != 1 || len(r.Args) != 1 || r.Args[0].Index != 0 || r.Args[0].Op != specs.OpMaskedEqual ||
			r.Args[0].Value&all != all || r.Args[0].ValueTwo != 0 {
			t.Errorf("clone rule %d is not 'flags & CLONE_NEW* == 0': %+v", i, r)
		}
	}
	const thread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
		unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	for _, flags := range []uint64{uint64(unix.SIGCHLD), thread, unix.CLONE_VFORK | unix.CLONE_VM | uint64(unix.SIGCHLD)} {
		if !allowed(t, sc, "clone", flags) {
			t.Errorf("clone(%#x) refused: fork, vfork and threads must work", flags)
		}
	}
	// clone3 passes its flags in memory the filter cannot read: ENOSYS, so
	// that libc falls back to clone.
	if act, errno := decide(t, sc, "clone3"); act != specs.ActErrno || errno != uint(unix.ENOSYS) {
		t.Errorf("clone3: %s errno %d, want SCMP_ACT_ERRNO ENOSYS", act, errno)
	}
}

func TestSeccompSocket(t *testing.T) {
	sc := mustSeccomp(t)
	const (
		mptcp   = 262 // IPPROTO_MPTCP
		hi      = 1 << 32
		stream  = unix.SOCK_STREAM | unix.SOCK_CLOEXEC
		netlink = unix.AF_NETLINK
	)
	// MPTCP is refused with every family and type, also with junk in the
	// upper 32 bits the kernel ignores.
	for fam := uint64(0); fam < unix.AF_MAX; fam++ {
		for _, typ := range []uint64{unix.SOCK_STREAM, stream, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET} {
			for _, proto := range []uint64{mptcp, mptcp | hi} {
				if allowed(t, sc, "socket", fam, typ, proto) || allowed(t, sc, "socket", fam|hi, typ, proto) {
					t.Errorf("socket(%d, %#x, %#x) allowed", fam, typ, proto)
				}
			}
		}
	}
	for _, c := range []struct {
		fam, typ, proto uint64
		ok              bool
	}{
		{unix.AF_UNIX, stream, 0, true},
		{unix.AF_UNIX, unix.SOCK_DGRAM, 0, true},
		{unix.AF_INET, stream, 0, true},
		{unix.AF_INET, stream, unix.IPPROTO_TCP, true},
		{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP, true},
		{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP, true},
		{unix.AF_INET6, stream, 0, true},
		{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6, true},
		{netlink, unix.SOCK_RAW, unix.NETLINK_ROUTE, true},
		{unix.AF_INET | hi, stream, 0, true}, // the kernel reads an int: the filter compares 32 bits
		{unix.AF_INET, stream, unix.IPPROTO_SCTP, false},
		{unix.AF_INET, stream, unix.IPPROTO_UDPLITE, false},
		{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW, false},
		{netlink, unix.SOCK_RAW, unix.NETLINK_AUDIT, false},
		{netlink, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG, false},
		{netlink, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT, false},
		{netlink, unix.SOCK_RAW, unix.NETLINK_NETFILTER, false},
		{netlink, unix.SOCK_RAW, unix.NETLINK_GENERIC, false},
		{unix.AF_PACKET, unix.SOCK_RAW, 0, false},
		{unix.AF_ALG, unix.SOCK_SEQPACKET, 0, false},
		{unix.AF_VSOCK, stream, 0, false},
		{unix.AF_TIPC, stream, 0, false},
		{unix.AF_KEY, unix.SOCK_RAW, 2, false},
		{unix.AF_BLUETOOTH, stream, 0, false},
		{unix.AF_XDP, unix.SOCK_RAW, 0, false},
		{unix.AF_RDS, unix.SOCK_SEQPACKET, 0, false},
		{unix.AF_INET - 2 + hi, stream, 0, false}, // AF_UNSPEC with junk
	} {
		if got := allowed(t, sc, "socket", c.fam, c.typ, c.proto); got != c.ok {
			t.Errorf("socket(%#x, %#x, %d) allowed = %v, want %v", c.fam, c.typ, c.proto, got, c.ok)
		}
	}
	// Every socket rule pins family and protocol on the 32 bits the kernel
	// reads; a rule without them would let any family or MPTCP through.
	for i, r := range sc.Syscalls {
		if !slices.Contains(r.Names, "socket") && !slices.Contains(r.Names, "socketpair") {
			continue
		}
		var fam, proto bool
		for _, a := range r.Args {
			if a.Op == specs.OpMaskedEqual && a.Value == 0xFFFFFFFF {
				fam = fam || a.Index == 0
				proto = proto || a.Index == 2 && a.ValueTwo != mptcp
			}
		}
		if len(r.Names) != 1 || !fam || !proto {
			t.Errorf("socket rule %d does not pin family and protocol: %+v", i, r)
		}
	}
	if !allowed(t, sc, "socketpair", unix.AF_UNIX, stream, 0) {
		t.Error("socketpair(AF_UNIX) refused")
	}
	for _, fam := range []uint64{unix.AF_TIPC, unix.AF_INET, unix.AF_NETLINK} {
		if allowed(t, sc, "socketpair", fam, stream, 0) {
			t.Errorf("socketpair(%d) allowed", fam)
		}
	}
}

func TestSeccompPersonality(t *testing.T) {
	sc := mustSeccomp(t)
	for _, p := range []uint64{0, 0x0008 /* PER_LINUX32 */, 0x20000 /* UNAME26 */, 0x20008, 0xffffffff} {
		if !allowed(t, sc, "personality", p) {
			t.Errorf("personality(%#x) refused", p)
		}
	}
	const addrNoRandomize, readImpliesExec = 0x0040000, 0x0400000
	for _, p := range []uint64{addrNoRandomize, readImpliesExec, addrNoRandomize | 0x0008, 0x0008000 /* PER_BSD */} {
		if allowed(t, sc, "personality", p) {
			t.Errorf("personality(%#x) allowed", p)
		}
	}
}

// TestSeccompAgainstDockerDefault pins the differences from Docker's
// default profile (as applied to a container without capabilities on
// x86_64) so that none creeps in or out unnoticed; README.md explains
// each.
func TestSeccompAgainstDockerDefault(t *testing.T) {
	sc := mustSeccomp(t)
	mustAllow := []string{ // a sample of what real tools need
		"read", "write", "openat", "close", "mmap", "mprotect", "brk", "execve", "execveat", "exit_group",
		"futex", "rt_sigaction", "arch_prctl", "set_tid_address", "rseq", "getrandom", "epoll_pwait2",
		"wait4", "pipe2", "dup3", "fcntl", "ioctl", "connect", "bind", "listen", "accept4", "sendto",
		"recvfrom", "prctl", "seccomp", "landlock_create_ruleset", "memfd_create", "statx", "openat2",
		"close_range", "faccessat2", "clock_nanosleep", "sched_yield", "vfork", "fork", "kill", "tgkill",
		"pidfd_open", "prlimit64", "setrlimit", "uname", "getcwd", "chdir", "mkdirat", "unlinkat",
	}
	for _, n := range mustAllow {
		if !allowed(t, sc, n) {
			t.Errorf("%s refused", n)
		}
	}
	// Exactly these Docker allowances are gone (Docker allows them to a
	// container without capabilities on x86_64).
	removed := []string{"ptrace", "process_vm_readv", "process_vm_writev", "name_to_handle_at", "modify_ldt"}
	for _, n := range removed {
		if allowed(t, sc, n) {
			t.Errorf("%s allowed", n)
		}
	}
}

func TestSeccompDockerJSON(t *testing.T) {
	a := SeccompDockerJSON()
	disk, err := os.ReadFile("../../../specs/" + seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, disk) {
		t.Fatal("SeccompDockerJSON differs from specs/" + seccompFile)
	}
	a[0] = 'X'
	if b := SeccompDockerJSON(); b[0] != '{' {
		t.Error("SeccompDockerJSON returns shared bytes")
	}
	// The Docker-format file only uses what both Docker's format and the
	// runtime-spec know (no archMap, includes, excludes, minKernel): Docker,
	// Podman and a plain runtime-spec reader get the same rules.
	for _, k := range []string{`"archMap"`, `"includes"`, `"excludes"`, `"minKernel"`, `"name"`} {
		if bytes.Contains(disk, []byte(k)) {
			t.Errorf("the file uses %s", k)
		}
	}
	sc, err := parseDockerSeccomp(disk)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sc, mustSeccomp(t)) {
		t.Error("Seccomp() differs from the file")
	}
}

func TestSeccompReturnsCopies(t *testing.T) {
	want := mustSeccomp(t)
	a := mustSeccomp(t)
	a.Syscalls[0].Names[0] = "vandalised"
	a.Syscalls[1].Args[0].Value = 12345
	*a.DefaultErrnoRet = 12345
	a.Architectures[0] = specs.ArchAARCH64
	if b := mustSeccomp(t); !reflect.DeepEqual(b, want) {
		t.Error("Seccomp returns shared state")
	}
}

func TestParseDockerSeccomp(t *testing.T) {
	// Docker's conditional rules, evaluated for x86_64 without capabilities.
	good := `{
		"defaultAction": "SCMP_ACT_ERRNO",
		"defaultErrnoRet": 1,
		"archMap": [
			{"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
			{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]}
		],
		"syscalls": [
			{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
			{"name": "getpid", "action": "SCMP_ACT_ALLOW", "comment": "old form"},
			{"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64", "x32"]}},
			{"names": ["set_tls"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm"]}},
			{"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
			{"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}], "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390x"]}},
			{"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}], "excludes": {"arches": ["amd64"]}},
			{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}
		]
	}`
	sc, err := parseDockerSeccomp([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if want := []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}; !slices.Equal(sc.Architectures, want) {
		t.Errorf("architectures = %v, want %v", sc.Architectures, want)
	}
	var names []string
	for _, r := range sc.Syscalls {
		names = append(names, strings.Join(r.Names, "+"))
	}
	if want := []string{"read+write", "getpid", "arch_prctl", "clone", "clone3"}; !slices.Equal(names, want) {
		t.Errorf("rules = %v, want %v", names, want)
	}
	if sc.Syscalls[3].Args[0].Index != 0 || *sc.Syscalls[4].ErrnoRet != 38 {
		t.Errorf("wrong clone/clone3 rules: %+v", sc.Syscalls[3:])
	}

	const rule = `{"names": ["read"], "action": "SCMP_ACT_ALLOW"}`
	for name, doc := range map[string]string{
		"unknown field":       `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoret": 1}]}`,
		"unknown top field":   `{"defaultAction": "SCMP_ACT_ERRNO", "architecture": ["SCMP_ARCH_X86_64"], "syscalls": [` + rule + `]}`,
		"trailing data":       `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [` + rule + `]} {}`,
		"allow default":       `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [` + rule + `]}`,
		"log default":         `{"defaultAction": "SCMP_ACT_LOG", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [` + rule + `]}`,
		"log rule":            `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_LOG"}]}`,
		"notify rule":         `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]}`,
		"listener":            `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "listenerPath": "/run/x.sock", "syscalls": [` + rule + `]}`,
		"both arch forms":     `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": null}], "syscalls": [` + rule + `]}`,
		"no x86_64":           `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_AARCH64"], "syscalls": [` + rule + `]}`,
		"minKernel":           `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}}]}`,
		"name and names":      `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"name": "read", "names": ["write"], "action": "SCMP_ACT_ALLOW"}]}`,
		"no names":            `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"action": "SCMP_ACT_ALLOW"}]}`,
		"errnoRet on allow":   `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}]}`,
		"bad op":              `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_XX"}]}]}`,
		"bad index":           `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`,
		"no rules":            `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": []}`,
		"errno on kill":       `{"defaultAction": "SCMP_ACT_KILL", "defaultErrnoRet": 1, "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [` + rule + `]}`,
		"not json":            `defaultAction: SCMP_ACT_ERRNO`,
		"empty name in names": `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [{"names": [""], "action": "SCMP_ACT_ALLOW"}]}`,
	} {
		if _, err := parseDockerSeccomp([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
