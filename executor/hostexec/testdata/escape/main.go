// Command escape is the attacker of executor/hostexec's confinement tests: a
// host tool that tries, one by one, the escapes its arguments name and
// prints one line per attempt, "ARG: allowed" or "ARG: denied: ERRNO".
// An argument is NAME or NAME=PARAM; $VARIABLES in PARAM are expanded.
// Besides its own checks it makes the attacks on file metadata and on
// other processes' resource limits of executor/confine/confinetest/metaattack
// (their PARAM is a path, or a pid where "ppid" is its parent).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/executor/confine/confinetest/metaattack"
)

var checks = map[string]func(param string) error{
	"write":          func(p string) error { return os.WriteFile(p, []byte("pwned"), 0o600) },
	"append":         appendTo,
	"mkdir":          func(p string) error { return os.Mkdir(p, 0o700) },
	"remove":         os.Remove,
	"read":           readSome,
	"readdir":        func(p string) error { _, err := os.ReadDir(p); return err },
	"exec":           func(p string) error { return exec.Command(p).Run() },
	"tcp_connect":    func(p string) error { return connectInet(unix.SOCK_STREAM, 0, p) },
	"mptcp_connect":  func(p string) error { return connectInet(unix.SOCK_STREAM, 262, p) },
	"udp_sendto":     udpSendto,
	"tcp_listen":     listenNoBind,
	"unix_connect":   unixConnect,
	"unix_abstract":  func(p string) error { return unixConnect("@" + p) },
	"socketpair":     socketpair,
	"netlink":        func(string) error { return socketOnly(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE) },
	"packet":         func(string) error { return socketOnly(unix.AF_PACKET, unix.SOCK_RAW, 0) },
	"unix_highbits":  func(string) error { return socketOnly(1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0) },
	"mptcp_highbits": func(string) error { return socketOnly(unix.AF_INET, unix.SOCK_STREAM, 1<<32|262) },
	"ptrace": func(p string) error {
		return errno(unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(atoi(p)), 0, 0, 0, 0))
	},
	"kill":           func(p string) error { return unix.Kill(atoi(p), 0) },
	"unshare":        func(string) error { return unix.Unshare(unix.CLONE_NEWUSER) },
	"unshare_ns":     func(string) error { return unix.Unshare(unix.CLONE_NEWNS) },
	"clone_newuser":  func(string) error { return spawn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}) },
	"clone_newnet":   func(string) error { return spawn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNET}) },
	"clone3":         func(string) error { return spawn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWTIME}) },
	"fork":           func(string) error { return spawn(nil) },
	"setns":          func(string) error { return errno(unix.Syscall(unix.SYS_SETNS, 0, 0, 0)) },
	"mount":          func(p string) error { return unix.Mount("none", p, "tmpfs", 0, "") },
	"chroot":         func(p string) error { return unix.Chroot(p) },
	"bpf":            func(string) error { return errno(unix.Syscall(unix.SYS_BPF, 0, 0, 0)) },
	"keyctl":         func(string) error { return errno(unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0, 0)) },
	"keyread":        keyRead,
	"perf":           func(string) error { return errno(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, 0, 0, 0, 0)) },
	"userfaultfd":    func(string) error { return errno(unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)) },
	"io_uring":       ioUring,
	"init_module":    func(string) error { return errno(unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, 0)) },
	"open_by_handle": func(string) error { return errno(unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, 0, 0, 0)) },
	"tiocsti":        func(string) error { return errno(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, 0)) },
	"settime":        func(string) error { return errno(unix.Syscall(unix.SYS_CLOCK_SETTIME, 0, 0, 0)) },
	"caps":           capabilities,
	"x32":            func(string) error { return errno(unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)) },
	"i386":           i386,
	"gpfault":        gpfault,
}

func main() {
	for name, check := range metaattack.Checks {
		checks[name] = check
	}
	for _, arg := range os.Args[1:] {
		name, param, _ := strings.Cut(arg, "=")
		check, ok := checks[name]
		if !ok {
			fmt.Printf("%s: unknown check\n", name)
			os.Exit(2)
		}
		if err := check(os.ExpandEnv(param)); err != nil {
			var en syscall.Errno
			if errors.As(err, &en) {
				fmt.Printf("%s: denied: %s (%v)\n", arg, unix.ErrnoName(en), err)
			} else {
				fmt.Printf("%s: denied: %v\n", arg, err)
			}
			continue
		}
		fmt.Printf("%s: allowed\n", arg)
	}
}

// keyRead reads the key of type "user" described p from the user keyring
// (@u) of the kernel, as agentnode's seal key cache keeps it
// (kernel/lockfile): search, then read the payload.
func keyRead(p string) error {
	serial, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", p, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, serial, buf, 0)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("read an empty key")
	}
	return nil
}

// int80 makes a system call through the i386 ABI (int $0x80).
func int80(nr uintptr) uintptr

// i386 calls getpid (20 on i386) through int $0x80. On a kernel without the
// i386 ABI the instruction raises a general protection fault before any
// seccomp filter sees it; Go's runtime would turn that SIGSEGV into "fatal
// error: fault" and exit status 2, so the SIGSEGV handler is reset first:
// the fault kills the process by SIGSEGV, which the test can tell apart
// from the filter's SIGSYS.
func i386(string) error {
	if err := faultKills(); err != nil {
		return err
	}
	r := int64(int80(20))
	switch {
	case r < 0 && r > -4096:
		return syscall.Errno(-r)
	case int(r) != os.Getpid():
		return fmt.Errorf("int 0x80 getpid returned %d", r)
	}
	return nil
}

// int81 raises a general protection fault (int $0x81).
func int81()

// gpfault faults as int $0x80 does on a kernel without the i386 ABI, after
// the same preparation as i386: the test's control must see it as SIGSEGV.
func gpfault(string) error {
	if err := faultKills(); err != nil {
		return err
	}
	int81()
	return errors.New("int $0x81 returned")
}

// faultKills resets SIGSEGV to its default action (kill) and makes the
// process non-dumpable, so a fault leaves no core file.
func faultKills() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	var act [4]uint64 // struct sigaction: sa_handler SIG_DFL, no flags
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
		return fmt.Errorf("rt_sigaction(SIGSEGV): %w", e)
	}
	return nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func errno(_, _ uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// readSome reads up to 64 bytes (devices like /dev/urandom never end).
func readSome(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Read(make([]byte, 64))
	return err
}

func appendTo(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func socketOnly(domain, typ, proto int) error {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(domain), uintptr(typ), uintptr(proto))
	if e != 0 {
		return e
	}
	unix.Close(int(fd))
	return nil
}

// connectInet connects to 127.0.0.1:PORT.
func connectInet(typ, proto int, port string) error {
	fd, err := unix.Socket(unix.AF_INET, typ, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Port: atoi(port), Addr: [4]byte{127, 0, 0, 1}})
}

func udpSendto(port string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte("escaped"), 0, &unix.SockaddrInet4{Port: atoi(port), Addr: [4]byte{127, 0, 0, 1}})
}

// listenNoBind listens on an unbound TCP socket: the kernel picks a port.
func listenNoBind(string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Listen(fd, 1)
}

func unixConnect(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte("escaped"))
	return err
}

func socketpair(string) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	unix.Close(fds[0])
	unix.Close(fds[1])
	return nil
}

func spawn(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = attr
	return cmd.Run()
}

func ioUring(string) error {
	var params [120]byte
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e != 0 {
		return e
	}
	unix.Close(int(fd))
	return nil
}

// capabilities succeeds when the process holds any capability, or, as
// root, could regain one at exec (bounding set).
func capabilities(string) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return nil
		}
	}
	for c := 0; c < 64 && os.Geteuid() == 0; c++ {
		v, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0)
		if e != 0 {
			break
		}
		if v != 0 {
			return nil
		}
	}
	return errors.New("no capabilities")
}
