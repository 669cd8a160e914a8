// Package sandboxtest is the test kit for sandbox backends: Connect runs a
// sandbox.Backend through the real go-plugin gRPC path in memory,
// LaunchPlugin starts a built plugin binary the way agentnode does, and Run
// is the conformance and escape suite every backend must pass — the
// bundled libcontainer, Docker and Podman backends and any third-party one.
//
// # Running the suite against your backend
//
// In a test of your own (as root, on Linux/x86_64, with the go command
// installed: the suite builds its probe with it):
//
//	func TestConformance(t *testing.T) {
//		b := mybackend.New()
//		// or, to go through gRPC as agentnode does:
//		//   b := sandboxtest.Connect(t, info, mybackend.New())
//		//   b := sandboxtest.LaunchPlugin(t, "bin/agentnode-sandbox-mine")
//		sandboxtest.Run(t, b, sandboxtest.Config{
//			Image:      "agentnode/sandbox@sha256:...", // built by `agentnode sandbox build`
//			ImageStore: "/root/.agentnode/images",      // where it was built (sdk/sandbox/imagestore)
//		})
//	}
//
// or, for a plugin binary, without writing a test:
//
//	SANDBOXTEST_PLUGIN=bin/agentnode-sandbox-mine SANDBOXTEST_IMAGE=agentnode/sandbox@sha256:... \
//	SANDBOXTEST_IMAGE_STORE=$AGENTNODE_HOME/images \
//	go test github.com/agentnode/agentnode/sdk/sandbox/sandboxtest -run TestPluginBinary -v
//
// (SANDBOXTEST_SKIP=a,b fills Config.Skip,
// SANDBOXTEST_WORKSPACE_WRITE_REFUSED=1 Config.WorkspaceWriteRefused, and
// SANDBOXTEST_NO_USER_NAMESPACE=REASON Config.NoUserNamespace.)
//
// Run first asks Availability and fails the test when the backend is
// unavailable (check Availability yourself first if you want to skip
// instead). Then it runs every check as its own subtest, each a separate
// Backend.Run of the probe with Spec.Env ["FOO=bar"], Config.Limits
// (default 512 MiB, 256 pids, 1 CPU, 64 MiB tmp) and Config.Timeout
// (default 30s). A failure names the check, says what the sandbox must
// ensure, and shows what the probe saw from inside, the run's exit status
// and the tail of its output. A check your backend cannot pass can be listed
// in Config.Skip: it is skipped, and reported as NOT verified on stderr and
// in the test log; an unknown name in Skip fails the suite. Do not call Run
// from a parallel test: it sets an environment variable of the test process
// for its duration.
//
// # The probe
//
// The checks are observed from inside the container, identically for every
// mechanism, by a small static program: the package
// github.com/agentnode/agentnode/sdk/sandbox/sandboxtest/probe (ProbePackage),
// built with CGO_ENABLED=0 and -trimpath into a fresh package directory that
// becomes Spec.PackageDir, so the sandbox runs it as /pack/probe with
// Args ["/pack/probe", "<check>", args...]. For each check it prints one JSON
// line {"check":...,"ok":...,"detail":...}, where ok means "the sandbox
// held". The package directory also holds probe-suid, a setuid-root copy
// (when the suite runs as root). Set Config.Probe to use a prebuilt probe
// (for example when the module is vendored). The setup also plants
// AGENTNODE_SUITE_SECRET in the suite's own environment, and listens on the
// host's 127.0.0.1, on its own IPv4 address and on an abstract unix socket;
// a connection to any of them fails the network checks even if the probe
// missed it. After every run the suite looks for processes still running the
// probe binaries on the host (file identity, through bind mounts and pid
// namespaces); for the runs that end abnormally it also looks for host
// mounts of the package directory or rootfs and cgroups named after the
// RunID.
//
// # What each check proves
//
// The run itself:
//   - exit-code: the exit status is reported (probe exits 7 → ExitCode 7).
//   - stdio-roundtrip: 1 MiB of stdin comes back on stdout; stderr arrives.
//   - stdout-integrity: 8 MiB of stdout arrive complete and in order.
//   - cleanup-verified: a run reports CleanupVerified and leaves nothing.
//
// Identity and privileges (from /proc/self/status and the id calls):
//   - uid, gid: uid/gid 1000 (real, effective, saved, fs), no group 0.
//   - cap-eff, cap-prm, cap-bnd, cap-inh, cap-amb: every capability set is
//     empty.
//   - no-new-privs: NoNewPrivs 1.
//   - seccomp-mode: Seccomp 2 (a filter is installed).
//   - rlimits: NOFILE at most 1024, NPROC finite, CORE 0, FSIZE at most
//     1 GiB, each with soft = hard; raising a hard limit fails (EPERM).
//
// System calls that must be refused with EPERM or ENOSYS (or kill the
// caller with SIGSYS). Each is attempted so that, without a filter, it would
// succeed or get past the permission check, and so that it is harmless if it
// does:
//   - sys-mount, sys-umount2: mount(2) of a tmpfs, umount2(2).
//   - sys-unshare-user, sys-unshare-mount: unshare(CLONE_NEWUSER),
//     unshare(CLONE_NEWNS) (in a single-threaded child).
//   - sys-setns: setns(2) into the process's own UTS namespace.
//   - sys-ptrace: PTRACE_SEIZE of the probe's own child (no capability
//     needed without a filter).
//   - sys-keyctl, sys-bpf, sys-perf-event-open, sys-open-by-handle-at,
//     sys-userfaultfd: keyctl, bpf map creation, perf_event_open on itself,
//     open_by_handle_at (the "shocker" escape), userfaultfd in user mode.
//   - sys-kexec-load, sys-init-module: kexec_load and kexec_file_load,
//     init_module and finit_module.
//   - sys-clone-newuser: clone(2) with CLONE_NEWUSER.
//   - sys-clone3-newuser: clone3(2) with CLONE_NEWUSER; clone3 must be
//     refused whole, because a filter cannot read its flags.
//   - sys-mptcp-socket: socket(AF_INET/AF_INET6, SOCK_STREAM, IPPROTO_MPTCP).
//   - sys-int80, sys-x32: getpid through the i386 (int $0x80) and x32 ABIs
//     fails, so an x86_64 filter cannot be bypassed through them. What the
//     kernel does with them differs between hosts (without the i386 ABI,
//     int $0x80 faults before any filter sees it), so the suite first runs
//     the attempt on the host without a sandbox and passes the answer to the
//     probe: a SIGSYS kill, EPERM or ENOSYS passes; a fault (SIGSEGV) passes
//     only where the host faults too; success never does.
//
// File systems:
//   - rootfs-readonly: / is mounted ro; nothing can be created in / or /etc.
//   - pack-readonly: the package is at /pack, mounted ro.
//   - proc-sys-readonly: /proc/sys files cannot be opened for writing.
//   - tmp-noexec: a copy of the probe in /tmp cannot be executed (EACCES).
//   - writable-noexec: the same for every writable place (/tmp, HOME,
//     /dev/shm, every tmpfs, ...).
//   - tmp-writable: /tmp is writable.
//   - tmp-size-limit: /tmp fills up at about Limits.TmpBytes.
//   - proc-kcore-masked, proc-sysrq-masked, sys-firmware-masked: /proc/kcore
//     reads nothing, /proc/sysrq-trigger cannot be written, /sys/firmware
//     is empty or unreadable.
//
// Network (Spec.Network false: loopback only):
//   - net-only-lo: the only interface is lo (netlink and /sys/class/net).
//   - net-host-loopback, net-host-ip, net-host-abstract-unix: the suite's
//     listeners on the host's 127.0.0.1, its own IPv4 address and an
//     abstract unix socket cannot be reached, and accept nothing.
//   - net-metadata: 169.254.169.254:80 cannot be reached.
//   - net-dns-resolver, net-dns-public: neither the host's first
//     /etc/resolv.conf nameserver nor 8.8.8.8 answers on port 53 (UDP or
//     TCP).
//   - no-engine-socket: no Docker, Podman, containerd or CRI-O socket is
//     present and connectable.
//
// The host is out of sight:
//   - env-secret-absent: AGENTNODE_SUITE_SECRET, set in the suite's own
//     process, is in neither the probe's environment nor pid 1's.
//   - env-passed: Spec.Env (FOO=bar) arrives.
//   - host-pids-invisible: at most 16 processes are visible, and neither the
//     suite's process nor the host's pid 1 (matched by start time).
//   - hostname-isolated: the hostname is not the host's.
//   - setuid-no-elevate: /pack/probe-suid (setuid root) still runs as uid
//     1000.
//   - dev-minimal: /dev holds only null, zero, full, random, urandom, tty
//     (with the right device numbers), console, ptmx, pts, shm, mqueue and
//     the fd/std*/core links; no disks, mem, kmsg, kvm, fuse, tun.
//
// Resource limits:
//   - pids-limit: a fork bomb's forks fail (EAGAIN) once it has about
//     Limits.Pids tasks (8 tolerated beyond).
//   - memory-limit: touching 4× a 64 MiB limit gets the process killed
//     (exit 137) or refused memory; never does it finish.
//   - cpu-limit: spinners (one per host CPU, at least two) run under a
//     0.1 CPU limit. The CPU time a spinner gets proves nothing by itself:
//     on a loaded host an unconfined one gets little too. So the probe
//     waits on stdin while the suite finds its process on the host (the
//     probe binary, a token in its command line) and reads its cgroup (the
//     cpu controller's hierarchy in cgroup v1, the unified one in v2) and
//     the tightest CFS quota on it and its ancestors (cpu.cfs_quota_us /
//     cpu.cfs_period_us, or cpu.max), and starts a control: the same
//     spinners unconfined on the host. Then both spin, at least 2 s, and
//     while the quota is right but has not throttled yet up to 10 s. The
//     suite reads the throttling count (nr_throttled in cpu.stat of the
//     cgroup setting the quota) before stopping the spin. It fails when
//     the spinners used more than 0.13 CPU seconds per wall second
//     (getrusage), when the cgroup has no quota or one other than 0.1
//     (within rounding), or when a probe thread is outside the cgroup. It
//     passes when the quota is right and throttled the spinners, or when
//     they stayed within the limit while the control got at least 0.2
//     CPUs. Anything else (the quota right but not seen to bite, or the
//     cgroup unreadable, as for a backend whose processes the host cannot
//     see, on a host too loaded for the control) is inconclusive: reported
//     like a check that cannot run here (skipped, "not verified"), never
//     passed. 0.1 is small enough for the quota to bite on a loaded host.
//
// Ending runs:
//   - timeout-cleanup: a run with Timeout 1s that sleeps 60 s is killed,
//     reported TimedOut, Killed and CleanupVerified, returns before the sleep
//     could have ended, and leaves no process, mount or cgroup behind.
//   - output-flood: when the host's stdout writer fails after 1 MiB of a
//     64 MiB flood, Run returns with an error or Killed, not by the run's
//     timeout, and leaves nothing behind.
//
// Sealed egress (Spec.EgressSocket): the setup also serves a unix socket
// (mode 0666, in a directory of its own) that answers like the host's
// CONNECT proxy — 200 with a nonce header, then an echo — and counts its
// connections. The image must carry the egress forwarder and the socket's
// mount point (cmd/agentnode/imagebuild's build does). These checks choose egress
// themselves; Config.WithEgress runs all the others with egress too:
//   - egress-absent: without EgressSocket no proxy variable is set, nothing
//     listens on the forwarder's address, no socket is mounted, and the
//     suite's socket sees no connection.
//   - egress-exit-code: under the forwarder (pid 1) the probe's exit 7 is
//     still ExitCode 7, cleanup verified.
//   - egress-proxy-env: HTTPS_PROXY, https_proxy, HTTP_PROXY, http_proxy
//     are profile.EgressProxyURL; NO_PROXY and no_proxy are set and empty.
//   - egress-reaches-host: a CONNECT to $HTTPS_PROXY reaches the suite's
//     socket (which records the request line and counts the connection)
//     and the tunnel echoes; the probe must report the host's nonce.
//   - egress-net-only-lo: the only interface is still lo.
//   - egress-no-other-way: the host's 127.0.0.1 and own-address listeners,
//     its abstract unix socket, 169.254.169.254 and 8.8.8.8 (TCP and UDP
//     53) stay unreachable, and the listeners accept nothing.
//   - egress-socket-mount: profile.EgressSocketPath is a socket on a
//     read-only mount; nothing can be created beside or below it.
//   - egress-only-new-mount: the probe's mount points with and without
//     egress differ by exactly profile.EgressSocketPath.
//   - egress-pid1-confined: pid 1 is the forwarder and the probe's parent,
//     with uid/gid 1000, no capabilities, no_new_privs and seccomp 2.
//
// After every egress run the suite also looks for host mounts of the
// socket's directory: the cleanup proof must cover the socket mount.
//
// A workspace (Spec.Workspace, the user's directory given with
// `--workspace`): the setup makes a host directory of mode 0777 holding
// data.txt (a token, mode 0666: only the mount stands in the way of
// writing it) and exe (an executable copy of the probe), with outside.txt
// beside it. These checks run with it granted, read-only unless said;
// after each the suite checks on the host that data.txt and the
// directory's entries are as they were, and looks for host mounts of it:
//   - workspace-cwd: the working directory is the workspace, at its host
//     path; data.txt reads by its relative name.
//   - workspace-readonly: the workspace is mounted ro and readable;
//     opening data.txt for writing, creating a file or a directory,
//     renaming and chmod fail with EROFS.
//   - workspace-noexec: the mount is nosuid, nodev, noexec; exe cannot be
//     run (EACCES).
//   - workspace-confined: outside.txt cannot be read (by its path, through
//     WS/.., or ../ from the working directory) and the workspace's parent
//     lists nothing else.
//   - workspace-writable: a writable workspace is the working directory,
//     mounted rw, nosuid, nodev, noexec; a file the probe writes there by
//     its relative name appears on the host with its content.
//   - workspace-writable-noexec: in a writable workspace neither exe nor a
//     copy of the probe written there can be run (EACCES).
//
// A backend that cannot make a writable workspace safe (Docker: its bind
// mounts take no noexec) sets Config.WorkspaceWriteRefused: the two
// writable checks then require that Run refuses the run with an error,
// with no output, nothing written and nothing left behind.
//
// The sandbox's own user namespace:
//   - userns-mapped: /proc/self/uid_map and gid_map have no extent that
//     maps an id to itself, and map the sandbox user (1000) to a host id
//     that is neither 1000 nor 0.
//   - userns-host-file: files of mode 0600 in the package directory, one
//     owned by the user running the suite and (as root) one by host uid
//     1000, cannot be opened (EACCES).
//   - userns-host-ids: two runs wait at once while the suite reads their
//     /proc/PID/status on the host: each one's four uids (and gids) are one
//     id, not 0, 1000, the suite's own or an account of the host, and the
//     two runs' differ.
//
// A backend without a user namespace of its own (Docker, Podman) sets
// Config.NoUserNamespace to say why: the three checks then report "not
// applicable: <reason>" (skipped, loudly).
//
// gVisor's second kernel (Config.Runtime gvisor; other runtimes report
// "not applicable"):
//   - gvisor-kernel: /proc/version inside differs from the host's, and
//     uname does not report the host's release.
//   - gvisor-enosys: of remap_file_pages, futex_waitv, cachestat and mseal
//     (allowed by the profile's filter), one the host kernel implements
//     (measured unconfined by the suite) answers ENOSYS inside.
//
// Under gVisor the probe also expects what gVisor's kernel shows where it
// differs from Linux (the probe gets SANDBOXTEST_RUNTIME=gvisor): no CapAmb
// or NoNewPrivs line in /proc/self/status (prctl answers instead), no
// namespace files (setns is tried on another fd), gVisor's own /dev/fuse and
// /dev/net/tun, int $0x80 decoded by a kernel without an i386 table (any
// failure but a pid passes), workspace mounts without nosuid and nodev
// (gVisor ignores both: no_new_privs is always set and its gofer opens no
// host device), chmod on a read-only workspace refused with EPERM.
//
// The suite proves it can fail: its own tests run every check against an
// insecure backend that executes the probe directly on the host, and most
// checks must fail there (cpu-limit among them: the host's cgroup has no
// 0.1 CPU quota), and timeout-cleanup against one that leaves the timed-out
// probe running.
package sandboxtest
