//go:build cgo

package confine

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"unsafe"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// cloneNamespaceFlags are the CLONE_NEW* flags clone(2) accepts.
var cloneNamespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
}

// IPProtoMPTCP is IPPROTO_MPTCP, which Landlock's TCP rules do not cover.
const IPProtoMPTCP = 262

// low32 masks an int argument: the kernel reads only its low 32 bits.
const low32 = 0xffffffff

// newFilter returns the libseccomp filter for a tool: default allow, the
// deny list of the package documentation, EPERM for denied calls and
// process death for a foreign architecture (i386, x32).
func newFilter(network bool) (*seccomp.ScmpFilter, error) {
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	if err := addRules(f, network); err != nil {
		f.Release()
		return nil, err
	}
	return f, nil
}

func addRules(f *seccomp.ScmpFilter, network bool) error {
	eperm := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	if err := f.SetBadArchAction(seccomp.ActKillProcess); err != nil {
		return fmt.Errorf("seccomp bad-arch action: %w", err)
	}
	rule := func(name string, action seccomp.ScmpAction, conds ...seccomp.ScmpCondition) error {
		sc, err := syscallNumber(name)
		if err != nil {
			return err
		}
		if len(conds) == 0 {
			err = f.AddRule(sc, action)
		} else {
			err = f.AddRuleConditional(sc, action, conds)
		}
		if err != nil {
			return fmt.Errorf("seccomp rule for %s: %w", name, err)
		}
		return nil
	}
	cond := func(arg uint, op seccomp.ScmpCompareOp, values ...uint64) seccomp.ScmpCondition {
		c, err := seccomp.MakeCondition(arg, op, values...)
		if err != nil {
			panic(err) // constant arguments: a bug here
		}
		return c
	}
	// MakeCondition(arg, CompareMaskedEqual, mask, value): (arg & mask) == value.
	masked := func(arg uint, mask, value uint64) seccomp.ScmpCondition {
		return cond(arg, seccomp.CompareMaskedEqual, mask, value)
	}

	for _, name := range DeniedSyscalls {
		if err := rule(name, eperm); err != nil {
			return err
		}
	}
	for _, flag := range cloneNamespaceFlags {
		if err := rule("clone", eperm, masked(0, flag, flag)); err != nil {
			return err
		}
	}
	// clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
	// libc fall back to clone, whose flags are checked above.
	if err := rule("clone3", seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
		return err
	}
	for _, req := range deniedIoctls {
		if err := rule("ioctl", eperm, masked(1, low32, req)); err != nil {
			return err
		}
	}
	for _, name := range MetadataSyscalls {
		if err := rule(name, eperm); err != nil {
			return err
		}
	}
	// utimensat(fd, NULL, NULL, 0) (futimens to the current time, what
	// touch does) stays: a path (argument 1) or explicit times (argument
	// 2) are refused. The pointers are compared with NULL, never read.
	if err := rule("utimensat", eperm, cond(1, seccomp.CompareNotEqual, 0)); err != nil {
		return err
	}
	if err := rule("utimensat", eperm, cond(2, seccomp.CompareNotEqual, 0)); err != nil {
		return err
	}
	// prlimit64 only on the caller itself (pid 0). All 64 bits are
	// compared: a value whose low 32 bits (the pid_t the kernel reads) are
	// 0 but whose high bits are not is refused too, never let through.
	if err := rule("prlimit64", eperm, cond(0, seccomp.CompareNotEqual, 0)); err != nil {
		return err
	}
	if err := rule("socketpair", eperm, cond(0, seccomp.CompareNotEqual, unix.AF_UNIX)); err != nil {
		return err
	}
	if !network {
		return rule("socket", eperm)
	}
	// Network declared: only AF_INET (2) and AF_INET6 (10), never MPTCP.
	// The family comparisons use all 64 bits, so a value with high bits
	// set (which the kernel truncates to an int) is above 10 and denied.
	if err := rule("socket", eperm, masked(2, low32, IPProtoMPTCP)); err != nil {
		return err
	}
	if err := rule("socket", eperm, cond(0, seccomp.CompareLess, unix.AF_INET)); err != nil {
		return err
	}
	if err := rule("socket", eperm, cond(0, seccomp.CompareGreater, unix.AF_INET6)); err != nil {
		return err
	}
	for fam := uint64(unix.AF_INET + 1); fam < unix.AF_INET6; fam++ {
		if err := rule("socket", eperm, cond(0, seccomp.CompareEqual, fam)); err != nil {
			return err
		}
	}
	return nil
}

// syscallNumber resolves name with libseccomp, else (a libseccomp older
// than the call) through newerSyscalls.
func syscallNumber(name string) (seccomp.ScmpSyscall, error) {
	sc, err := seccomp.GetSyscallFromName(name)
	if err == nil {
		return sc, nil
	}
	if nr, ok := newerSyscalls[name]; ok {
		return seccomp.ScmpSyscall(nr), nil
	}
	return 0, fmt.Errorf("seccomp: syscall %s unknown to libseccomp: %w", name, err)
}

// compileFilter compiles the filter for network with libseccomp.
func compileFilter(network bool) ([]unix.SockFilter, error) {
	f, err := newFilter(network)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	return exportBPF(f)
}

// exportBPF has libseccomp write the program to a memfd and decodes it.
func exportBPF(f *seccomp.ScmpFilter) ([]unix.SockFilter, error) {
	fd, err := unix.MemfdCreate("agentnode-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp export: memfd: %w", err)
	}
	file := os.NewFile(uintptr(fd), "agentnode-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("seccomp export: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seccomp export: %w", err)
	}
	raw, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("seccomp export: %w", err)
	}
	const insn = int(unsafe.Sizeof(unix.SockFilter{}))
	if len(raw) == 0 || len(raw)%insn != 0 || len(raw)/insn > 4096 {
		return nil, fmt.Errorf("seccomp export: %d bytes is not a BPF program", len(raw))
	}
	prog := make([]unix.SockFilter, len(raw)/insn)
	for i := range prog {
		b := raw[i*insn:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:]),
		}
	}
	return prog, nil
}
