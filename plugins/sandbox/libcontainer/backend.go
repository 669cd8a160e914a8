package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"

	// Device rules (specconv's default devices) need the cgroup devices
	// controller support registered.
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/reaper"
	"github.com/agentnode/agentnode/sdk/sandbox/stdiopipe"
)

// Defaults for where containers live on the host.
const (
	// DefaultStateRoot holds libcontainer's per-container state directories.
	DefaultStateRoot = "/run/agentnode/libcontainer"
	// DefaultCgroupParent is the absolute cgroup path (in every hierarchy)
	// under which each run gets <parent>/<RunID>.
	DefaultCgroupParent = "/agentnode"
)

// maxRunIDLen bounds RunID; it becomes a directory name twice over.
const maxRunIDLen = 128

// ioGrace is how long Run waits for its output copiers to drain after the
// container is gone before it closes the pipes under them.
const ioGrace = 2 * time.Second

// backend implements sandbox.Backend with libcontainer.
type backend struct {
	log          hclog.Logger
	stateRoot    string
	cgroupParent string
	geteuid      func() int // os.Geteuid; replaced in tests
	// noUserNS runs without the user namespace and its own root: for the
	// benchmark that measures their cost only, never set otherwise.
	noUserNS bool
	// rootless: this process is not root (rootless.go). The user's own
	// subordinate ids, its delegated cgroup subtree, a state root of its
	// own.
	rootless bool
	// subuidFile and subgidFile hold agentnode's reservation of
	// subordinate ids (userns.go): subid.UIDFile and subid.GIDFile, or
	// private copies in tests.
	subuidFile, subgidFile string
	runsc                  string      // gVisor's runsc (gvisor.go): runscPath
	owner                  string      // ownerLabel value: this process
	mntNS                  string      // this process's mount namespace at start
	warming                atomic.Bool // a cgroup lock warm-up (warmup.go) is under way
	// reaper kills and destroys a run's container should this process
	// die mid-run, or hang past the run's deadline (sdk/sandbox/reaper).
	reaper *reaper.Reaper
	// pool holds containers prepared for the next runs of a long-lived
	// host (pool.go).
	pool warmPool

	rootOnce sync.Once
	rootErr  error
}

var _ sandbox.Backend = (*backend)(nil)

func newBackend(log hclog.Logger) *backend {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	b := &backend{log: log, stateRoot: DefaultStateRoot, cgroupParent: DefaultCgroupParent, geteuid: os.Geteuid, reaper: reaper.New(), runsc: runscPath}
	b.subuidFile, b.subgidFile = subidFiles()
	if uid := os.Geteuid(); uid != 0 {
		b.rootless = true
		b.stateRoot = rootlessStateRoot(uid)
		b.cgroupParent = cgdelegate.Parent(uid)
		ensureMapperPath()
	}
	if id, err := processID(os.Getpid()); err == nil {
		b.owner = id
	}
	b.mntNS, _ = os.Readlink("/proc/self/ns/mnt")
	return b
}

// --- availability ---

// Availability reports whether this host can run req's rootfs: root, seccomp
// (compiled in and in the kernel), the cgroup controllers the profile's
// limits need, agentnode's reservation of subordinate ids (every sandbox
// gets a user namespace mapped into it: userns.go), and an unpacked rootfs
// directory.
func (b *backend) Availability(_ context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	if req == nil {
		return nil, errors.New("libcontainer: nil AvailabilityRequest")
	}
	no := func(reason, format string, args ...any) (*sandbox.AvailabilityResponse, error) {
		return &sandbox.AvailabilityResponse{Reason: reason, Detail: fmt.Sprintf(format, args...)}, nil
	}
	if runtime.GOARCH != "amd64" {
		return no(sandbox.ReasonIncompatible, "the sandbox profile's seccomp filter is for x86_64 only, not %s", runtime.GOARCH)
	}
	if euid := b.geteuid(); euid != 0 {
		if detail := rootlessProblem(euid); detail != "" {
			return no(sandbox.ReasonNotPermitted, "%s", detail)
		}
	}
	if detail := seccompProblem(); detail != "" {
		return no(sandbox.ReasonIncompatible, "%s", detail)
	}
	if b.rootless {
		if detail := rootlessIDsProblem(); detail != "" {
			return no(sandbox.ReasonNotInstalled, "%s", detail)
		}
	} else {
		if detail := cgroupProblem(); detail != "" {
			return no(sandbox.ReasonIncompatible, "%s", detail)
		}
		if _, err := b.reservation(); err != nil {
			return no(sandbox.ReasonNotInstalled, "every sandbox needs a user namespace: %v", err)
		}
	}
	rt, err := sandbox.NormalizeRuntime(req.Runtime)
	if err != nil {
		return no(sandbox.ReasonRuntimeMissing, "%v", err)
	}
	detail := ""
	if rt == sandbox.RuntimeGVisor {
		problem, version := b.gvisorProblem()
		if problem != "" {
			return no(sandbox.ReasonRuntimeMissing, "%s", problem)
		}
		detail = fmt.Sprintf("%s version %s", b.runsc, version)
	}
	if req.ImageStore == "" {
		return no(sandbox.ReasonImageMissing, "no image store holding %s (run `agentnode sandbox build`)", req.Image)
	}
	rootfs, err := imagestore.RootfsDir(req.ImageStore, req.Image)
	if err != nil {
		return no(sandbox.ReasonImageMissing, "%v", err)
	}
	fi, err := os.Stat(rootfs)
	if err != nil {
		return no(sandbox.ReasonImageMissing, "rootfs of %s: %v", req.Image, err)
	}
	if !fi.IsDir() {
		return no(sandbox.ReasonImageMissing, "rootfs %s is not a directory", rootfs)
	}
	// The host asks before every sandboxed run: let that run's first
	// cgroup migration find the kernel's lock warm (warmup.go). When no
	// run follows (doctor), one no-op migration was wasted.
	b.warmCgroupLock()
	return &sandbox.AvailabilityResponse{Available: true, Runtime: rt, Detail: detail}, nil
}

// seccompProblem says why seccomp filters cannot be installed, or "".
func seccompProblem() string {
	if !seccomp.Enabled {
		return "built without seccomp support (needs cgo and -tags seccomp)"
	}
	if maj, minor, _ := seccomp.Version(); maj < 2 || (maj == 2 && minor < 4) {
		return fmt.Sprintf("libseccomp %d.%d is too old (need >= 2.4)", maj, minor)
	}
	// SECCOMP_GET_ACTION_AVAIL (Linux 4.14) answers only when the kernel
	// has filter mode; ask for the action the profile refuses with.
	const getActionAvail = 2
	action := uint32(unix.SECCOMP_RET_ERRNO)
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, getActionAvail, 0, uintptr(unsafe.Pointer(&action))); errno != 0 {
		return fmt.Sprintf("kernel seccomp filters unavailable: %v", errno)
	}
	return ""
}

// requiredV1 are the cgroup v1 controllers the profile's limits depend on.
var requiredV1 = []string{"cpu", "memory", "pids", "devices", "freezer"}

// cgroupProblem says why the profile's cgroup limits cannot be enforced
// here, or "".
func cgroupProblem() string {
	if cgroups.IsCgroup2UnifiedMode() {
		data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return fmt.Sprintf("cgroup v2: %v", err)
		}
		have := strings.Fields(string(data))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !slices.Contains(have, c) {
				return fmt.Sprintf("cgroup v2 controller %q is not available", c)
			}
		}
		if err := unix.Access("/sys/fs/cgroup", unix.W_OK); err != nil {
			return fmt.Sprintf("cgroup v2 root not writable: %v", err)
		}
		return ""
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil {
		return fmt.Sprintf("reading cgroup mounts: %v", err)
	}
	return cgroupV1Problem(mounts)
}

// cgroupV1Problem checks the cgroup v1 hierarchies in mounts: each required
// controller mounted at its root and writable, and swap accounting.
func cgroupV1Problem(mounts []*mountinfo.Info) string {
	found := map[string]string{}
	for _, m := range mounts {
		if m.FSType != "cgroup" || m.Root != "/" {
			continue // a sub-tree: absolute cgroup paths do not fit
		}
		for _, opt := range strings.Split(m.VFSOptions, ",") {
			if _, ok := found[opt]; !ok {
				found[opt] = m.Mountpoint
			}
		}
	}
	for _, c := range requiredV1 {
		mp, ok := found[c]
		if !ok {
			return fmt.Sprintf("cgroup v1 controller %q is not mounted", c)
		}
		if err := unix.Access(mp, unix.W_OK); err != nil {
			return fmt.Sprintf("cgroup v1 %s hierarchy %s not writable: %v", c, mp, err)
		}
	}
	// Memory limits are memory+swap: without swap accounting the limit
	// cannot be set as the profile says.
	if _, err := os.Stat(filepath.Join(found["memory"], "memory.memsw.limit_in_bytes")); err != nil {
		return "cgroup v1 memory controller without swap accounting (memory.memsw.*)"
	}
	return ""
}

// --- run ---

// validateRunID accepts [a-z0-9-]+ of bounded length: the id names the
// state directory and the cgroup, so nothing else may pass.
func validateRunID(id string) error {
	if id == "" || len(id) > maxRunIDLen {
		return fmt.Errorf("libcontainer: run id must be 1 to %d characters", maxRunIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("libcontainer: run id %q: only [a-z0-9-] allowed", id)
		}
	}
	return nil
}

// Run runs req in a fresh container, enforces its timeout and ctx, and
// always destroys the container and proves it is gone before returning.
// The container is one prepared for req's spec (pool.go) when the host
// allows a warm pool and one is ready, a new one otherwise; either serves
// this run only.
func (b *backend) Run(ctx context.Context, req *sandbox.RunRequest) (resp *sandbox.RunResponse, err error) {
	if req == nil {
		return nil, errors.New("libcontainer: nil RunRequest")
	}
	id := req.RunID
	if err := validateRunID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, context.Cause(ctx))
	}
	rt, err := sandbox.NormalizeRuntime(req.Spec.Runtime)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	if rt == sandbox.RuntimeGVisor {
		return b.runGVisor(ctx, req) // never from the warm pool
	}
	if req.Warm.Size > 0 {
		w := b.pool.take(ctx, b, req.Spec)
		// The next run like this one finds a container ready: prepared
		// once this one is done, not competing with it for the CPU.
		defer b.pool.fill(b, req.Spec)
		if w != nil {
			b.log.Debug("run in a prepared container", "run_id", id, "container", w.id)
			return b.runBox(ctx, w, req)
		}
	}
	box, err := b.createBox(id, req.Spec)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	return b.runBox(ctx, box, req)
}

// box is one container made for one run: created, and when prepared
// (pool.go) started up to the exec of the tool.
type box struct {
	id        string // the container's id: the run's, or a prepared one's
	container *libcontainer.Container
	proc      *libcontainer.Process
	slot      *idSlot
	root      *runRoot
	rootfs    string
	baseline  int
	// Set on a prepared box: its stdio pipes, made before its run's
	// streams are known, and its reaper arming (no deadline).
	pipes *stdiopipe.Pipes
	armed *reaper.Run
	// mounted identifies the host paths a prepared box has mounted
	// (pool.go, hostIDs).
	mounted []fileID
}

// createBox makes the container of spec under id: the hardened config, a
// user namespace on a free slot of ids, the run's own root, the
// libcontainer container. On error nothing of it is left.
func (b *backend) createBox(id string, spec sandbox.Spec) (_ *box, err error) {
	// The unpacked rootfs of the image the host verified in its store.
	rootfs, err := imagestore.RootfsDir(spec.ImageStore, spec.Image)
	if err != nil {
		return nil, err
	}
	spec.RunID = id
	config, proc, err := b.configure(spec)
	if err != nil {
		return nil, err
	}
	if spec.EgressSocket != "" {
		if err := checkEgressImage(rootfs); err != nil {
			return nil, err
		}
	}
	if err := b.ensureStateRoot(); err != nil {
		return nil, err
	}
	// Its own user namespace, on a slot of ids no other live run holds
	// (userns.go); without the reservation nothing runs.
	slot, err := b.userNamespace(config)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			slot.release()
		}
	}()
	baseline, err := countMountsUnder(rootfs)
	if err != nil {
		return nil, err
	}
	// The run's own root (workspace.go): one container root can pass to,
	// and with a workspace one that has its mount point.
	var wsPath string
	if spec.Workspace != nil && b.rootless {
		return nil, errRootlessWorkspace
	}
	if spec.Workspace != nil {
		if err := profile.CheckWorkspace(*spec.Workspace); err != nil {
			return nil, err
		}
		wsPath = spec.Workspace.Path
		if err := idmapWorkspace(config, wsPath, slot); err != nil {
			return nil, err
		}
	}
	var root *runRoot
	if (slot != nil && !slot.rootless) || wsPath != "" {
		if root, err = b.makeRunRoot(id, rootfs, wsPath); err != nil {
			return nil, err
		}
		config.Rootfs = root.merged
	}
	container, err := libcontainer.Create(b.stateRoot, id, config)
	if err != nil {
		if rerr := root.remove(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if errors.Is(err, libcontainer.ErrExist) {
			// Someone else's container: never touch it.
			return nil, fmt.Errorf("run id %s is already in use: %w", id, err)
		}
		return nil, fmt.Errorf("creating container %s: %w", id, err)
	}
	return &box{id: id, container: container, proc: proc, slot: slot, root: root, rootfs: rootfs, baseline: baseline}, nil
}

// teardown destroys x's container and its root and proves them gone, then
// releases its slot of ids. When that proof fails the slot is held until
// this process ends (no other run is given the ids of one that may still
// live) and the reaper keeps the container, to try again then.
func (b *backend) teardown(x *box, armed *reaper.Run) error {
	err := b.destroyAndVerify(x.container, x.id, x.rootfs, x.baseline)
	if err == nil {
		err = x.root.remove()
	}
	if err != nil {
		b.log.Error("container cleanup not verified", "run_id", x.id, "error", err)
		return err
	}
	armed.Disarm()
	x.slot.release()
	return nil
}

// runBox runs req in x, then always destroys x and proves it gone, also
// when execute fails or panics.
func (b *backend) runBox(ctx context.Context, x *box, req *sandbox.RunRequest) (resp *sandbox.RunResponse, err error) {
	var pipes *stdiopipe.Pipes
	var armed *reaper.Run
	defer func() {
		if armed == nil {
			armed = x.armed // a prepared box whose run never started
		}
		cleanErr := b.teardown(x, armed)
		if pipes != nil {
			if werr := pipes.Wait(ioGrace); werr != nil && err == nil {
				err = werr
			}
		}
		switch {
		case cleanErr != nil:
			resp, err = nil, errors.Join(err, cleanErr)
		case err != nil:
			resp = nil
		case resp != nil:
			resp.CleanupVerified = true
		}
	}()
	resp, pipes, armed, err = b.execute(ctx, x, req)
	return resp, err
}

// configure builds the libcontainer config and the process from the
// hardened profile.
func (b *backend) configure(run sandbox.Spec) (*configs.Config, *libcontainer.Process, error) {
	spec, err := profile.ForRun(run)
	if err != nil {
		return nil, nil, fmt.Errorf("profile: %w", err)
	}
	if spec == nil || spec.Root == nil || spec.Process == nil || spec.Linux == nil {
		return nil, nil, errors.New("profile: incomplete spec (root, process and linux are required)")
	}
	p := spec.Process
	// Defence in depth: the profile promises these; refuse if it did not.
	if p.User.UID == 0 || p.User.GID == 0 {
		return nil, nil, fmt.Errorf("profile: refusing to run as uid %d gid %d", p.User.UID, p.User.GID)
	}
	if !p.NoNewPrivileges {
		return nil, nil, errors.New("profile: refusing to run without no_new_privileges")
	}
	if p.Terminal {
		return nil, nil, errors.New("profile: terminals are not supported")
	}
	spec.Linux.CgroupsPath = b.cgroupParent + "/" + run.RunID

	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName:       run.RunID,
		UseSystemdCgroup: false,
		Spec:             spec,
		RootlessEUID:     b.rootless,
		RootlessCgroups:  b.rootless,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("specconv: %w", err)
	}

	if b.owner != "" {
		config.Labels = append(config.Labels, ownerLabel+"="+b.owner)
	}
	if config.Rlimits, err = convertRlimits(p.Rlimits); err != nil {
		return nil, nil, err
	}

	nnp := p.NoNewPrivileges
	proc := &libcontainer.Process{
		Args:            p.Args,
		Env:             p.Env,
		UID:             int(p.User.UID),
		GID:             int(p.User.GID),
		Cwd:             p.Cwd,
		NoNewPrivileges: &nnp,
		// Never nil: a nil set would leave the bounding set untouched.
		Capabilities: capsOf(p.Capabilities),
		Init:         true,
	}
	for _, g := range p.User.AdditionalGids {
		proc.AdditionalGroups = append(proc.AdditionalGroups, int(g))
	}
	return config, proc, nil
}

func capsOf(c *specs.LinuxCapabilities) *configs.Capabilities {
	if c == nil {
		return &configs.Capabilities{}
	}
	return &configs.Capabilities{
		Bounding:    c.Bounding,
		Effective:   c.Effective,
		Inheritable: c.Inheritable,
		Permitted:   c.Permitted,
		Ambient:     c.Ambient,
	}
}

// ensureStateRoot creates the state root 0700 (and its parent) once.
func (b *backend) ensureStateRoot() error {
	b.rootOnce.Do(func() {
		if err := os.MkdirAll(b.stateRoot, 0o700); err != nil {
			b.rootErr = fmt.Errorf("state root: %w", err)
			return
		}
		if err := os.Chmod(b.stateRoot, 0o700); err != nil {
			b.rootErr = fmt.Errorf("state root: %w", err)
			return
		}
		if b.rootless {
			b.rootErr = checkOwnDirs(b.stateRoot)
		}
	})
	return b.rootErr
}

// execute starts the tool in x (a prepared box: lets it exec), wires its
// stdio and waits for it to end, killing it on timeout, cancellation or an
// output failure. It returns the copiers still draining output; the caller
// waits for them after the container is destroyed.
func (b *backend) execute(ctx context.Context, x *box, req *sandbox.RunRequest) (*sandbox.RunResponse, *stdiopipe.Pipes, *reaper.Run, error) {
	id, container, proc := req.RunID, x.container, x.proc
	pipes := x.pipes
	if pipes != nil {
		pipes.Attach(req.Stdin, req.Stdout, req.Stderr)
	} else {
		var err error
		if pipes, err = stdiopipe.New(req.Stdin, req.Stdout, req.Stderr); err != nil {
			return nil, nil, nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
		}
		attachStdio(pipes, proc)
	}
	// Before the process starts, the reaper learns of it: should this
	// process die from here on, the container is killed and destroyed at
	// once, and should it hang, killed Grace after the deadline.
	armed, err := b.reaper.Arm(reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: x.id, Owner: b.owner}, req.Timeout)
	if err != nil {
		pipes.Abort()
		return nil, nil, nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	x.armed.Disarm() // a prepared box's arming without a deadline: replaced
	// The timeout counts from here, before the start, as the reaper's
	// deadline does.
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	start := func() error { return container.Run(proc) }
	if x.pipes != nil {
		start = container.Exec
	}
	if err := start(); err != nil {
		pipes.Abort()
		return nil, nil, armed, fmt.Errorf("libcontainer: starting run %s: %w", id, err)
	}
	pipes.Start()

	type waited struct {
		state *os.ProcessState
		err   error
	}
	done := make(chan waited, 1)
	go func() {
		st, err := proc.Wait()
		done <- waited{st, err}
	}()
	resp := &sandbox.RunResponse{}
	kill := func() {
		resp.Killed = true
		if err := container.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
			b.log.Warn("killing container", "run_id", id, "error", err)
			_ = proc.Signal(unix.SIGKILL)
		}
	}
	w, cause := await(ctx, b.log, id, done, timeout, pipes, resp, kill)

	if w.state == nil {
		return nil, pipes, armed, errors.Join(cause, fmt.Errorf("libcontainer: waiting for run %s: %w", id, w.err))
	}
	ws, ok := w.state.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return nil, pipes, armed, errors.Join(cause, fmt.Errorf("libcontainer: run %s: unexpected wait status %T", id, w.state.Sys()))
	case ws.Signaled():
		resp.ExitCode = 128 + int(ws.Signal())
		if ws.Signal() == unix.SIGKILL {
			resp.Killed = true // us, or the kernel enforcing a limit (OOM)
		}
	default:
		resp.ExitCode = ws.ExitStatus()
	}
	// The memory cgroup counts the OOM killer's kills (oom.go): that is
	// how a run killed for memory is told from any other SIGKILL.
	if n, err := oomKills(container); err != nil {
		b.log.Warn("reading the OOM kill count", "run_id", id, "error", err)
	} else if n > 0 {
		resp.OOMKilled = true
	}
	if cause != nil {
		return nil, pipes, armed, cause
	}
	return resp, pipes, armed, nil
}

// destroyAndVerify destroys the container and proves nothing of it is left.
func (b *backend) destroyAndVerify(c *libcontainer.Container, id, rootfs string, baseline int) error {
	err := c.Destroy()
	if errors.Is(err, libcontainer.ErrRunning) {
		// Only on a failure path (the tool was not waited for): kill it.
		_ = c.Signal(unix.SIGKILL)
	}
	verr := err
	if err == nil {
		verr = b.verifyGone(id, rootfs, baseline)
	}
	for i := 0; verr != nil && i < 3; i++ {
		// cgroup removal can race with the last exiting task.
		time.Sleep(time.Duration(20<<i) * time.Millisecond)
		err = c.Destroy()
		verr = b.verifyGone(id, rootfs, baseline)
	}
	switch {
	case verr == nil:
		return nil
	case err != nil:
		return fmt.Errorf("libcontainer: destroying %s: %w; %w", id, err, verr)
	default:
		return verr
	}
}

// attachStdio hands the container's ends of pipes to p; nil ends become
// /dev/null.
func attachStdio(pipes *stdiopipe.Pipes, p *libcontainer.Process) {
	if f := pipes.ChildStdin(); f != nil {
		p.Stdin = f
	}
	if f := pipes.ChildStdout(); f != nil {
		p.Stdout = f
	}
	if f := pipes.ChildStderr(); f != nil {
		p.Stderr = f
	}
}

// checkEgressImage checks that the rootfs has what sealed egress needs: the
// forwarder and the socket's mount point, both regular files reached
// without a symlink. Without the mount point runc would create it in the
// unpacked image on the host (the rootfs is read-only only inside).
func checkEgressImage(rootfs string) error {
	for _, p := range []string{profile.EgressForwarderPath, profile.EgressSocketPath} {
		if err := regularInRoot(rootfs, p); err != nil {
			return fmt.Errorf("the image cannot run sealed egress (rebuild it with `agentnode sandbox build`): %w", err)
		}
	}
	return nil
}

// regularInRoot checks that every component of p below root exists and is
// not a symlink, and that p is a regular file.
func regularInRoot(root, p string) error {
	cur := root
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		switch last := i == len(parts)-1; {
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink", cur)
		case !last && !fi.IsDir():
			return fmt.Errorf("%s is not a directory", cur)
		case last && !fi.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file", cur)
		}
	}
	return nil
}

// await waits for a started run's end (done), killing it (kill) at its
// timeout, when ctx ends (cancelled, or stopped by the host at its output
// limit: the run still answers, so the host learns whether cleanup was
// proven) or when its tool I/O fails, which is then the returned cause. The
// run's end is always waited for, and its stdin closed. Native and gVisor
// runs share it.
func await[W any](ctx context.Context, log hclog.Logger, id string, done <-chan W, timeout <-chan time.Time,
	pipes *stdiopipe.Pipes, resp *sandbox.RunResponse, kill func()) (W, error) {
	var (
		w     W
		cause error
	)
	select {
	case w = <-done:
	case <-timeout:
		resp.TimedOut = true
		kill()
		w = <-done
	case <-ctx.Done():
		log.Debug("run cancelled", "run_id", id, "cause", context.Cause(ctx))
		kill()
		w = <-done
	case err := <-pipes.Failed():
		cause = fmt.Errorf("libcontainer: run %s: %w", id, err)
		kill()
		w = <-done
	}
	pipes.CloseStdin()
	return w, cause
}
