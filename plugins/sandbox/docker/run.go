package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/reaper"
)

const (
	// ioGrace is how long Run waits for the attach stream to deliver the
	// rest of the output after the container exited before it closes the
	// stream.
	ioGrace = 2 * time.Second
	// exitGrace is how long Run waits for the engine to report the exit
	// after a SIGKILL before it removes the container by force anyway.
	exitGrace = 10 * time.Second
	// callTimeout bounds each engine call that does not wait for the
	// tool (create, inspect, attach set-up, start, kill).
	callTimeout = 30 * time.Second
)

// Run runs req in a fresh container of the image req.Image (by the image ID
// resolved in req.ImageStore, imagestore.ImageID), enforces its
// timeout and ctx, and always removes the container and proves it gone
// before returning.
func (b *backend) Run(ctx context.Context, req *sandbox.RunRequest) (resp *sandbox.RunResponse, err error) {
	if req == nil {
		return nil, errors.New("docker: nil RunRequest")
	}
	id := req.RunID
	if err := validateRunID(id); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	// The image the host verified: the config digest its manifest names,
	// read from the host's image store and checked against req.Image.
	imageID, err := imagestore.ImageID(req.ImageStore, req.Image)
	if err != nil {
		return nil, fmt.Errorf("docker: run %s: image %s: %w", id, req.Image, err)
	}
	if err := validateImageID(imageID); err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, err)
	}
	if req.Timeout < 0 {
		return nil, fmt.Errorf("docker: run %s: negative timeout %v", id, req.Timeout)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, context.Cause(ctx))
	}
	cs, err := containerConfig(req.Spec, imageID, b.owner)
	if err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, err)
	}
	if err := b.checkPackageDir(req.PackageDir); err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, err)
	}
	if err := b.checkEgressSocket(req.EgressSocket); err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, err)
	}
	if req.Workspace != nil {
		// The same check: a socket in the workspace is connectable.
		if err := b.checkPackageDir(req.Workspace.Path); err != nil {
			return nil, fmt.Errorf("docker: run %s: workspace: %w", id, err)
		}
		if err := profile.CheckWorkspace(*req.Workspace); err != nil {
			return nil, fmt.Errorf("docker: run %s: %w", id, err)
		}
	}
	cli, err := b.client(ctx)
	if err != nil {
		return nil, err
	}

	// Calls that never wait for the tool are bounded: an engine that hangs
	// fails the run instead of holding it.
	setupCtx, cancelSetup := context.WithTimeout(ctx, callTimeout)
	defer cancelSetup()
	// The create is never abandoned because ctx ended: the engine goes on
	// creating a container whose request was cancelled, and one that
	// appears after the cleanup looked would be left behind. It is bounded
	// by callTimeout only; a cancellation is honoured once it returned
	// (below), with the container removed and proven gone.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancelCreate()
	created, err := cli.ContainerCreate(createCtx, client.ContainerCreateOptions{Config: cs.config, HostConfig: cs.host, Name: cs.name})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			// Someone else's container: never touch it.
			return nil, fmt.Errorf("docker: run %s: the container name %s is already in use: %w", id, cs.name, err)
		}
		err = fmt.Errorf("docker: creating run %s: %w", id, err)
		if cerrdefs.IsNotFound(err) {
			err = fmt.Errorf("%w (the image %s is not in the engine; it is never pulled)", err, imageID)
		}
		// The engine may have created it before the call failed (ctx
		// ended mid-call): remove whatever carries the name or label.
		if cerr := b.removeAndVerify(id, "", ""); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		if ctx.Err() != nil {
			r := cancelledRun()
			r.CleanupVerified = true // removeAndVerify found nothing left
			return r, nil
		}
		return nil, err
	}

	// From here on the container is always removed and its removal
	// proven, also when anything below fails or panics.
	var mergedDir string
	var armed *reaper.Run
	defer func() {
		cleanErr := b.removeAndVerify(id, created.ID, mergedDir)
		if cleanErr == nil {
			// Proven gone. Otherwise the reaper keeps it and tries again
			// when this process exits.
			armed.Disarm()
		}
		switch {
		case cleanErr != nil:
			b.log.Error("container cleanup not verified", "run_id", id, "id", created.ID, "error", cleanErr)
			resp, err = nil, errors.Join(err, cleanErr)
		case err != nil && ctx.Err() != nil:
			// Cancelled while the container was being set up or started:
			// answered like a cancellation during the run.
			resp, err = cancelledRun(), nil
			resp.CleanupVerified = true
		case err != nil:
			resp = nil
		case resp != nil:
			resp.CleanupVerified = true
		}
	}()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, context.Cause(ctx))
	}
	for _, w := range created.Warnings {
		b.log.Warn("engine warning", "run_id", id, "warning", w)
	}
	inspected, err := cli.ContainerInspect(setupCtx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker: inspecting run %s: %w", id, err)
	}
	if g := inspected.Container.GraphDriver; g != nil {
		mergedDir = g.Data["MergedDir"]
	}
	if err := verifyCreated(cs, &inspected.Container); err != nil {
		return nil, fmt.Errorf("docker: run %s: the engine did not store the hardened configuration, refusing to start it: %w", id, err)
	}
	return b.execute(ctx, cli, created.ID, req, &armed)
}

// execute attaches to the created container, starts it and waits for it to
// end, killing it on timeout, cancellation or an output failure. It returns
// only after the output copier has finished. Before the start it arms the
// plugin's reaper with the container (*armed; the caller disarms it once
// the container is removed).
func (b *backend) execute(ctx context.Context, cli *client.Client, cid string, req *sandbox.RunRequest, armed **reaper.Run) (*sandbox.RunResponse, error) {
	id := req.RunID
	// The attach stream and the wait outlive ctx: after a cancellation
	// they still deliver the end of the run.
	bg, cancelBg := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBg()

	// The attach's ctx only bounds setting the stream up.
	attachCtx, cancelAttach := context.WithTimeout(bg, callTimeout)
	att, err := cli.ContainerAttach(attachCtx, cid, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	cancelAttach()
	if err != nil {
		return nil, fmt.Errorf("docker: attaching to run %s: %w", id, err)
	}
	st := newStreams(att.HijackedResponse, req)
	defer st.close()
	// Registered before the start, so the exit cannot be missed.
	waited := cli.ContainerWait(bg, cid, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})

	// Before the start, the reaper learns of the container: should this
	// process die from here on, it is killed and removed at once, and
	// should it hang, killed Grace after the deadline.
	a, err := b.reaper.Arm(reapTarget{Host: b.ep.host, RunID: id, ID: cid}, req.Timeout)
	if err != nil {
		return nil, fmt.Errorf("docker: run %s: %w", id, err)
	}
	*armed = a
	// The timeout counts from here, before the start, as the reaper's
	// deadline does.
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}

	startCtx, cancelStart := context.WithTimeout(ctx, callTimeout)
	_, err = cli.ContainerStart(startCtx, cid, client.ContainerStartOptions{})
	cancelStart()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("docker: starting run %s: %w", id, context.Cause(ctx))
		}
		return nil, fmt.Errorf("docker: starting run %s: %w", id, err)
	}
	st.start()

	resp := &sandbox.RunResponse{}
	var cause error
	var result container.WaitResponse
	var waitErr error
	gotExit := false
	select {
	case result = <-waited.Result:
		gotExit = true
	case waitErr = <-waited.Error:
	case <-timeout:
		resp.TimedOut = true
	case <-ctx.Done():
		// Cancelled, or stopped by the host at its output limit: kill and
		// still answer, so the host learns whether cleanup was proven.
		b.log.Debug("run cancelled", "run_id", id, "cause", context.Cause(ctx))
	case err := <-st.failed:
		cause = fmt.Errorf("docker: run %s: %w", id, err)
	}
	if !gotExit && waitErr == nil {
		resp.Killed = true
		b.kill(cid, id)
		select {
		case result = <-waited.Result:
			gotExit = true
		case waitErr = <-waited.Error:
		case <-time.After(exitGrace):
			waitErr = fmt.Errorf("no exit reported %v after SIGKILL", exitGrace)
		}
	}
	// The rest of the output, then nothing writes to req.Stdout/Stderr.
	st.drain(ioGrace)
	if cause == nil {
		if err := st.writeErr(); err != nil {
			cause = fmt.Errorf("docker: run %s: %w", id, err)
		}
	}
	if !gotExit {
		return nil, errors.Join(cause, fmt.Errorf("docker: waiting for run %s: %w", id, waitErr))
	}
	if result.Error != nil && result.Error.Message != "" {
		return nil, errors.Join(cause, fmt.Errorf("docker: waiting for run %s: %s", id, result.Error.Message))
	}
	resp.ExitCode = int(result.StatusCode)
	if resp.ExitCode == 128+9 {
		resp.Killed = true // us, or the kernel enforcing the memory limit
	}
	if cause != nil {
		return nil, cause
	}
	resp.OOMKilled = b.oomKilled(cli, cid, id)
	return resp, nil
}

// oomKilled reports whether the engine recorded that the kernel's OOM
// killer killed a process of the container (State.OOMKilled), read after
// the exit and before the container is removed. An inspect that fails
// leaves it unknown: false, with a warning.
func (b *backend) oomKilled(cli *client.Client, cid, runID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		b.log.Warn("inspecting the ended run for an OOM kill", "run_id", runID, "error", err)
		return false
	}
	return r.Container.State != nil && r.Container.State.OOMKilled
}

// kill sends SIGKILL; a container that already stopped is fine.
func (b *backend) kill(cid, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cli, err := b.client(ctx)
	if err == nil {
		_, err = cli.ContainerKill(ctx, cid, client.ContainerKillOptions{Signal: "KILL"})
	}
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		b.log.Warn("killing container", "run_id", runID, "id", cid, "error", err)
	}
}

// checkPackageDir refuses a package directory that holds the engine socket:
// a read-only bind mount does not stop connect(2) on a socket in it.
func (b *backend) checkPackageDir(dir string) error {
	pack, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("package directory: %w", err)
	}
	sockDir, err := filepath.EvalSymlinks(filepath.Dir(b.ep.socket))
	if err != nil {
		sockDir = filepath.Dir(b.ep.socket)
	}
	sock := filepath.Join(sockDir, filepath.Base(b.ep.socket))
	if rel, err := filepath.Rel(pack, sock); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("package directory %s contains the engine socket %s: never mounted into a sandbox", dir, b.ep.socket)
	}
	return nil
}

// checkEgressSocket refuses an egress socket that is this backend's engine
// socket, wherever it lives (profile.ForRun refuses the well-known paths).
func (b *backend) checkEgressSocket(sock string) error {
	if sock == "" {
		return nil
	}
	a, err1 := os.Stat(sock)
	e, err2 := os.Stat(b.ep.socket)
	if err1 == nil && err2 == nil && os.SameFile(a, e) {
		return fmt.Errorf("egress socket %s is the engine socket %s: never mounted into a sandbox", sock, b.ep.socket)
	}
	return nil
}

// verifyCreated checks that the engine stored what the sandbox depends on,
// so that an engine (or an API proxy) that drops or rewrites a field fails
// closed instead of running a weaker container.
func verifyCreated(want *containerSpec, got *container.InspectResponse) error {
	hc, cfg := got.HostConfig, got.Config
	if hc == nil || cfg == nil {
		return errors.New("inspect returned no configuration")
	}
	w := want.host
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(got.Image == want.config.Image, "image %s, want %s", got.Image, want.config.Image)
	check(!hc.Privileged, "privileged")
	check(hc.ReadonlyRootfs, "writable root filesystem")
	check(slices.Contains(hc.CapDrop, "ALL") && len(hc.CapAdd) == 0, "capabilities: drop %v add %v", hc.CapDrop, hc.CapAdd)
	check(slices.Contains(hc.SecurityOpt, "no-new-privileges"), "no-new-privileges missing from %d security options", len(hc.SecurityOpt))
	check(slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
		return o == w.SecurityOpt[1]
	}), "the seccomp profile is not the sandbox's")
	check(!slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
		return strings.Contains(o, "unconfined") || strings.HasPrefix(o, "systempaths=")
	}), "an unconfined security option")
	check(w.Runtime == "" || hc.Runtime == w.Runtime, "runtime %q, want %q", hc.Runtime, w.Runtime)
	check(hc.NetworkMode == "none", "network mode %q", hc.NetworkMode)
	check(hc.PidMode == "" && hc.UTSMode == "" && hc.IpcMode == container.IPCModePrivate && hc.CgroupnsMode == container.CgroupnsModePrivate,
		"namespaces: pid %q uts %q ipc %q cgroupns %q", hc.PidMode, hc.UTSMode, hc.IpcMode, hc.CgroupnsMode)
	check(hc.UsernsMode == "" || hc.UsernsMode == "private", "userns mode %q", hc.UsernsMode)
	check(hc.Memory == w.Memory && hc.MemorySwap == w.MemorySwap, "memory %d memory+swap %d, want %d %d", hc.Memory, hc.MemorySwap, w.Memory, w.MemorySwap)
	check(hc.PidsLimit != nil && *hc.PidsLimit == *w.PidsLimit, "pids limit %v, want %d", hc.PidsLimit, *w.PidsLimit)
	check(hc.NanoCPUs == w.NanoCPUs || (hc.CPUQuota > 0 && hc.CPUPeriod > 0 && hc.CPUQuota*1e9/hc.CPUPeriod == w.NanoCPUs),
		"cpu %d nano, want %d", hc.NanoCPUs, w.NanoCPUs)
	check(len(hc.Binds) == 0 && len(hc.VolumesFrom) == 0 && len(hc.Devices) == 0 && len(hc.DeviceCgroupRules) == 0 && len(hc.DeviceRequests) == 0,
		"extra binds, volumes or devices")
	check(len(hc.Mounts) == len(w.Mounts) && !slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool {
		return !slices.ContainsFunc(w.Mounts, func(x mount.Mount) bool {
			if m.Type == mount.TypeVolume {
				// The workspace (config.go, workspaceMount): the same
				// local-driver bind with the same options.
				return x.Type == m.Type && m.Target == x.Target && m.ReadOnly == x.ReadOnly &&
					m.VolumeOptions != nil && x.VolumeOptions != nil && m.VolumeOptions.DriverConfig != nil &&
					x.VolumeOptions.DriverConfig != nil && m.VolumeOptions.DriverConfig.Name == "local" &&
					maps.Equal(m.VolumeOptions.DriverConfig.Options, x.VolumeOptions.DriverConfig.Options)
			}
			return m.Type == mount.TypeBind && x.Type == m.Type && m.Target == x.Target && m.Source == x.Source && m.ReadOnly && x.ReadOnly
		})
	}), "mounts %+v", hc.Mounts)
	check(len(hc.Tmpfs) == len(w.Tmpfs), "tmpfs %v", hc.Tmpfs)
	for dest, opts := range w.Tmpfs {
		check(hc.Tmpfs[dest] == opts, "tmpfs %s: %q, want %q", dest, hc.Tmpfs[dest], opts)
	}
	check(slices.Equal(hc.MaskedPaths, w.MaskedPaths) && slices.Equal(hc.ReadonlyPaths, w.ReadonlyPaths), "masked or read-only paths changed")
	check(len(hc.Sysctls) == 0, "sysctls %v", hc.Sysctls)
	check(cfg.User == want.config.User, "user %q", cfg.User)
	check(!cfg.Tty, "tty")
	check(slices.Equal(cfg.Entrypoint, want.config.Entrypoint) && slices.Equal(cfg.Cmd, want.config.Cmd), "argv %q %q", cfg.Entrypoint, cfg.Cmd)
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// --- standard streams ---

// streams copies req.Stdin into the attach stream and demultiplexes its
// output (stdcopy framing: no TTY) into req.Stdout and req.Stderr.
type streams struct {
	att    client.HijackedResponse
	req    *sandbox.RunRequest
	done   chan struct{} // the output copier returned
	failed chan error    // the host's writer failed (buffered 1)

	mu      sync.Mutex
	werr    error // the first write error
	started bool
	once    sync.Once
}

func newStreams(att client.HijackedResponse, req *sandbox.RunRequest) *streams {
	return &streams{att: att, req: req, done: make(chan struct{}), failed: make(chan error, 1)}
}

// start begins copying. The stdin copier is not waited for: like exec.Cmd,
// Run does not wait for a Read from req.Stdin that blocks past the run.
func (s *streams) start() {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	go func() {
		if s.req.Stdin != nil {
			_, _ = io.Copy(s.att.Conn, s.req.Stdin)
		}
		_ = s.att.CloseWrite() // EOF on the container's stdin (StdinOnce)
	}()
	go func() {
		defer close(s.done)
		_, _ = stdcopy.StdCopy(s.writer(s.req.Stdout), s.writer(s.req.Stderr), s.att.Reader)
	}()
}

func (s *streams) writer(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return &hostWriter{w: w, s: s}
}

// hostWriter reports the first error of a host writer: the run is then
// killed (the host no longer takes output). From then on all output is
// read and discarded: an attach stream nobody reads blocks the engine's
// output copy, and with it the container's exit (a SIGKILL would take the
// engine's kill timeouts, tens of seconds, to be reported).
type hostWriter struct {
	w io.Writer
	s *streams
}

func (h *hostWriter) Write(p []byte) (int, error) {
	h.s.mu.Lock()
	failed := h.s.werr != nil
	h.s.mu.Unlock()
	if failed {
		return len(p), nil
	}
	if _, err := h.w.Write(p); err != nil {
		h.s.mu.Lock()
		if h.s.werr == nil {
			h.s.werr = fmt.Errorf("writing output: %w", err)
			h.s.failed <- h.s.werr
		}
		h.s.mu.Unlock()
	}
	return len(p), nil
}

func (s *streams) writeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.werr
}

// drain waits up to grace for the output to end, then closes the stream
// and waits for the copier to return.
func (s *streams) drain(grace time.Duration) {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.close()
		<-s.done
	}
}

func (s *streams) close() {
	s.once.Do(func() { s.att.Close() })
}

// cancelledRun is the answer to a run cancelled before its process could
// report an exit: killed (as by SIGKILL), with cleanup still to be proven by
// the caller.
func cancelledRun() *sandbox.RunResponse {
	return &sandbox.RunResponse{Killed: true, ExitCode: 128 + 9}
}
