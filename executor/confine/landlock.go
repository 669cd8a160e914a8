package confine

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockABI returns the kernel's Landlock ABI version, 0 when Landlock
// is not supported or not enabled.
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Landlock access rights (kernel UAPI, include/uapi/linux/landlock.h).
const (
	fsRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsExec = unix.LANDLOCK_ACCESS_FS_EXECUTE
	// fsWorkDir: everything in the work directory except executing files
	// and making device nodes, sockets and fifos.
	fsWorkDir = fsRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SYM |
		unix.LANDLOCK_ACCESS_FS_REFER
	// fsDevice: /dev/null and the like (they have no ioctls worth
	// denying; with the right, isatty on them says ENOTTY as usual).
	fsDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// fsFileOnly are the rights a rule on a non-directory may carry.
	fsFileOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right the kernel's ABI knows: all of them
// are denied unless a rule grants them.
func handledFS(abi int) uint64 {
	fs := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: EXECUTE … MAKE_SYM
	if abi >= 2 {
		fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 9 {
		fs |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	return fs
}

// handledNet is every network right the ABI knows, when the tool has no
// network (no rule grants any port: every TCP and, from ABI 10, UDP bind
// and connect is denied).
func handledNet(abi int, network bool) uint64 {
	var n uint64
	if network {
		return 0
	}
	if abi >= 4 {
		n |= unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 10 {
		n |= unix.LANDLOCK_ACCESS_NET_BIND_UDP | unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP
	}
	return n
}

func scoped(abi int) uint64 {
	if abi >= 6 {
		return unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return 0
}

// landlockRule grants access beneath path.
type landlockRule struct {
	path     string
	access   uint64
	optional bool // a missing path is skipped
}

// rules are the Landlock rules of p.
func (p *Policy) rules() []landlockRule {
	rs := []landlockRule{
		{path: p.WorkDir, access: fsWorkDir},
		{path: p.PackageDir, access: fsRead | fsExec},
	}
	if p.Workspace != "" {
		access := uint64(fsRead)
		if p.WorkspaceWritable {
			access = fsWorkDir
		}
		rs = append(rs, landlockRule{path: p.Workspace, access: access})
	}
	for _, d := range ReadOnlyDirs() {
		rs = append(rs, landlockRule{path: d, access: fsRead | fsExec, optional: true})
	}
	for _, f := range SystemReadFiles {
		rs = append(rs, landlockRule{path: f, access: unix.LANDLOCK_ACCESS_FS_READ_FILE, optional: true})
	}
	for _, f := range SystemWriteFiles {
		rs = append(rs, landlockRule{path: f, access: fsDevice, optional: true})
	}
	return rs
}

// landlockRuleset creates the ruleset of p for the kernel's ABI and returns
// its (close-on-exec) descriptor.
func (p *Policy) landlockRuleset(abi int) (int, error) {
	attr := unix.LandlockRulesetAttr{
		Handled_access_fs:  handledFS(abi),
		Handled_access_net: handledNet(abi, p.Network),
		Scoped:             scoped(abi),
	}
	size := unsafe.Offsetof(attr.Handled_access_net) // ABI 1-3
	switch {
	case abi >= 6:
		size = unsafe.Offsetof(attr.Quiet_access_fs)
	case abi >= 4:
		size = unsafe.Offsetof(attr.Scoped)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	ruleset := int(fd)
	for _, r := range p.rules() {
		if err := addRule(ruleset, r, attr.Handled_access_fs); err != nil {
			unix.Close(ruleset)
			return -1, err
		}
	}
	return ruleset, nil
}

func addRule(ruleset int, r landlockRule, handled uint64) error {
	fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if r.optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock rule for %s: %w", r.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", r.path, err)
	}
	access := r.access & handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFileOnly
	}
	if access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock rule for %s: %w", r.path, errno)
	}
	return nil
}

// restrictSelf enforces the ruleset on the calling thread, which must have
// no_new_privs set. From ABI 7 the tool's denials go to the kernel's audit
// log.
func restrictSelf(ruleset, abi int) error {
	var flags uintptr
	if abi >= 7 {
		flags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), flags, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
