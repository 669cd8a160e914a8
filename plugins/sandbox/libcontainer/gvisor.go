package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/stdiopipe"
)

// gVisor runs (Spec.Runtime gvisor). The same profile, image and tool I/O
// as a native run, handed to gVisor's runsc instead of libcontainer: the
// profile's OCI spec (profile.ForRun) becomes the config.json of a bundle
// in the run's own root directory (workspace.go), whose root is the
// read-only bind mount of the image's verified rootfs a native run gets;
// the cgroup path is the native run's, <cgroup parent>/<run id>, so the
// memory, pids and CPU limits hold on the sandbox's processes (the Sentry,
// the gofer) as on a native run's. runsc runs with a state root of this
// plugin's own (<state root>-runsc), its network stack off (--network=none:
// loopback only), the profile's seccomp filter installed inside gVisor too
// (--oci-seccomp) and, when the sealed egress socket is mounted,
// --host-uds=open so that it can be connected to. The tool's stdio are
// runsc's own: `runsc run` hands them to the container.
//
// What differs from a native run: no user namespace of the plugin's (the
// tool's ids are gVisor's, and no host process runs as them), hence no
// workspace (it is an idmapped mount natively: under gVisor the sandbox
// user could not write a writable one, or would own the host user's files
// through it); no warm pool (pool.go serves native runs only); no
// OOM-kill count (runsc removes the sandbox's cgroup as the run ends).

// runscPath is gVisor's runsc, by its absolute path (Debian's runsc):
// backend.runsc, which tests may point elsewhere.
const runscPath = "/usr/bin/runsc"

// errGVisorWorkspace refuses a workspace under gVisor.
var errGVisorWorkspace = errors.New("a workspace is not available under gVisor on this backend (the sandbox has no user namespace to map it with)")

// runscRoot is runsc's state root: this plugin's own.
func (b *backend) runscRoot() string { return b.stateRoot + "-runsc" }

// SupportsRuntime: native through libcontainer, gvisor through runsc
// (sandbox.RuntimeSupport); Availability says whether runsc is usable.
func (b *backend) SupportsRuntime(rt string) bool {
	return rt == sandbox.RuntimeNative || rt == sandbox.RuntimeGVisor
}

// runscProbe caches a successful `runsc --version` per binary (its size
// and modification time): availability is asked before every run.
var runscProbe struct {
	sync.Mutex
	key     string
	version string
}

// gvisorProblem says why this plugin cannot run gVisor now, or "", and
// runsc's version.
func (b *backend) gvisorProblem() (problem, version string) {
	if b.rootless {
		return "gVisor runs need root on this backend (runsc's sandbox and cgroups)", ""
	}
	fi, err := os.Stat(b.runsc)
	if err != nil {
		return fmt.Sprintf("gVisor's runsc is not installed (%v; Debian: apt-get install runsc)", err), ""
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Sprintf("%s is not an executable file", b.runsc), ""
	}
	key := fmt.Sprintf("%s:%d:%d", b.runsc, fi.Size(), fi.ModTime().UnixNano())
	runscProbe.Lock()
	defer runscProbe.Unlock()
	if runscProbe.key == key {
		return "", runscProbe.version
	}
	out, err := exec.Command(b.runsc, "--version").CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("runsc version ")) {
		return fmt.Sprintf("%s --version: %v: %q", b.runsc, err, bytes.TrimSpace(out)), ""
	}
	v, _, _ := strings.Cut(strings.TrimPrefix(string(out), "runsc version "), "\n")
	runscProbe.key, runscProbe.version = key, v
	return "", v
}

// runscArgs are runsc's global flags for a run (egress: the sealed egress
// socket is mounted) followed by args.
func (b *backend) runscArgs(egress bool, args ...string) []string {
	out := []string{"--root", b.runscRoot(), "--network=none", "--oci-seccomp"}
	if egress {
		out = append(out, "--host-uds=open")
	}
	return append(out, args...)
}

// runscCmd runs a runsc subcommand (not `run`) in runsc's root and
// returns its error with its output.
func (b *backend) runscCmd(args ...string) error {
	out, err := exec.Command(b.runsc, append([]string{"--root", b.runscRoot()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runsc %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// writeBundle writes the run's OCI config.json into its root directory
// and returns the bundle directory.
func (b *backend) writeBundle(run sandbox.Spec, root *runRoot) error {
	spec, err := profile.ForRun(run)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if spec == nil || spec.Root == nil || spec.Process == nil || spec.Linux == nil {
		return errors.New("profile: incomplete spec (root, process and linux are required)")
	}
	p := spec.Process
	// Defence in depth, as for a native run (configure).
	switch {
	case p.User.UID == 0 || p.User.GID == 0:
		return fmt.Errorf("profile: refusing to run as uid %d gid %d", p.User.UID, p.User.GID)
	case !p.NoNewPrivileges:
		return errors.New("profile: refusing to run without no_new_privileges")
	case p.Terminal:
		return errors.New("profile: terminals are not supported")
	case spec.Linux.Seccomp == nil:
		return errors.New("profile: refusing to run without a seccomp filter")
	}
	spec.Root.Path = root.merged
	spec.Linux.CgroupsPath = b.cgroupParent + "/" + run.RunID
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	spec.Annotations[ownerLabel] = b.owner
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root.dir, "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// runGVisor runs req under runsc and always removes the container and
// proves it gone (runsc's state, the cgroups, the run's root) before it
// returns.
func (b *backend) runGVisor(ctx context.Context, req *sandbox.RunRequest) (resp *sandbox.RunResponse, err error) {
	id, spec := req.RunID, req.Spec
	if detail, _ := b.gvisorProblem(); detail != "" {
		return nil, fmt.Errorf("libcontainer: run %s: %s: %s", id, sandbox.ReasonRuntimeMissing, detail)
	}
	if spec.Workspace != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, errGVisorWorkspace)
	}
	rootfs, err := imagestore.RootfsDir(spec.ImageStore, spec.Image)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	if spec.EgressSocket != "" {
		if err := checkEgressImage(rootfs); err != nil {
			return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
		}
	}
	if err := b.ensureStateRoot(); err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	baseline, err := countMountsUnder(rootfs)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	root, err := b.makeRunRoot(id, rootfs, "")
	if err != nil {
		return nil, fmt.Errorf("libcontainer: run %s: %w", id, err)
	}
	spec.RunID = id
	if err := b.writeBundle(spec, root); err != nil {
		return nil, errors.Join(fmt.Errorf("libcontainer: run %s: %w", id, err), root.remove())
	}
	pipes, err := stdiopipe.New(req.Stdin, req.Stdout, req.Stderr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("libcontainer: run %s: %w", id, err), root.remove())
	}
	armed, err := b.reaper.Arm(reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: id, Owner: b.owner, Runsc: true}, req.Timeout)
	if err != nil {
		pipes.Abort()
		return nil, errors.Join(fmt.Errorf("libcontainer: run %s: %w", id, err), root.remove())
	}
	defer func() {
		cleanErr := b.removeGVisor(id, rootfs, baseline, root)
		if cleanErr == nil {
			armed.Disarm()
		} else {
			b.log.Error("gVisor container cleanup not verified", "run_id", id, "error", cleanErr)
		}
		if werr := pipes.Wait(ioGrace); werr != nil && err == nil {
			err = werr
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

	cmd := exec.Command(b.runsc, b.runscArgs(spec.EgressSocket != "", "run", "--bundle", root.dir, id)...)
	if f := pipes.ChildStdin(); f != nil {
		cmd.Stdin = f
	}
	if f := pipes.ChildStdout(); f != nil {
		cmd.Stdout = f
	}
	if f := pipes.ChildStderr(); f != nil {
		cmd.Stderr = f
	}
	// Should this plugin die, runsc goes too (the reaper removes the
	// sandbox, which runsc's attached mode also ends).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL}
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	if err := cmd.Start(); err != nil {
		pipes.Abort()
		return nil, fmt.Errorf("libcontainer: starting run %s under runsc: %w", id, err)
	}
	pipes.Start()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	resp = &sandbox.RunResponse{}
	kill := func() {
		resp.Killed = true
		if err := b.runscCmd("kill", id, "KILL"); err != nil {
			// Not started yet, or gone: runsc itself goes, and with
			// it (attached) the sandbox; delete --force makes sure.
			b.log.Debug("runsc kill", "run_id", id, "error", err)
			_ = cmd.Process.Kill()
		}
	}
	werr, cause := await(ctx, b.log, id, done, timeout, pipes, resp, kill)
	if cause != nil {
		return nil, cause
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			// runsc itself was killed: not the tool's status.
			resp.Killed = true
			resp.ExitCode = 128 + int(ws.Signal())
			break
		}
		// runsc exits with the tool's status, 128+n for signal n.
		resp.ExitCode = ws.ExitStatus()
		if resp.ExitCode == 128+int(unix.SIGKILL) {
			resp.Killed = true
		}
	default:
		return nil, fmt.Errorf("libcontainer: waiting for run %s under runsc: %w", id, werr)
	}
	return resp, nil
}

// removeGVisor removes run id's gVisor container (runsc delete --force:
// the sandbox, the gofer, its cgroups, runsc's state) and the run's root,
// and proves them gone: no state of id in runsc's root, no cgroup
// <parent>/<id> in any hierarchy, no mount left (verifyGone), no run root.
func (b *backend) removeGVisor(id, rootfs string, baseline int, root *runRoot) error {
	var err error
	for i := 0; i < 4; i++ {
		if i > 0 {
			// cgroup removal can race with the last exiting task.
			time.Sleep(time.Duration(20<<i) * time.Millisecond)
		}
		if err = b.deleteRunsc(id); err != nil {
			continue
		}
		if err = b.gvisorGone(id, rootfs, baseline); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	return root.remove()
}

// deleteRunsc force-deletes container id from runsc's root when it is
// there (killing what still runs), and removes its cgroups if runsc left
// them (empty: its processes are gone).
func (b *backend) deleteRunsc(id string) error {
	if runscHas(b.runscRoot(), id) {
		if err := b.runscCmd("delete", "--force", id); err != nil && runscHas(b.runscRoot(), id) {
			return fmt.Errorf("libcontainer: %w", err)
		}
	}
	mounts, err := selfMounts(func(m *mountinfo.Info) (bool, bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if dir, ok := cgroupDir(m, b.cgroupParent+"/"+id); ok {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("libcontainer: removing cgroup %s: %w", dir, err)
			}
		}
	}
	return nil
}

// runscHas reports whether runsc's root holds state of container id: its
// state file "<id>_sandbox:<id>.state" (or its lock) or a directory of
// its name.
func runscHas(root, id string) bool {
	ents, err := os.ReadDir(root)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if n := e.Name(); n == id || strings.HasPrefix(n, id+"_") {
			return true
		}
	}
	return false
}

// gvisorGone is verifyGone for a gVisor run, plus runsc's root.
func (b *backend) gvisorGone(id, rootfs string, baseline int) error {
	err := b.verifyGone(id, rootfs, baseline)
	if runscHas(b.runscRoot(), id) {
		err = errors.Join(err, fmt.Errorf("libcontainer: runsc still holds state of container %s in %s", id, b.runscRoot()))
	}
	return err
}

// reapGVisor is the reaper's and the orphan reaper's work on a gVisor
// run whose owner is owner: kill it, and when final remove it, prove it
// gone and remove its root. A run whose root another plugin process owns
// is left alone.
func (b *backend) reapGVisor(id, owner string, final bool) error {
	got, err := os.ReadFile(filepath.Join(b.rootsDir(), id, "owner"))
	if err != nil || string(got) != owner {
		return nil
	}
	if !final {
		if runscHas(b.runscRoot(), id) {
			return b.runscCmd("kill", id, "KILL")
		}
		return nil
	}
	merged := filepath.Join(b.rootsDir(), id, "root")
	baseline, err := countMountsUnder(merged) // the root's own bind mount
	if err != nil {
		return err
	}
	return b.removeGVisor(id, merged, baseline, &runRoot{dir: filepath.Join(b.rootsDir(), id), merged: merged})
}

// reapGVisorOrphans removes the gVisor containers of dead plugin
// processes (before reapOrphanRoots removes their roots).
func (b *backend) reapGVisorOrphans() (reaped int, err error) {
	ents, err := os.ReadDir(b.rootsDir())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("libcontainer: listing %s: %w", b.rootsDir(), err)
	}
	var errs []error
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || validateRunID(id) != nil || !runscHas(b.runscRoot(), id) {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(b.rootsDir(), id, "owner"))
		if err != nil || len(owner) == 0 || alive(string(owner)) {
			continue
		}
		b.log.Warn("removing a gVisor container orphaned by a dead plugin process", "run_id", id, "owner", string(owner))
		if err := b.reapGVisor(id, string(owner), true); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped++
	}
	return reaped, errors.Join(errs...)
}
