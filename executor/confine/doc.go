// Package confine confines a trusted tool that runs on the host: the
// placement host_trust_policy allows for trusted/curated packages
// (executor/hostexec uses it; sandbox.host_confinement configures it).
// It sits with the host backend it serves, outside the kernel, which asks
// that backend (kernel/plan.Host) rather than probing the machine itself.
//
// # How
//
// Go cannot run code between fork and exec. A re-exec'd helper would cost a
// second process start per run: measured on a 2-core VM, re-executing the
// agentnode binary costs ~7 ms (package init), a dedicated Go helper with
// libseccomp 2-3 ms, against a goal of 2 ms. Instead, Start confines one
// fresh OS thread of agentnode and forks the tool from it: capabilities,
// no_new_privs, the Landlock domain and the seccomp filter are all attributes
// of a thread that fork copies, so the child is confined before its first
// instruction and keeps it through execve. The thread's goroutine stays
// locked to it and never unlocks, so the Go runtime runs nothing else there
// and destroys the thread at the end (and creates new threads from a template
// thread, never from a locked one). The rest of agentnode keeps its
// privileges. This costs about 0.4 ms per run (BenchmarkRunConfined against
// BenchmarkRunTrivial in executor/hostexec): the BPF program is compiled once
// per process.
//
// # What a confined tool gets
//
//   - No capabilities, even as root: the bounding, inheritable, ambient,
//     effective and permitted sets are emptied.
//   - Landlock: read and execute its package directory; read, write and
//     create in its work directory (no execute, like the sandbox's noexec
//     /tmp; no device nodes, sockets or fifos); read and execute the system's
//     software (SystemReadDirs); read a short list of files and directories
//     under /etc, /dev, /proc and /sys (SystemReadEtcDirs, SystemReadFiles,
//     SysCPU); read and write /dev/null, /dev/zero, /dev/full. Nothing else:
//     not the user's home directory, not /tmp, /run or /var, not the
//     agentnode home beyond the package's own directory, no /proc/<pid>
//     entries (not even the tool's own: /proc/self is resolved when the rule
//     is made, before the tool exists). With network none, every TCP (and,
//     from ABI 10, UDP) bind and connect is denied. From ABI 6, abstract unix
//     sockets and signals are scoped to the tool's own processes, so it
//     cannot signal agentnode or anything else; from ABI 9, pathname unix
//     sockets too. From ABI 7 the kernel audit log records the tool's
//     denials.
//   - seccomp, a deny list (everything else is allowed, since host tools
//     run ordinary host programs; the sandbox has the allowlist): socket(2)
//     with protocol 262 (MPTCP, which Landlock's TCP rules miss) and of
//     family AF_UNIX, always; with network none every socket(2); with
//     network declared every family but AF_INET and AF_INET6 (netlink,
//     packet, vsock, …). socketpair(2) stays (AF_UNIX only). The
//     DeniedSyscalls (ptrace, process_vm_*, pidfd_getfd, mount and the new
//     mount API, unshare, setns, bpf, kexec_*, module loading, keyctl,
//     perf_event_open, userfaultfd, io_uring_*, open_by_handle_at, clock
//     setters, reboot, …), clone with any CLONE_NEW* flag, and the TIOCSTI
//     and TIOCLINUX ioctls fail with EPERM; clone3 fails with ENOSYS so
//     that libc falls back to clone, whose flags seccomp can read. A
//     syscall of another architecture (i386 int 0x80, x32) kills the
//     process.
//   - seccomp, file metadata: the MetadataSyscalls (chmod, fchmod,
//     fchmodat, fchmodat2; chown, fchown, lchown, fchownat; utime,
//     utimes, futimesat; setxattr, lsetxattr, fsetxattr, setxattrat,
//     removexattr, lremovexattr, fremovexattr, removexattrat;
//     file_setattr), the inode-flag ioctls (FS_IOC_SETFLAGS,
//     FS_IOC_FSSETXATTR, FS_IOC_SETVERSION: chattr) and utimensat with a
//     path or with explicit times fail with EPERM, wherever the file is.
//     Only utimensat(fd, NULL, NULL, 0), futimens to the current time
//     (what touch does), stays.
//   - seccomp, resource limits: prlimit64 only on the caller (pid 0); on
//     any other pid, the tool's own included, it fails with EPERM, so a
//     tool can neither read nor set the limits of agentnode or of any
//     other process. setrlimit (always the caller) stays.
//
// # File metadata
//
// Landlock mediates opening, creating, removing and renaming files, not
// changing their metadata: without the rules above, a tool could chmod,
// chown, utimes or setxattr any file it can name, wherever Landlock lets it
// open nothing. It has no capabilities, but the owner of a file needs none:
// a tool of a root agentnode owns every root-owned file, so it could make
// /usr/bin/x setuid-root, a 0600 secret world-readable, or put an ACL
// (system.posix_acl_access is an xattr) on either. seccomp sees only the
// syscall's arguments, and the file is a path (a pointer it cannot follow)
// or a descriptor (a number it cannot resolve): it cannot tell the tool's
// work dir from anything else. The descriptor forms are no safer: Landlock
// lets a tool open the system's software, /dev/null and its package for
// reading, and fchmod, fchown, fsetxattr and the inode-flag ioctls need
// ownership, not a descriptor opened for writing. So all of them are
// refused everywhere, the work dir included: a tool cannot chmod its own
// files (cp without -p keeps a file's mode bits; `cp -p`, `tar x`, which
// sets each file's times unless given -m, and installers that chmod what
// they unpack, such as `pip install`, fail). futimens to the current time needs write access
// or ownership and sets only the times, to now: it is kept for touch, and
// lets a tool of a root agentnode set the times of a root-owned file it can
// open (its package, the system's software) to the current time — no mode,
// owner, attribute or chosen time.
//
// # Other processes
//
// prlimit64 on another process needs only the same user: without the rule
// a tool could give any process of its user (every root process, under a
// root agentnode) a CPU limit of a second, or set agentnode's RLIMIT_FSIZE
// to 0 so that the outcome record of its run could not be written. The
// filter is compiled once per process, before any tool exists, so it cannot
// know the tool's own pid: prlimit64 on it by number is refused too (libc's
// getrlimit/setrlimit and Go pass 0). As a second line executor/hostexec puts
// agentnode's own limits back after every tool run and kernel/dispatch
// before every audit record (kernel/ownlimits). Signals are scoped by
// Landlock (above); ptrace, process_vm_* and pidfd_getfd are denied.
//
// Pathname unix sockets (ssh-agent, D-Bus, the Docker socket, the OS
// keyring) need Landlock ABI 9 to be scoped, which this kernel generation
// lacks, so seccomp refuses socket(AF_UNIX) outright: a tool cannot create
// a socket that could connect to them, with or without network. The
// variables that point at them (SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS,
// DOCKER_HOST, XDG_RUNTIME_DIR) never reach a tool (hostexec.AllowedEnv).
//
// A tool whose manifest declares network (restricted or unrestricted) gets
// inet sockets without egress filtering on the host: allowed_domains is
// enforced only in the sandbox.
//
// # Requirements and modes
//
// Full confinement needs Landlock ABI MinABI (6, Linux 6.12) and seccomp
// filters. sandbox.host_confinement says what happens on a kernel with
// less (Assess): "required", the default, refuses the run with
// sandbox_unavailable; "best_effort" runs it with seccomp and whatever
// Landlock the kernel has, and the audit record carries a note
// ("unconfined: landlock unavailable", "partly confined: landlock ABI 3 <
// 6"). Whatever the mode, a confinement step that fails (including seccomp)
// refuses the run: nothing is started less confined than decided. Probe
// reports what the kernel and build can do (Landlock ABI, seccomp filters),
// once per process; Readiness.Assess applies a mode to it. executor/hostexec
// checks every confined run against it, and kernel/dispatch makes the same
// check at placement (through the host backend's plan.Host answer), so
// that a run the executor would refuse is refused before the decision
// record.
//
// # Limits
//
// Landlock does not stop a tool from reading files through descriptors it
// was given (only stdin, stdout and stderr), from mapping a file of its
// work directory executable through the dynamic loader, nor from using
// CPU, memory and processes: those limits are the sandbox's (cgroups). The
// scheduling calls that take a pid (setpriority, sched_setaffinity,
// sched_setscheduler, sched_setattr, ioprio_set) stay allowed, since
// libc's pthread calls pass thread ids to them: a tool can lower the
// priority of (renice) or pin other processes of its user, not raise it.
package confine
