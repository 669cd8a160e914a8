package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// Grace periods of a run.
const (
	// killGrace is how long Run keeps sending SIGKILL to the container (it
	// may still be being created) before it kills the podman process group.
	killGrace = 2 * time.Second
	// ioGrace is how long Run waits for its output copiers to drain after
	// the container is gone before it closes the pipes under them.
	ioGrace = 2 * time.Second
)

// backend implements sandbox.Backend with the podman CLI.
type backend struct {
	log          hclog.Logger
	searchDirs   []string   // where podman and runc are looked for
	stateDir     string     // DefaultStateDir
	cgroupParent string     // DefaultCgroupParent
	geteuid      func() int // os.Geteuid; replaced in tests
	owner        string     // ownerLabel value: this process

	mu  sync.Mutex
	eng *engine // cached once the probe succeeded

	active sync.WaitGroup // runs in progress, for drain
}

var _ sandbox.Backend = (*backend)(nil)

func newBackend(log hclog.Logger) *backend {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	b := &backend{
		log:          log,
		searchDirs:   filepath.SplitList(searchPath),
		stateDir:     DefaultStateDir,
		cgroupParent: DefaultCgroupParent,
		geteuid:      os.Geteuid,
	}
	if id, err := processID(os.Getpid()); err == nil {
		b.owner = id
	}
	return b
}

// engine returns the probed engine, probing it if no probe has succeeded
// yet. A failed probe is not cached: an administrator may fix the host.
func (b *backend) engine(ctx context.Context) (*engine, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eng != nil {
		return b.eng, nil
	}
	e, err := b.probe(ctx)
	if err != nil {
		return nil, err
	}
	b.eng = e
	b.log.Debug("podman ready", "podman", e.podman, "version", e.podmanVer, "runc", e.runc, "runc_version", e.runcVer)
	return e, nil
}

// drain waits up to timeout for the runs in progress to end (their
// containers removed) and reports whether they did. A host that cancels a
// run gets its answer at once, while the container is still being killed
// and removed; the plugin process must not exit under that.
func (b *backend) drain(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { b.active.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// --- availability ---

// Availability reports whether podman can run req.Image here now: podman
// and runc installed and recent enough, root (rootless podman would ignore
// the limits on cgroup v1), seccomp and the cgroup controllers with swap
// accounting, and the image present in podman's storage.
func (b *backend) Availability(ctx context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	if req == nil {
		return nil, errors.New("podman: nil AvailabilityRequest")
	}
	no := func(reason, format string, args ...any) (*sandbox.AvailabilityResponse, error) {
		return &sandbox.AvailabilityResponse{Reason: reason, Detail: fmt.Sprintf(format, args...)}, nil
	}
	if runtime.GOARCH != "amd64" {
		return no(sandbox.ReasonIncompatible, "the sandbox profile's seccomp filter is for x86_64 only, not %s", runtime.GOARCH)
	}
	e, err := b.engine(ctx)
	var un *errUnavailable
	if errors.As(err, &un) {
		return no(un.reason, "%s", un.detail)
	}
	if err != nil {
		return nil, fmt.Errorf("podman: %w", err)
	}
	rt := sandbox.RuntimeNative
	if req.Runtime != "" && req.Runtime != sandbox.RuntimeNative {
		if e, err = e.forRuntime(req.Runtime); errors.As(err, &un) {
			return no(un.reason, "%s", un.detail)
		}
		rt = req.Runtime
	}
	id, err := b.imagePresent(ctx, e, req.Image)
	if errors.As(err, &un) {
		return no(un.reason, "%s", un.detail)
	}
	if err != nil {
		return nil, fmt.Errorf("podman: %w", err)
	}
	detail := fmt.Sprintf("podman %s, runc %s, image %s is sha256:%s", e.podmanVer, e.runcVer, req.Image, id)
	if e.gvisor {
		detail = fmt.Sprintf("podman %s, gVisor %s, image %s is sha256:%s", e.podmanVer, e.runsc, req.Image, id)
	}
	return &sandbox.AvailabilityResponse{Available: true, Runtime: rt, Detail: detail}, nil
}

// SupportsRuntime: podman runs gVisor through runsc (registered in the
// plugin's containers.conf); Availability says whether it is installed.
func (b *backend) SupportsRuntime(rt string) bool {
	return rt == sandbox.RuntimeNative || rt == sandbox.RuntimeGVisor
}

// imagePresent looks req's image up in podman's storage and returns its ID.
// An image agentnode loaded (`podman load` of the OCI layout) carries the
// tag <name>:<first 12 hex digits of the manifest digest>; an image pulled
// by digest is found by the reference itself.
func (b *backend) imagePresent(ctx context.Context, e *engine, ref string) (string, error) {
	name, digest, ok := strings.Cut(ref, "@sha256:")
	if ref == "" || !ok || name == "" || !hexID.MatchString(digest) {
		return "", unavailable(sandbox.ReasonImageMissing, "no pinned image reference (name@sha256:<digest>) given: %q", ref)
	}
	if strings.ContainsAny(ref, " \t\n") || strings.HasPrefix(ref, "-") {
		return "", unavailable(sandbox.ReasonImageMissing, "image reference %q is malformed", ref)
	}
	var lastErr error
	for _, cand := range []string{name + ":" + digest[:12], ref} {
		id, err := e.imageID(ctx, cand)
		if err == nil {
			return id, nil
		}
		lastErr = err
		var ce *cliError
		if !errors.As(err, &ce) || ce.code != 125 {
			return "", fmt.Errorf("podman image inspect: %w", err)
		}
	}
	return "", unavailable(sandbox.ReasonImageMissing, "image %s is not in podman's storage (run `agentnode sandbox build`, which loads it): %v", ref, lastErr)
}

// --- run ---

// runState is one run in progress.
type runState struct {
	e       *engine
	req     *sandbox.RunRequest
	name    string
	nonce   string
	cidfile string
	cmd     *exec.Cmd
	done    chan error // cmd.Wait's result
	log     hclog.Logger

	// cg is the run's own cgroup, the container's cgroup parent.
	cg *runCgroup
	// autoRemove: podman run --rm removes the container, and libpod's
	// database (e.state) tells its exit status and proves it gone.
	autoRemove bool
	// snap and snapErr are libpod's database read once podman run exited
	// by itself (autoRemove only; nil, nil when it was not read).
	snap    *dbSnapshot
	snapErr error
}

// marks identifies the run's container (cid, when known) in podman's state.
func (rs *runState) marks(cid string) runMarks {
	return runMarks{id: cid, name: rs.name, runID: rs.req.RunID, nonce: rs.nonce}
}

// Run runs req in a fresh container, enforces its timeout and ctx, and
// always removes the container and proves it is gone before returning.
// When ctx is done the container is killed and Run answers Killed (with
// CleanupVerified once proven), so that a host that stopped the run still
// learns whether it was cleaned up; when a caller's writer fails, Run
// returns that error.
func (b *backend) Run(ctx context.Context, req *sandbox.RunRequest) (resp *sandbox.RunResponse, err error) {
	if req == nil {
		return nil, errors.New("podman: nil RunRequest")
	}
	b.active.Add(1)
	defer b.active.Done()
	id := req.RunID
	if !runIDRE.MatchString(id) {
		return nil, fmt.Errorf("podman: run id %q: want 1-128 of [A-Za-z0-9_.-], starting with a letter or digit", id)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, context.Cause(ctx))
	}
	// The image the host verified: the config digest its manifest names,
	// read from the host's image store and checked against req.Image.
	imageID, err := imagestore.ImageID(req.ImageStore, req.Image)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: image %s: %w", id, req.Image, err)
	}
	imageHex, err := parseImageID(imageID)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	e, err := b.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: podman is unavailable: %w", id, err)
	}
	if e, err = e.forRuntime(req.Runtime); err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	// podman runs the image, not the profile's Root.Path.
	s, err := profile.ForRun(req.Spec)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	if req.Workspace != nil {
		if err := profile.CheckWorkspace(*req.Workspace); err != nil {
			return nil, fmt.Errorf("podman: run %s: %w", id, err)
		}
	}
	rs := &runState{e: e, req: req, name: namePrefix + id, nonce: randomHex(16), log: b.log.With("run_id", id), autoRemove: e.state != nil}
	rs.cidfile = filepath.Join(e.stateDir, "cid-"+rs.nonce)
	cgName, err := runCgroupName(b.owner, rs.nonce)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	p := runParams{
		runID: id, nonce: rs.nonce, owner: b.owner, imageID: imageHex, cidfile: rs.cidfile,
		seccompFile: e.seccompFile, cgroupParent: filepath.Join(b.cgroupParent, cgName), autoRemove: rs.autoRemove,
		memoryOnParent: !e.cgroupV2,
	}
	if req.Timeout > 0 {
		// conmon's own --timeout kills the container even when this
		// plugin, podman run and agentnode are all gone: the timeout in
		// whole seconds, rounded up. conmon starts counting once it
		// created the container, after this plugin's timer (which counts
		// from podman run's start), so the plugin's kill normally comes
		// first; glib fires conmon's timer up to 1 s late. A tool so
		// orphaned lives at most ceil(timeout) + 1 s.
		p.backstop = uint64((req.Timeout + time.Second - 1) / time.Second)
	}
	args, err := runArgs(s, p)
	if err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}

	// The run's own cgroup, with the memory limits on cgroup v1 and the
	// OOM accounting (runcgroup.go). runArgs checked the limits.
	mem := s.Linux.Resources.Memory
	if rs.cg, err = newRunCgroup(e, b.cgroupParent, cgName, *mem.Limit, *mem.Swap); err != nil {
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	pipes, err := newStdio(req)
	if err != nil {
		_ = rs.cg.remove()
		return nil, fmt.Errorf("podman: run %s: %w", id, err)
	}
	rs.cmd = e.command(args...)
	pipes.attach(rs.cmd)
	if err := rs.cmd.Start(); err != nil {
		pipes.Abort()
		_ = rs.cg.remove()
		return nil, fmt.Errorf("podman: starting run %s: %w", id, err)
	}
	pipes.Start()
	rs.done = make(chan error, 1)
	go func() { rs.done <- rs.cmd.Wait() }()

	// From here on the container is always removed and its removal
	// proven, also when waiting fails.
	var containerID string
	defer func() {
		cleanErr := b.removeAndVerify(rs, containerID)
		if werr := pipes.Wait(ioGrace); werr != nil && err == nil {
			err = fmt.Errorf("podman: run %s: %w", id, werr)
		}
		switch {
		case cleanErr != nil:
			rs.log.Error("container cleanup not verified", "error", cleanErr)
			resp, err = nil, errors.Join(err, cleanErr)
		case err != nil:
			resp = nil
		case resp != nil:
			resp.CleanupVerified = true
		}
	}()
	resp, containerID, err = b.wait(ctx, rs, pipes)
	return resp, err
}

// wait waits for podman run to end, killing the container on timeout,
// cancellation or an output failure, and works out the exit status. It
// returns the container's ID when podman created one.
func (b *backend) wait(ctx context.Context, rs *runState, pipes *stdio) (*sandbox.RunResponse, string, error) {
	id := rs.req.RunID
	var timeout <-chan time.Time
	started := time.Now()
	if rs.req.Timeout > 0 {
		t := time.NewTimer(rs.req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	resp := &sandbox.RunResponse{}
	var cause error
	var werr error
	select {
	case werr = <-rs.done:
		if rs.req.Timeout > 0 && time.Since(started) >= rs.req.Timeout {
			// Ended at or past the deadline: conmon's backstop came
			// before this plugin's timer (a plugin slowed down).
			resp.TimedOut = true
		}
	case <-timeout:
		resp.TimedOut = true
		werr = b.kill(rs)
	case <-ctx.Done():
		// The host cancelled the run or sent stop (it no longer reads
		// output): kill, clean up, and still answer: after a stop the host
		// receives the answer, and with it the proof of cleanup.
		rs.log.Info("run cancelled; killing the container", "cause", context.Cause(ctx))
		resp.Killed = true
		werr = b.kill(rs)
	case err := <-pipes.Failed():
		cause = fmt.Errorf("podman: run %s: %w", id, err)
		werr = b.kill(rs)
	}
	pipes.CloseStdin()
	cid := readCID(rs.cidfile)

	code := 0
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee) && ee.Exited():
		code = ee.ExitCode()
	case errors.As(werr, &ee):
		// podman itself was killed (by us, after the container would not
		// die): the container was killed too.
		code = 128 + int(syscall.SIGKILL)
		resp.Killed = true
	default:
		return nil, cid, errors.Join(cause, fmt.Errorf("podman: waiting for run %s: %w", id, werr))
	}
	// podman run exited by itself, so with --rm it has removed the
	// container (or failed to): one read of libpod's database tells the
	// recorded exit status and, for removeAndVerify, what is left.
	if rs.autoRemove && cid != "" && (werr == nil || ee.Exited()) {
		rs.snap, rs.snapErr = rs.e.state.snapshot(rs.marks(cid))
	}
	if cause != nil {
		return nil, cid, cause
	}
	switch {
	case rs.autoRemove && !resp.Killed:
		// Not killed by us (a timeout sets Killed below): the status is
		// the one libpod recorded, or an error.
		exit, err := rs.recordedExit(cid, code, resp.TimedOut, pipes)
		if err != nil {
			return nil, cid, fmt.Errorf("podman: run %s: %w", id, err)
		}
		code = exit
	case code >= 125 && code <= 127 && !resp.Killed:
		// 125-127 are podman's own failures, or the tool's exit status:
		// ask the container whether it ran.
		ran, exit, err := b.inspectExit(rs, cid)
		if err != nil {
			return nil, cid, fmt.Errorf("podman: run %s: podman exited %d: %w", id, code, err)
		}
		if !ran {
			return nil, cid, fmt.Errorf("podman: run %s: the container did not start (podman exited %d): %s", id, code, pipes.stderrTail())
		}
		code = exit
	}
	if resp.TimedOut && code == 255 {
		code = 128 + int(syscall.SIGKILL) // conmon's backstop: its SIGKILL, recorded as -1
	}
	resp.ExitCode = code
	if code == 128+int(syscall.SIGKILL) {
		resp.Killed = true // us, conmon's backstop, or the kernel enforcing a limit (OOM)
	}
	if resp.TimedOut {
		resp.Killed = true
	}
	// The run's cgroup saw the OOM killer at work (runcgroup.go): that is
	// how a run killed for memory is told from any other SIGKILL.
	if n, err := rs.cg.oomEvents(); err != nil {
		rs.log.Warn("reading the run cgroup's OOM events", "error", err)
	} else if n > 0 {
		resp.OOMKilled = true
	}
	return resp, cid, nil
}

// kill kills the run's container and returns podman run's exit. It sends
// SIGKILL to the container through podman (by ID once podman has written
// it; before that the container does not exist yet) until podman run
// exits, and after killGrace kills the podman process group. A container
// podman created but could not start or kill is removed afterwards.
func (b *backend) kill(rs *runState) error {
	deadline := time.Now().Add(killGrace)
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 250*time.Millisecond) {
		if cid := readCID(rs.cidfile); cid != "" {
			ctx, cancel := context.WithTimeout(context.Background(), killGrace)
			_, err := rs.e.call(ctx, "kill", "--signal", "KILL", cid)
			cancel()
			if err != nil {
				rs.log.Debug("podman kill", "error", err)
			}
		}
		select {
		case err := <-rs.done:
			return err
		case <-time.After(delay):
		}
		if time.Now().After(deadline) {
			rs.log.Warn("podman run did not end after the container was killed; killing podman's process group")
			_ = syscall.Kill(-rs.cmd.Process.Pid, syscall.SIGKILL)
			return <-rs.done
		}
	}
}

// recordedExit returns the tool's exit status of a --rm run that podman
// ended with exit status code. podman's own failures (125), a tool it
// cannot invoke (126) or find (127) and a tool exiting with those are told
// apart by libpod's record: podman run --rm takes the exit status it
// reports from the exit-code bucket of libpod's database, which libpod
// fills from conmon's exit file when the container exits; a container
// that never ran has no entry. So the status is the recorded one, and
// podman's must agree: if libpod recorded none, or another one, podman's
// status is not the tool's, and the run fails rather than guessing. Only
// when the database cannot be read is podman's status taken as it is, and
// only outside 125-127 (podman's own failures are those). After a timeout
// (timedOut) the tool was killed anyway: only 125-127 need the record.
func (rs *runState) recordedExit(cid string, code int, timedOut bool, pipes *stdio) (int, error) {
	podmanRange := code >= 125 && code <= 127
	switch {
	case cid == "":
		// podman writes the cidfile as soon as it created the container.
		return 0, fmt.Errorf("podman exited %d before it created the container: %s", code, pipes.stderrTail())
	case rs.snapErr != nil:
		if podmanRange {
			return 0, fmt.Errorf("podman exited %d, and whether the tool ran is unknown: %w", code, rs.snapErr)
		}
		rs.log.Warn("libpod's database is unreadable: taking podman's exit status as the tool's", "exit", code, "error", rs.snapErr)
		return code, nil
	case rs.snap == nil:
		return 0, fmt.Errorf("podman exited %d, and libpod's database was not read", code)
	case timedOut && !podmanRange:
		return code, nil
	case !rs.snap.exited:
		return 0, fmt.Errorf("the container did not run to an exit (podman exited %d; libpod recorded no exit status for %s): %s", code, cid, pipes.stderrTail())
	case rs.snap.exitCode < 0:
		// conmon's own timeout (the backstop) or a container libpod lost.
		return 0, fmt.Errorf("libpod recorded no exit status of the tool in container %s (%d; podman exited %d)", cid, rs.snap.exitCode, code)
	case rs.snap.exitCode != code:
		return 0, fmt.Errorf("podman exited %d, but libpod recorded exit status %d for container %s", code, rs.snap.exitCode, cid)
	}
	return code, nil
}

// inspectExit asks podman whether container cid started and how it ended.
func (b *backend) inspectExit(rs *runState, cid string) (ran bool, exit int, err error) {
	if cid == "" {
		return false, 0, nil // never created
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := rs.e.call(ctx, "container", "inspect", "--format", "json", cid)
	if err != nil {
		return false, 0, err
	}
	var st []struct {
		State struct {
			Status    string    `json:"Status"`
			ExitCode  int       `json:"ExitCode"`
			StartedAt time.Time `json:"StartedAt"`
		} `json:"State"`
	}
	if err := json.Unmarshal(out, &st); err != nil || len(st) != 1 {
		return false, 0, fmt.Errorf("podman container inspect %s: %d results, %v", cid, len(st), err)
	}
	s := st[0].State
	if s.StartedAt.IsZero() || (s.Status != "exited" && s.Status != "stopped") {
		return false, 0, nil
	}
	return true, s.ExitCode, nil
}

// readCID returns the container ID podman wrote to the cidfile, or "".
func readCID(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(string(b))
	if !hexID.MatchString(id) {
		return ""
	}
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("podman: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
