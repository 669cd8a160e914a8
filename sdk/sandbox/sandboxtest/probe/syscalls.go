package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	cloneNewUser = unix.CLONE_NEWUSER
	cloneNewNS   = unix.CLONE_NEWNS
	sigchld      = uintptr(unix.SIGCHLD)

	ipprotoMPTCP      = 262 // IPPROTO_MPTCP
	uffdUserModeOnly  = 1   // UFFD_USER_MODE_ONLY
	kexecSegmentMax   = 16  // KEXEC_SEGMENT_MAX
	invalidKexecFlags = 1 << 30
)

// errText names an errno ("EPERM (operation not permitted)").
func errText(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return fmt.Sprintf("%s (%v)", n, e)
		}
	}
	return err.Error()
}

// refused reports whether err is how a seccomp filter or a missing
// capability refuses a system call: EPERM or ENOSYS.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS)
}

// verdict turns the error of one attempt into a check result.
func verdict(what string, err error) (bool, string) {
	switch {
	case err == nil:
		return false, what + " succeeded"
	case refused(err):
		return true, what + " refused: " + errText(err)
	default:
		return false, what + " failed with " + errText(err) + ", not EPERM/ENOSYS: it was not refused, only rejected later by the kernel"
	}
}

// attempt is the verdict of one of several attempts a check makes.
type attempt struct {
	ok     bool
	detail string
}

func att(ok bool, detail string) attempt { return attempt{ok, detail} }

// all combines attempts: ok only if every one held.
func all(as ...attempt) (bool, string) {
	ok, detail := true, ""
	for i, a := range as {
		ok = ok && a.ok
		if i > 0 {
			detail += "; "
		}
		detail += a.detail
	}
	return ok, detail
}

// rawErr converts a raw helper's negative return into an error.
func rawErr(r int64) error {
	if r >= 0 {
		return nil
	}
	return syscall.Errno(-r)
}

// reap waits for child pid of a raw fork.
func reap(pid int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws, fmt.Errorf("wait4(%d): %w", pid, err)
		}
		return ws, nil
	}
}

// childVerdict judges a raw child that attempted a system call and exited
// with the errno (0: success). Death by SIGSYS is a seccomp kill action: the
// call was refused.
func childVerdict(what string, r int64) (bool, string) {
	if !rawSupported {
		return false, "cannot run on " + runtime.GOARCH
	}
	if r < 0 {
		return false, "fork for " + what + " failed: " + errText(rawErr(r))
	}
	ws, err := reap(int(r))
	if err != nil {
		return false, err.Error()
	}
	switch {
	case ws.Exited():
		if ws.ExitStatus() == 0 {
			return verdict(what, nil)
		}
		return verdict(what, syscall.Errno(ws.ExitStatus()))
	case ws.Signaled() && ws.Signal() == unix.SIGSYS:
		return true, what + " refused: the child was killed by SIGSYS (seccomp kill action)"
	case ws.Signaled():
		return false, fmt.Sprintf("%s: the child was killed by %v", what, ws.Signal())
	}
	return false, fmt.Sprintf("%s: unexpected wait status %#x", what, ws)
}

// scratchDir makes an empty directory for mount attempts: under /tmp, or,
// when /tmp is not writable, under HOME.
func scratchDir() (string, error) {
	var errs []error
	for _, parent := range []string{"/tmp", os.Getenv("HOME"), "/sandbox-home"} {
		if parent == "" {
			continue
		}
		d, err := os.MkdirTemp(parent, "probe-")
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no writable directory for a mount target: %w", errors.Join(errs...))
}

func checkMount([]string) (bool, string) {
	dir, err := scratchDir()
	if err != nil {
		return false, err.Error()
	}
	defer os.Remove(dir)
	err = unix.Mount("none", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m")
	if err == nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
	return verdict("mount(tmpfs, "+dir+")", err)
}

func checkUmount2([]string) (bool, string) {
	dir, err := scratchDir()
	if err != nil {
		return false, err.Error()
	}
	defer os.Remove(dir)
	// Not a mount point: a privileged caller gets EINVAL, an unprivileged
	// one EPERM (may_mount is checked first), a filtered one EPERM/ENOSYS.
	return verdict("umount2("+dir+")", unix.Unmount(dir, 0))
}

// unshareCheck attempts unshare(flag) in a single-threaded child (a
// multi-threaded process may not unshare a user namespace at all).
func unshareCheck(name string, flag uintptr) checkFunc {
	return func([]string) (bool, string) {
		return childVerdict("unshare("+name+")", forkUnshare(flag))
	}
}

func checkCloneNewUser([]string) (bool, string) {
	r := rawClone(cloneNewUser | sigchld)
	if !rawSupported {
		return false, "cannot run on " + runtime.GOARCH
	}
	if r > 0 {
		_, _ = reap(int(r))
	}
	return verdict("clone(CLONE_NEWUSER)", rawErr(r))
}

// cloneArgs is struct clone_args, version 0 (64 bytes).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64
}

func checkClone3NewUser([]string) (bool, string) {
	args := cloneArgs{flags: cloneNewUser, exitSignal: uint64(unix.SIGCHLD)}
	r := rawClone3(uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	if !rawSupported {
		return false, "cannot run on " + runtime.GOARCH
	}
	if r > 0 {
		_, _ = reap(int(r))
	}
	// clone3 passes its flags in memory, where a seccomp filter cannot look:
	// a profile must refuse clone3 as a whole (ENOSYS makes libcs fall back
	// to clone).
	return verdict("clone3(CLONE_NEWUSER)", rawErr(r))
}

func checkSetns([]string) (bool, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Joining our own UTS namespace changes nothing when it is allowed.
	fd, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// No namespace files (gVisor): any fd will do, since the filter
		// must refuse setns before the kernel looks at it (else EINVAL).
		fd, err = unix.Open("/", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return false, "opening /proc/thread-self/ns/uts: " + errText(err)
	}
	defer unix.Close(fd)
	return verdict("setns(own uts namespace)", unix.Setns(fd, unix.CLONE_NEWUTS))
}

func checkPtrace([]string) (bool, string) {
	if !rawSupported {
		return false, "cannot run on " + runtime.GOARCH
	}
	// The tracer is a thread; keep the whole attempt on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := forkPause()
	if r < 0 {
		return false, "fork: " + errText(rawErr(r))
	}
	pid := int(r)
	err := unix.PtraceSeize(pid)
	_ = unix.Kill(pid, unix.SIGKILL)
	_, _ = reap(pid)
	// Our own child, same uid: without a filter this succeeds even
	// unprivileged.
	return verdict("ptrace(PTRACE_SEIZE, own child)", err)
}

func checkKeyctl([]string) (bool, string) {
	_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	return verdict("keyctl(KEYCTL_GET_KEYRING_ID)", err)
}

func checkBPF([]string) (bool, string) {
	// union bpf_attr for BPF_MAP_CREATE: a one-entry array map.
	var attr [72]byte
	binary.LittleEndian.PutUint32(attr[0:], unix.BPF_MAP_TYPE_ARRAY)
	binary.LittleEndian.PutUint32(attr[4:], 4)  // key_size
	binary.LittleEndian.PutUint32(attr[8:], 4)  // value_size
	binary.LittleEndian.PutUint32(attr[12:], 1) // max_entries
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
	if e != 0 {
		return verdict("bpf(BPF_MAP_CREATE)", e)
	}
	_ = unix.Close(int(fd))
	return verdict("bpf(BPF_MAP_CREATE)", nil)
}

func checkPerfEventOpen([]string) (bool, string) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_TASK_CLOCK,
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		_ = unix.Close(fd)
	}
	return verdict("perf_event_open(task clock, self)", err)
}

func checkOpenByHandleAt([]string) (bool, string) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
	if err != nil {
		h = unix.NewFileHandle(1, make([]byte, 8)) // any handle: the permission check comes first
	}
	mfd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, "opening /: " + errText(err)
	}
	defer unix.Close(mfd)
	fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY|unix.O_CLOEXEC)
	if err == nil {
		_ = unix.Close(fd)
	}
	return verdict("open_by_handle_at(/)", err)
}

func checkKexecLoad([]string) (bool, string) {
	// Too many segments: after the permission check the kernel rejects the
	// call with EINVAL before it touches the loaded image.
	_, _, e1 := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, kexecSegmentMax+1, 0, 0, 0, 0)
	// Invalid flags: likewise.
	_, _, e2 := unix.Syscall6(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, invalidKexecFlags, 0)
	return all(att(verdict("kexec_load", errnoOrNil(e1))), att(verdict("kexec_file_load", errnoOrNil(e2))))
}

func checkInitModule([]string) (bool, string) {
	empty := []byte{0}
	// A zero-length image: after the permission check, ENOEXEC.
	_, _, e1 := unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, uintptr(unsafe.Pointer(&empty[0])))
	// Invalid flags: after the permission check, EINVAL.
	_, _, e2 := unix.Syscall(unix.SYS_FINIT_MODULE, ^uintptr(0), uintptr(unsafe.Pointer(&empty[0])), invalidKexecFlags)
	return all(att(verdict("init_module", errnoOrNil(e1))), att(verdict("finit_module", errnoOrNil(e2))))
}

func errnoOrNil(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func checkMPTCP([]string) (bool, string) {
	var res []attempt
	for _, fam := range []struct {
		name string
		af   int
	}{{"AF_INET", unix.AF_INET}, {"AF_INET6", unix.AF_INET6}} {
		what := "socket(" + fam.name + ", SOCK_STREAM, IPPROTO_MPTCP)"
		fd, err := unix.Socket(fam.af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, ipprotoMPTCP)
		switch {
		case err == nil:
			_ = unix.Close(fd)
			res = append(res, att(false, what+" succeeded"))
		case errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT):
			// The kernel has no MPTCP (or no IPv6): nothing to reach.
			res = append(res, att(true, what+": "+errText(err)+" (not available in this kernel; the filter is unproven)"))
		default:
			res = append(res, att(verdict(what, err)))
		}
	}
	return all(res...)
}

func checkUserfaultfd([]string) (bool, string) {
	// UFFD_USER_MODE_ONLY is allowed unprivileged whatever
	// vm.unprivileged_userfaultfd says.
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
	if e == 0 {
		_ = unix.Close(int(fd))
	}
	return verdict("userfaultfd(UFFD_USER_MODE_ONLY)", errnoOrNil(e))
}
