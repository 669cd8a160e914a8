//go:build linux && amd64 && cgo && seccomp

package profile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"
)

// The live tests load the profile's filter into a child process exactly as
// the libcontainer backend does (specconv.SetupSeccomp, then libcontainer's
// seccomp.InitSeccomp with runc's ENOSYS patch) and make real system calls
// under it. The child is this test binary, re-executed with probeEnv set;
// its init runs the probes on the main thread (the filter is per-thread:
// InitSeccomp does not synchronise threads) before the testing package
// starts.
const (
	probeEnv     = "AGENTNODE_PROFILE_SECCOMP_PROBE"
	probeExecEnv = "AGENTNODE_PROFILE_SECCOMP_EXEC"
)

func init() {
	mode := os.Getenv(probeEnv)
	if mode == "" {
		return
	}
	runtime.LockOSThread()
	if err := probeChild(mode); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func loadFilter() error {
	s, err := Base()
	if err != nil {
		return err
	}
	cfg, err := specconv.SetupSeccomp(s.Linux.Seccomp)
	if err != nil {
		return fmt.Errorf("SetupSeccomp: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, err := seccomp.InitSeccomp(cfg); err != nil {
		return fmt.Errorf("InitSeccomp: %w", err)
	}
	return nil
}

func probeChild(mode string) error {
	switch mode {
	case "syscalls", "syscalls-nofilter":
		if mode == "syscalls" {
			if err := loadFilter(); err != nil {
				return err
			}
		}
		out := map[string]int{}
		for _, p := range liveProbes {
			out[p.name] = int(p.call())
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	case "exec":
		// No core file from the SIGSYS we expect.
		if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
			return err
		}
		if err := loadFilter(); err != nil {
			return err
		}
		path := os.Getenv(probeExecEnv)
		return unix.Exec(path, []string{path}, []string{})
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// liveProbe is one system call made under the filter. deny is the errno the
// filter must produce; 0 means the call must reach the kernel (whatever
// the kernel then answers, it is not the filter's EPERM or ENOSYS).
type liveProbe struct {
	name string
	deny unix.Errno
	call func() unix.Errno
}

const nowhere = "/nonexistent-agentnode-probe"

func sys(nr uintptr, args ...uintptr) func() unix.Errno {
	return func() unix.Errno {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return e
	}
}

// sysFD is sys for calls that return a descriptor, which it closes.
func sysFD(nr uintptr, args ...uintptr) func() unix.Errno {
	return func() unix.Errno {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 {
			unix.Close(int(r))
		}
		return e
	}
}

// sysStr is sys with a C string as the first argument and, when two is
// set, the second too.
func sysStr(nr uintptr, s string, two bool, rest ...uintptr) func() unix.Errno {
	return func() unix.Errno {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			return unix.EINVAL
		}
		var a [5]uintptr
		copy(a[:], rest)
		var e unix.Errno
		if two {
			_, _, e = unix.RawSyscall6(nr, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(p)), a[0], a[1], a[2], a[3])
		} else {
			_, _, e = unix.RawSyscall6(nr, uintptr(unsafe.Pointer(p)), a[0], a[1], a[2], a[3], a[4])
		}
		runtime.KeepAlive(p)
		return e
	}
}

// cloneProbe forks with flags; a child that should never have existed
// exits at once.
func cloneProbe(flags uintptr) func() unix.Errno {
	return func() unix.Errno {
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
		if e != 0 {
			return e
		}
		if r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(int(r), &ws, 0, nil)
		return 0
	}
}

const (
	sigchld  = uintptr(unix.SIGCHLD)
	mptcp    = 262
	junkHigh = uintptr(1) << 32
	farPID   = 0x3ffffff0 // beyond pid_max: ESRCH without the filter
)

// The arguments are chosen so that without the filter each call fails
// harmlessly (or only changes the throw-away child process), even as root.
var liveProbes = []liveProbe{
	{"getpid", 0, sys(unix.SYS_GETPID)},
	{"clone(SIGCHLD)", 0, cloneProbe(sigchld)},
	{"socket(AF_INET,STREAM,0)", 0, sysFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)},
	{"socket(AF_INET|junk,STREAM,TCP)", 0, sysFD(unix.SYS_SOCKET, unix.AF_INET|junkHigh, unix.SOCK_STREAM, unix.IPPROTO_TCP)},
	{"socket(AF_UNIX,STREAM,0)", 0, sysFD(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0)},
	{"socket(AF_NETLINK,RAW,ROUTE)", 0, sysFD(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)},
	{"personality(query)", 0, sys(unix.SYS_PERSONALITY, 0xffffffff)},

	{"unshare(NEWUSER)", unix.EPERM, sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
	{"unshare(NEWNS)", unix.EPERM, sys(unix.SYS_UNSHARE, unix.CLONE_NEWNS)},
	{"unshare(NEWNET)", unix.EPERM, sys(unix.SYS_UNSHARE, unix.CLONE_NEWNET)},
	{"unshare(NEWTIME)", unix.EPERM, sys(unix.SYS_UNSHARE, unix.CLONE_NEWTIME)},
	{"setns", unix.EPERM, sys(unix.SYS_SETNS, ^uintptr(0), 0)},
	{"clone(NEWUSER)", unix.EPERM, cloneProbe(unix.CLONE_NEWUSER | sigchld)},
	{"clone(NEWNS)", unix.EPERM, cloneProbe(unix.CLONE_NEWNS | sigchld)},
	{"clone(NEWNET)", unix.EPERM, cloneProbe(unix.CLONE_NEWNET | sigchld)},
	{"clone(NEWPID)", unix.EPERM, cloneProbe(unix.CLONE_NEWPID | sigchld)},
	{"clone(NEWCGROUP)", unix.EPERM, cloneProbe(unix.CLONE_NEWCGROUP | sigchld)},
	{"clone3", unix.ENOSYS, sys(unix.SYS_CLONE3, 0, 0)},
	{"mount", unix.EPERM, sysStr(unix.SYS_MOUNT, nowhere, true, 0, 0, 0)},
	{"umount2", unix.EPERM, sysStr(unix.SYS_UMOUNT2, nowhere, false, 0)},
	{"pivot_root", unix.EPERM, sysStr(unix.SYS_PIVOT_ROOT, nowhere, true)},
	{"chroot", unix.EPERM, sysStr(unix.SYS_CHROOT, nowhere, false)},
	{"fsopen", unix.EPERM, sysStr(unix.SYS_FSOPEN, "agentnode-nofs", false, 0)},
	{"open_tree", unix.EPERM, sys(unix.SYS_OPEN_TREE, ^uintptr(0), 0, 0)},
	{"move_mount", unix.EPERM, sys(unix.SYS_MOVE_MOUNT, ^uintptr(0), 0, ^uintptr(0), 0, 0)},
	{"mount_setattr", unix.EPERM, sys(unix.SYS_MOUNT_SETATTR, ^uintptr(0), 0, 0, 0, 0)},
	{"ptrace(ATTACH)", unix.EPERM, sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, farPID, 0, 0)},
	{"process_vm_readv", unix.EPERM, sys(unix.SYS_PROCESS_VM_READV, farPID, 0, 0, 0, 0, 0)},
	{"keyctl", unix.EPERM, sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd) /* KEY_SPEC_SESSION_KEYRING, -3 */, 0)},
	{"add_key", unix.EPERM, sys(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0)},
	{"request_key", unix.EPERM, sys(unix.SYS_REQUEST_KEY, 0, 0, 0, 0)},
	{"bpf", unix.EPERM, sys(unix.SYS_BPF, 0xffff, 0, 0)},
	{"perf_event_open", unix.EPERM, sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0)},
	{"open_by_handle_at", unix.EPERM, sys(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0)},
	{"name_to_handle_at", unix.EPERM, sys(unix.SYS_NAME_TO_HANDLE_AT, ^uintptr(0), 0, 0, 0, 0)},
	{"kexec_load", unix.EPERM, sys(unix.SYS_KEXEC_LOAD, 0, 1000, 0, 0x7fff0000)},
	{"kexec_file_load", unix.EPERM, sys(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0xff00)},
	{"init_module", unix.EPERM, sys(unix.SYS_INIT_MODULE, 0, 0, 0)},
	{"finit_module", unix.EPERM, sys(unix.SYS_FINIT_MODULE, ^uintptr(0), 0, 0)},
	{"delete_module", unix.EPERM, sysStr(unix.SYS_DELETE_MODULE, "agentnode_nomodule", false, 0)},
	{"userfaultfd", unix.EPERM, sysFD(unix.SYS_USERFAULTFD, unix.O_CLOEXEC)},
	{"io_uring_setup", unix.EPERM, sys(unix.SYS_IO_URING_SETUP, 1, 0)},
	{"modify_ldt", unix.EPERM, sys(unix.SYS_MODIFY_LDT, 0, 0, 0)},
	{"personality(ADDR_NO_RANDOMIZE)", unix.EPERM, sys(unix.SYS_PERSONALITY, 0x0040000)},
	{"socket(AF_INET,STREAM,MPTCP)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, mptcp)},
	{"socket(AF_INET6,STREAM,MPTCP)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, mptcp)},
	{"socket(AF_INET,STREAM,MPTCP|junk)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, mptcp|junkHigh)},
	{"socket(AF_INET,STREAM,SCTP)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)},
	{"socket(AF_VSOCK)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
	{"socket(AF_ALG)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_ALG, unix.SOCK_SEQPACKET, 0)},
	{"socket(AF_PACKET)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)},
	{"socket(AF_NETLINK,RAW,AUDIT)", unix.EPERM, sysFD(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)},
	{"socketpair(AF_TIPC)", unix.EPERM, sys(unix.SYS_SOCKETPAIR, unix.AF_TIPC, unix.SOCK_STREAM, 0, 0)},
	// Beyond every syscall the filter knows: runc's patch answers ENOSYS,
	// so that newer libcs fall back to older calls.
	{"syscall 1000", unix.ENOSYS, sys(1000)},
}

type probeResults map[string]unix.Errno

func runProbeChild(t *testing.T, mode string) probeResults {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), probeEnv+"="+mode)
	var stderr []byte
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("probe child (%s): %v\n%s", mode, err, stderr)
	}
	var m map[string]int
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("probe child (%s) output %q: %v", mode, out, err)
	}
	r := probeResults{}
	for k, v := range m {
		r[k] = unix.Errno(v)
	}
	return r
}

func TestSeccompLiveSyscalls(t *testing.T) {
	filtered := runProbeChild(t, "syscalls")
	plain := runProbeChild(t, "syscalls-nofilter")
	for _, p := range liveProbes {
		got, ok := filtered[p.name]
		if !ok {
			t.Errorf("%s: no result", p.name)
			continue
		}
		if p.deny == 0 {
			if got == unix.EPERM || got == unix.ENOSYS {
				t.Errorf("%s: %v under the filter, want it to reach the kernel (without: %v)", p.name, got, plain[p.name])
			}
			continue
		}
		if got != p.deny {
			t.Errorf("%s: %v under the filter, want %v", p.name, errnoName(got), errnoName(p.deny))
		}
		if plain[p.name] == p.deny {
			// Without the filter the kernel said the same: this probe
			// cannot tell the filter apart here (e.g. not root).
			t.Logf("%s: also %v without the filter", p.name, errnoName(p.deny))
		}
	}
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return fmt.Sprintf("%s (%d)", unix.ErrnoName(e), int(e))
}

// tinyELF returns a static x86_64 executable whose entry point runs code.
func tinyELF(code []byte) []byte {
	const base, hdr = 0x400000, 64 + 56
	le := binary.LittleEndian
	b := []byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	b = le.AppendUint16(b, 2)    // ET_EXEC
	b = le.AppendUint16(b, 0x3e) // EM_X86_64
	b = le.AppendUint32(b, 1)    // EV_CURRENT
	b = le.AppendUint64(b, base+hdr)
	b = le.AppendUint64(b, 64) // program headers right after this header
	b = le.AppendUint64(b, 0)  // no section headers
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, 64)
	b = le.AppendUint16(b, 56)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	size := uint64(hdr + len(code))
	b = le.AppendUint32(b, 1) // PT_LOAD
	b = le.AppendUint32(b, 5) // R+X
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, size)
	b = le.AppendUint64(b, size)
	b = le.AppendUint64(b, 0x1000)
	return append(b, code...)
}

var (
	codeExit0    = []byte{0x31, 0xff, 0xb8, 60, 0, 0, 0, 0x0f, 0x05} // xor edi,edi; mov eax,60 (exit); syscall
	codeGetpid64 = []byte{0xb8, 39, 0, 0, 0, 0x0f, 0x05}             // mov eax,39 (getpid); syscall
	codeInt80    = []byte{0xb8, 20, 0, 0, 0, 0xcd, 0x80}             // mov eax,20 (i386 getpid); int 0x80
	codeX32      = []byte{0xb8, 39, 0, 0, 0x40, 0x0f, 0x05}          // mov eax,0x40000027 (x32 getpid); syscall
)

// TestSeccompLiveArchitectures: the filter covers x86_64 only, so a 32-bit
// call (int 0x80) and an x32 call (syscall number with bit 30 set) hit the
// bad-architecture action and the process dies of SIGSYS, while the same
// program making the 64-bit call exits normally.
func TestSeccompLiveArchitectures(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, code ...[]byte) string {
		var all []byte
		for _, c := range code {
			all = append(all, c...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, tinyELF(all), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	native := write("native", codeGetpid64, codeExit0)
	int80 := write("int80", codeInt80, codeExit0)
	x32 := write("x32", codeX32, codeExit0)

	// run returns how the program ended: "exit N" or the signal's name.
	run := func(path string, filtered bool) string {
		var cmd *exec.Cmd
		if filtered {
			cmd = exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), probeEnv+"=exec", probeExecEnv+"="+path)
		} else {
			cmd = exec.Command(path)
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v", path, err)
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return unix.SignalName(ws.Signal())
		}
		if ws.ExitStatus() == 3 {
			t.Errorf("%s: the probe child failed: %s", path, out)
		}
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	}

	for _, c := range []struct {
		path, plain, filtered string
	}{
		{native, "exit 0", "exit 0"},
		{x32, "exit 0", "SIGSYS"}, // unfiltered: -ENOSYS or the x32 getpid, then exit 0
		{int80, "exit 0", "SIGSYS"},
	} {
		plain, filtered := run(c.path, false), run(c.path, true)
		name := filepath.Base(c.path)
		if plain != c.plain {
			if name == "int80" && plain == "SIGSEGV" {
				// ia32 emulation is off in this kernel: int 0x80 faults
				// before seccomp sees it. Nothing to refuse, but it must
				// still not succeed.
				t.Logf("int 0x80 unavailable on this kernel (%s)", plain)
				if filtered == "exit 0" {
					t.Errorf("int80 under the filter: %s", filtered)
				}
				continue
			}
			t.Errorf("%s without the filter: %s, want %s", name, plain, c.plain)
		}
		if filtered != c.filtered {
			t.Errorf("%s under the filter: %s, want %s", name, filtered, c.filtered)
		}
	}
}
