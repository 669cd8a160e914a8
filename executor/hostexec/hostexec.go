// Package hostexec runs a trusted tool process directly on the host: the
// placement that host_trust_policy allows for trusted/curated tools. It is
// not a sandbox; it bounds what a well-meaning tool can do by accident (hang,
// flood, leave processes or files behind, read the user's secrets from the
// environment) and speaks the tool I/O protocol of executor/toolio over the
// process's pipes. With Request.Confine it also confines the tool
// (executor/confine: no capabilities, Landlock, seccomp), so that a tool gone
// bad cannot write outside its work dir, read the user's files or open
// sockets it has not declared.
//
// It is the engine of the host backend (executor/backend.Host), outside
// the kernel: the kernel decides whether a run may go to the host and
// never starts a tool itself. What placement must know before it decides
// (CheckConfinement, CheckPython) reaches it through that backend's
// answers to kernel/plan.Host, and Run checks the same again.
//
// # What a tool process gets
//
//   - The entrypoint: a regular, executable file inside Request.PackageDir,
//     resolved through symlinks; a path that is absolute, climbs out with "..",
//     or resolves (through any symlink) outside the package is refused with
//     ErrEntrypoint (reason code integrity_denied) and nothing runs. The
//     resolved path is what is executed.
//   - A fresh working directory, created 0700 under os.TempDir and removed
//     after the run however it ends (exit, timeout, cancellation, flood).
//   - Environment: Request.Env as given (the caller filters it, normally with
//     AllowedEnv), then HOME and TMPDIR set to the working directory and
//     PACK_DIR set to the resolved package directory. These three always
//     replace any value of the same name in Request.Env.
//   - stdin: Request.Stdin, written by its own goroutine and then closed; a
//     tool that never reads it does not block the host. Long-lived tools that
//     speak a protocol (an MCP server) get Request.StdinStream and
//     Request.StdoutStream instead: both streamed as they arrive, stdout
//     without the MaxStdout cap (the reader bounds it), and a reader that
//     stops reading kills the tool.
//   - With Request.Interpreter, the process is that program (a system
//     interpreter the caller resolved) with the entrypoint as its first
//     argument; the entrypoint then need not be executable.
//   - With Request.Python (a `runtime: python` tool), the process is the
//     host's python3 running the tool shim of sdk/python, written read-only
//     into the work directory, with the package directory and the Python
//     entrypoint (module.path[:function], python.ValidEntrypoint, else
//     ErrEntrypoint) as its arguments: the same confinement, environment,
//     limits and end as any other tool.
//   - Its own process group (Setpgid) and SIGKILL as its parent-death signal
//     (Pdeathsig), so it dies with the agentnode process.
//   - With Request.Confine: the confinement of executor/confine, applied to
//     the thread that forks the tool, so it holds from the tool's first
//     instruction. sandbox.host_confinement (Confinement.Mode) decides
//     whether a kernel without enough Landlock refuses the run
//     (sandbox_unavailable, nothing started) or runs it with what it has;
//     Result.Confinement notes anything short of full confinement. A
//     confinement step that fails is sandbox_unavailable and nothing runs.
//
// # How a run ends
//
//   - The tool's main process exits: the rest of its process group is
//     SIGKILLed at once (a tool run leaves no processes behind), then the
//     main process is reaped. Result.ExitCode is its exit status, or 128+N
//     when it was killed by signal N (as shells and Docker report it). A
//     non-zero exit is not an error of Run.
//   - Request.Timeout (DefaultTimeout when zero) passes or ctx is done: the
//     whole process group is SIGKILLed, Result.TimedOut is set, and the error
//     wraps reason.ErrTimeout together with context.DeadlineExceeded or
//     ctx.Err().
//   - stdout exceeds Request.MaxStdout (toolio.MaxOutput when zero): the
//     process group is SIGKILLed at once, Result.Stdout holds the first
//     MaxStdout bytes, Result.StdoutTruncated is set and the error wraps
//     toolio.ErrOutputTooLarge.
//   - The tool changed agentnode's own resource limits (prlimit on its
//     parent; a confined tool's seccomp filter refuses that, so this is the
//     second line): once the tool is reaped Run puts them back as they were
//     when agentnode started (kernel/ownlimits) and returns the Result with
//     an error wrapping ownlimits.ErrChanged, reason code sandbox_unavailable.
//     Raising a lowered hard limit needs CAP_SYS_RESOURCE; without it the
//     error says which limit stays lowered.
//
// stderr is always read to the end so the tool never blocks on it, but only
// MaxStderr bytes (toolio.MaxStderr when zero) are kept: the first half and
// the last half of the stream, with Result.StderrTruncated set when bytes in
// between were dropped.
//
// The group is killed while the main process is still unreaped, so its pid
// (the group id) cannot have been reused by an unrelated process.
//
// # Limits
//
// Killing by process group misses a descendant that deliberately leaves the
// group (setsid, setpgid) and, when agentnode itself is SIGKILLed, the tool's
// own children (Pdeathsig covers only the direct child) and the working
// directory (named agentnode-tool-* under os.TempDir) are left behind. Run never waits for
// such a process: once the tool's group is gone it waits at most a short
// grace period for the pipes to close, then closes its ends. Containing
// processes that try to escape is the sandbox's job (cgroups, pid
// namespace); host placement is reserved for trusted tools.
//
// Pdeathsig fires when the OS thread that started the tool ends, not the
// process (a confined tool's thread is kept until the tool is reaped). The Go
// runtime ends a thread only when a goroutine exits while locked to it
// (runtime.LockOSThread), so do not call Run from a goroutine locked to its
// thread.
package hostexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
)

// DefaultTimeout applies when Request.Timeout is zero or negative: a host
// run is never unbounded.
const DefaultTimeout = 60 * time.Second

// drainGrace bounds how long Run waits for the output pipes to reach EOF
// after the tool's process group is gone; only a process that escaped the
// group can hold them open longer.
const drainGrace = 500 * time.Millisecond

// ErrEntrypoint marks a refused package directory or entrypoint. Such errors
// also carry reason.ErrIntegrityDenied.
var ErrEntrypoint = errors.New("entrypoint refused")

// Request describes one run of a tool process.
type Request struct {
	// PackageDir is the installed package's directory.
	PackageDir string
	// Entrypoint is the executable's path relative to PackageDir.
	Entrypoint string
	// Args are passed after argv[0] (the resolved entrypoint path).
	Args []string
	// Stdin is written to the tool's stdin, which is then closed.
	Stdin []byte
	// Env is the tool's environment, already filtered by the caller (see
	// AllowedEnv). HOME, TMPDIR and PACK_DIR are set by Run.
	Env []string
	// Timeout bounds the run; zero or negative means DefaultTimeout.
	Timeout time.Duration
	// MaxStdout bounds stdout; zero or negative means toolio.MaxOutput.
	MaxStdout int
	// MaxStderr bounds the stderr kept; zero or negative means
	// toolio.MaxStderr.
	MaxStderr int
	// Confine, when set, runs the tool confined: no capabilities,
	// Landlock and seccomp (see Confinement). Nil runs it unconfined.
	Confine *Confinement

	// Interpreter, when set, is the absolute path of a program outside the
	// package that runs the entrypoint (a script): the process is
	// [Interpreter, resolved entrypoint, Args...], and the entrypoint need
	// not be executable. The caller chooses and resolves it (an allowlist
	// on a fixed system PATH); Run only checks it is an absolute path to a
	// regular executable file.
	Interpreter string
	// Python, when set, runs a `runtime: python` tool through the tool
	// shim of sdk/python: Entrypoint is the tool's Python entrypoint
	// (python.ValidEntrypoint), not a file; the process is
	// python.Command(Python.Interpreter, shim, package dir, Entrypoint,
	// Python.PackageLevel), where shim is python.Shim written read-only
	// into the work directory before the start (a confined tool may read
	// its work directory; -I keeps it off sys.path). Interpreter and Args
	// must be empty.
	Python *Python
	// StdinStream, when set, replaces Stdin: it is copied to the tool's
	// stdin as it arrives, until it returns EOF or an error, then stdin is
	// closed. Run does not wait for the copy once the tool has ended: a
	// copy blocked in StdinStream.Read ends when the caller closes the
	// stream (e.g. the write end of an io.Pipe).
	StdinStream io.Reader
	// StdoutStream, when set, receives the tool's stdout as it arrives
	// instead of Result.Stdout, for long-lived tools that speak a protocol
	// (an MCP server). MaxStdout does not apply: the reader bounds what it
	// accepts. A failed write kills the tool's process group (the reader
	// stopped reading), and Run reports the run as ended by the tool.
	StdoutStream io.Writer
	// Workspace, when set, is the user's workspace directory granted to
	// the run: the tool's working directory, and with Confine readable
	// (Writable: and writable, like the work directory), never
	// executable. HOME and TMPDIR stay the work directory.
	Workspace *Workspace
}

// Workspace is a directory of the user's granted to a run
// (Request.Workspace).
type Workspace struct {
	// Path is absolute and symlink-free: Run refuses anything else.
	Path string
	// Writable: read-write; false: read-only.
	Writable bool
}

// checkWorkspace refuses a workspace path that is not absolute, not
// symlink-free or not a directory (ErrWorkspace, nothing started).
func checkWorkspace(ws *Workspace) error {
	if ws == nil {
		return nil
	}
	if !filepath.IsAbs(ws.Path) || filepath.Clean(ws.Path) != ws.Path {
		return reason.New(reason.WorkspaceInvalid, "hostexec: workspace %q is not a clean absolute path", ws.Path)
	}
	resolved, err := filepath.EvalSymlinks(ws.Path)
	if err != nil {
		return reason.New(reason.WorkspaceInvalid, "hostexec: workspace: %w", err)
	}
	if resolved != ws.Path {
		return reason.New(reason.WorkspaceInvalid, "hostexec: workspace %s resolves to %s (a symlink)", ws.Path, resolved)
	}
	if fi, err := os.Stat(ws.Path); err != nil || !fi.IsDir() {
		return reason.New(reason.WorkspaceInvalid, "hostexec: workspace %s is not a directory (%v)", ws.Path, err)
	}
	return nil
}

// Python is the interpreter of a `runtime: python` tool run
// (Request.Python).
type Python struct {
	// Interpreter is the absolute path of the host's python3 (checked
	// like Request.Interpreter): python.Interpreter, never one found on
	// PATH.
	Interpreter string
	// PackageLevel: the entrypoint is the package-level one of a tool
	// without its own (the shim's --package-entrypoint).
	PackageLevel bool
}

// Result is the outcome of a run whose process was started.
type Result struct {
	// ExitCode is the exit status, or 128+signal when killed by a signal.
	ExitCode int
	// Stdout is the tool's stdout, at most MaxStdout bytes.
	Stdout []byte
	// Stderr is the kept part of stderr, at most MaxStderr bytes.
	Stderr []byte
	// StdoutTruncated: stdout went beyond MaxStdout and the tool was killed.
	StdoutTruncated bool
	// StderrTruncated: bytes in the middle of stderr were dropped.
	StderrTruncated bool
	// TimedOut: the timeout passed or ctx was done, and the tool was killed.
	TimedOut bool
	// Duration runs from the start of the process to its reaping.
	Duration time.Duration
	// Confinement is empty when the tool ran fully confined, else a short
	// note for the audit record: "unconfined: not requested",
	// "unconfined: landlock unavailable", "partly confined: ...".
	Confinement string
}

// Run runs the tool described by req and returns its result. The error is
// nil when the tool ran to its own exit (whatever the exit code). When the
// process could not be started the Result is nil; when it was killed for a
// timeout, a cancelled ctx or an output flood, both a Result and an error
// are returned (see the package documentation). A failure to remove the
// working directory is joined to the error.
func Run(ctx context.Context, req *Request) (res *Result, err error) {
	if req == nil {
		return nil, errors.New("hostexec: nil request")
	}
	if err := ctx.Err(); err != nil {
		return nil, reason.New(reason.Timeout, "hostexec: not started: %w", err)
	}
	var packDir, entry string
	if req.Python != nil {
		packDir, err = resolvePython(req)
	} else {
		packDir, entry, err = resolveEntrypoint(req.PackageDir, req.Entrypoint, req.Interpreter == "")
	}
	if err != nil {
		return nil, err
	}
	exe, args := entry, req.Args
	if req.Interpreter != "" {
		if err := checkInterpreter(req.Interpreter); err != nil {
			return nil, err
		}
		exe, args = req.Interpreter, append([]string{entry}, req.Args...)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := req.MaxStdout
	if maxOut <= 0 {
		maxOut = toolio.MaxOutput
	}
	maxErr := req.MaxStderr
	if maxErr <= 0 {
		maxErr = toolio.MaxStderr
	}
	if err := checkWorkspace(req.Workspace); err != nil {
		return nil, err
	}
	var plan *confinePlan
	if req.Confine != nil {
		if plan, err = planConfinement(req.Confine); err != nil {
			return nil, err
		}
	}

	created, err := os.MkdirTemp("", "agentnode-tool-")
	if err != nil {
		return nil, fmt.Errorf("hostexec: create work dir: %w", err)
	}
	defer func() {
		if rerr := removeWorkDir(created); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	// An absolute, symlink-free path, so HOME and TMPDIR match what the
	// tool's getcwd returns.
	work, err := filepath.Abs(created)
	if err == nil {
		work, err = filepath.EvalSymlinks(work)
	}
	if err != nil {
		return nil, fmt.Errorf("hostexec: work dir: %w", err)
	}
	if err := os.Chmod(work, 0o700); err != nil {
		return nil, fmt.Errorf("hostexec: work dir: %w", err)
	}

	if req.Python != nil {
		shim := filepath.Join(work, python.ShimName)
		if err := os.WriteFile(shim, python.Shim, 0o400); err != nil {
			return nil, fmt.Errorf("hostexec: write the python shim: %w", err)
		}
		argv := python.Command(req.Python.Interpreter, shim, packDir, req.Entrypoint, req.Python.PackageLevel)
		exe, args = argv[0], argv[1:]
	}

	p, err := newPipes()
	if err != nil {
		return nil, err
	}
	defer p.closeParent()
	env := toolEnv(req.Env, work, packDir)
	cwd := work
	if req.Workspace != nil {
		cwd = req.Workspace.Path
	}
	start := time.Now()
	var cmd *exec.Cmd
	if plan == nil {
		cmd, err = startTool(exe, args, env, cwd, p)
	} else {
		var release func()
		release, err = confine.Start(plan.policy(packDir, work, req.Workspace), func() (err error) {
			cmd, err = startTool(exe, args, env, cwd, p)
			return err
		})
		if release != nil {
			// The confined thread is the tool's parent: keep it (and
			// with it the Pdeathsig bond) until the tool is reaped below.
			defer release()
		}
		if errors.Is(err, confine.ErrConfine) {
			p.closeChild()
			return nil, reason.New(reason.SandboxUnavailable, "hostexec: tool %s not started: %w", req.Entrypoint, err)
		}
	}
	p.closeChild()
	if err != nil {
		return nil, fmt.Errorf("hostexec: start %s: %w", req.Entrypoint, err)
	}
	grp := &group{pgid: cmd.Process.Pid}

	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if req.StdinStream != nil {
			// EPIPE when the tool is gone: the copy ends.
			_, _ = io.Copy(p.stdinW, req.StdinStream)
		} else if len(req.Stdin) > 0 {
			// EPIPE when the tool exits without reading: nothing to do.
			_, _ = p.stdinW.Write(req.Stdin)
		}
		_ = p.stdinW.Close()
	}()

	var (
		readers sync.WaitGroup
		stdout  = &limitedBuffer{max: maxOut, onOverflow: grp.kill}
		stderr  = newHeadTail(maxErr)
	)
	stdoutSink := stdout.write
	if req.StdoutStream != nil {
		stdoutSink = streamTo(req.StdoutStream, grp.kill)
	}
	readers.Add(2)
	go func() { defer readers.Done(); drain(p.stdoutR, 32<<10, stdoutSink) }()
	go func() { defer readers.Done(); drain(p.stderrR, 8<<10, stderr.write) }()

	exited := make(chan struct{})
	go func() { defer close(exited); waitExited(cmd.Process.Pid) }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		timedOut bool
		cause    error
	)
	select {
	case <-exited:
	case <-timer.C:
		select {
		case <-exited: // exited just in time
		default:
			timedOut, cause = true, fmt.Errorf("timed out after %s: %w", timeout, context.DeadlineExceeded)
		}
	case <-ctx.Done():
		select {
		case <-exited:
		default:
			timedOut, cause = true, ctx.Err()
		}
	}
	if timedOut {
		grp.kill()
		<-exited
	}
	// The main process is a zombie now: kill what is left of its group
	// while its pid cannot be reused, then reap it.
	grp.killAndSeal()
	waitErr := cmd.Wait()
	duration := time.Since(start)

	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	grace := time.NewTimer(drainGrace)
	select {
	case <-readersDone:
	case <-grace.C:
		// A process outside the group holds the pipes; stop reading.
		p.closeParent()
		<-readersDone
	}
	grace.Stop()
	p.closeParent() // also unblocks a stdin write the tool never read
	if req.StdinStream == nil {
		<-stdinDone
	}

	ps := cmd.ProcessState
	if ps == nil {
		return nil, fmt.Errorf("hostexec: wait %s: %w", req.Entrypoint, waitErr)
	}
	res = &Result{
		ExitCode:        exitCode(ps),
		Stdout:          stdout.buf,
		StdoutTruncated: stdout.truncated,
		TimedOut:        timedOut,
		Duration:        duration,
		Confinement:     plan.note(),
	}
	res.Stderr, res.StderrTruncated = stderr.bytes()
	switch limitsErr := checkLimits(req.Entrypoint); {
	case limitsErr != nil:
		return res, limitsErr
	case timedOut:
		return res, reason.New(reason.Timeout, "hostexec: tool %s killed: %w", req.Entrypoint, cause)
	case stdout.truncated:
		return res, fmt.Errorf("hostexec: tool %s killed: stdout exceeded %d bytes: %w",
			req.Entrypoint, maxOut, toolio.ErrOutputTooLarge)
	}
	return res, nil
}

// resolveEntrypoint returns the package directory and the entrypoint with
// all symlinks resolved, refusing anything that is not a regular executable
// file inside the package.
func resolveEntrypoint(packageDir, entrypoint string, needExec bool) (dir, path string, err error) {
	refuse := func(why string, cause error) error {
		inner := ErrEntrypoint
		if cause != nil {
			inner = fmt.Errorf("%w: %w", ErrEntrypoint, cause)
		}
		return reason.New(reason.IntegrityDenied, "hostexec: entrypoint %q of package %q: %s: %w",
			entrypoint, packageDir, why, inner)
	}
	if dir, err = resolvePackageDir(packageDir, refuse); err != nil {
		return "", "", err
	}
	if !filepath.IsLocal(entrypoint) {
		return "", "", refuse("not a relative path inside the package", nil)
	}
	if path, err = filepath.EvalSymlinks(filepath.Join(dir, entrypoint)); err != nil {
		return "", "", refuse("cannot resolve", err)
	}
	if rel, err := filepath.Rel(dir, path); err != nil || !filepath.IsLocal(rel) {
		return "", "", refuse("resolves outside the package", err)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", "", refuse("cannot stat", err)
	case !fi.Mode().IsRegular():
		return "", "", refuse("not a regular file", nil)
	case needExec && fi.Mode().Perm()&0o111 == 0:
		return "", "", refuse("not executable", nil)
	}
	return dir, path, nil
}

// resolvePackageDir returns packageDir absolute with all symlinks
// resolved, refusing (with refuse) anything but a directory.
func resolvePackageDir(packageDir string, refuse func(why string, cause error) error) (string, error) {
	if packageDir == "" {
		return "", refuse("no package directory", nil)
	}
	abs, err := filepath.Abs(packageDir)
	if err != nil {
		return "", refuse("package directory", err)
	}
	dir, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", refuse("package directory", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", refuse("package directory is not a directory", err)
	}
	return dir, nil
}

// resolvePython checks a `runtime: python` request and returns the
// package directory with all symlinks resolved: a valid Python entrypoint,
// an interpreter that is an absolute path to an executable file, no
// Interpreter or Args besides.
func resolvePython(req *Request) (string, error) {
	if req.Interpreter != "" || len(req.Args) > 0 {
		return "", fmt.Errorf("hostexec: a python run takes neither Interpreter nor Args: %w", ErrEntrypoint)
	}
	refuse := func(why string, cause error) error {
		inner := ErrEntrypoint
		if cause != nil {
			inner = fmt.Errorf("%w: %w", ErrEntrypoint, cause)
		}
		return reason.New(reason.IntegrityDenied, "hostexec: python entrypoint %q of package %q: %s: %w",
			req.Entrypoint, req.PackageDir, why, inner)
	}
	if !python.ValidEntrypoint(req.Entrypoint) {
		return "", refuse("not module.path or module.path:function", nil)
	}
	if err := checkInterpreter(req.Python.Interpreter); err != nil {
		return "", err
	}
	return resolvePackageDir(req.PackageDir, refuse)
}

// CheckPython checks that the host has the interpreter of `runtime: python`
// tools (python.Interpreter, as Run checks it): runtime_unsupported
// otherwise. Placement and doctor ask before anything runs.
func CheckPython() error {
	if err := checkInterpreter(python.Interpreter); err != nil {
		return reason.New(reason.RuntimeUnsupported,
			"runtime python on the host needs %s (Debian's python3-minimal): %v", python.Interpreter, err)
	}
	return nil
}

// checkInterpreter refuses an interpreter that is not an absolute path to
// a regular executable file.
func checkInterpreter(p string) error {
	fi, err := os.Stat(p)
	switch {
	case !filepath.IsAbs(p):
		return reason.New(reason.IntegrityDenied, "hostexec: interpreter %q is not an absolute path: %w", p, ErrEntrypoint)
	case err != nil:
		return reason.New(reason.IntegrityDenied, "hostexec: interpreter %q: %w", p, fmt.Errorf("%w: %w", ErrEntrypoint, err))
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return reason.New(reason.IntegrityDenied, "hostexec: interpreter %q is not an executable file: %w", p, ErrEntrypoint)
	}
	return nil
}

// streamTo returns a sink that writes to w and calls stop once when a write
// fails (later chunks are dropped).
func streamTo(w io.Writer, stop func()) func([]byte) {
	failed := false
	return func(p []byte) {
		if failed {
			return
		}
		if _, err := w.Write(p); err != nil {
			failed = true
			stop()
		}
	}
}

// toolEnv returns base without HOME, TMPDIR and PACK_DIR, followed by the
// values Run sets. The result is never nil, so the tool never inherits the
// agentnode process's environment.
func toolEnv(base []string, work, packDir string) []string {
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "TMPDIR", "PACK_DIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+work, "TMPDIR="+work, "PACK_DIR="+packDir)
}

// pipes holds the tool's three standard streams; the parent keeps stdinW,
// stdoutR and stderrR.
type pipes struct {
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW *os.File
}

func newPipes() (*pipes, error) {
	var p pipes
	var err error
	if p.stdinR, p.stdinW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("hostexec: pipe: %w", err)
	}
	if p.stdoutR, p.stdoutW, err = os.Pipe(); err != nil {
		p.closeChild()
		p.closeParent()
		return nil, fmt.Errorf("hostexec: pipe: %w", err)
	}
	if p.stderrR, p.stderrW, err = os.Pipe(); err != nil {
		p.closeChild()
		p.closeParent()
		return nil, fmt.Errorf("hostexec: pipe: %w", err)
	}
	return &p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close() // closing twice is harmless
		}
	}
}

func (p *pipes) closeChild()  { closeAll(p.stdinR, p.stdoutW, p.stderrW) }
func (p *pipes) closeParent() { closeAll(p.stdinW, p.stdoutR, p.stderrR) }

// startTool starts the process, retrying briefly on ETXTBSY: a freshly
// written entrypoint can still be open for writing in a child forked
// concurrently by another goroutine.
func startTool(entry string, args, env []string, dir string, p *pipes) (*exec.Cmd, error) {
	for attempt := 0; ; attempt++ {
		cmd := &exec.Cmd{
			Path:   entry,
			Args:   append([]string{entry}, args...),
			Env:    env,
			Dir:    dir,
			Stdin:  p.stdinR,
			Stdout: p.stdoutW,
			Stderr: p.stderrW,
			SysProcAttr: &syscall.SysProcAttr{
				Setpgid:   true,
				Pdeathsig: syscall.SIGKILL,
			},
		}
		err := cmd.Start()
		if err == nil {
			return cmd, nil
		}
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 4 {
			return nil, err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
}

// group kills a tool's process group, but only until its leader is reaped:
// after that the group id could name an unrelated process group.
type group struct {
	mu     sync.Mutex
	pgid   int
	sealed bool
}

func (g *group) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.sealed {
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL) // ESRCH: already gone
	}
}

func (g *group) killAndSeal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.sealed {
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		g.sealed = true
	}
}

// waitExited blocks until pid has exited, without reaping it.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// drain reads f to EOF (or until f is closed), handing every chunk to sink.
func drain(f *os.File, bufSize int, sink func([]byte)) {
	buf := make([]byte, bufSize)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			sink(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// limitedBuffer keeps the first max bytes and calls onOverflow once when
// more arrive; the excess is discarded. Its capacity doubles up to max, so a
// run allocates at most about 2*max bytes for stdout.
type limitedBuffer struct {
	max        int
	buf        []byte
	truncated  bool
	onOverflow func()
}

func (b *limitedBuffer) write(p []byte) {
	if b.truncated {
		return
	}
	room := b.max - len(b.buf)
	over := len(p) > room
	if over {
		p = p[:room]
	}
	if need := len(b.buf) + len(p); need > cap(b.buf) {
		grown := make([]byte, len(b.buf), min(max(2*cap(b.buf), need, 4096), b.max))
		copy(grown, b.buf)
		b.buf = grown
	}
	b.buf = append(b.buf, p...)
	if over {
		b.truncated = true
		b.onOverflow()
	}
}

// headTail keeps the first headMax and the last tailMax bytes of a stream in
// memory bounded by headMax + 2*tailMax.
type headTail struct {
	headMax, tailMax int
	head, tail       []byte
	total            int64
}

func newHeadTail(max int) *headTail {
	return &headTail{headMax: max / 2, tailMax: max - max/2}
}

func (h *headTail) write(p []byte) {
	h.total += int64(len(p))
	if room := h.headMax - len(h.head); room > 0 {
		n := min(room, len(p))
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	if len(p) >= h.tailMax {
		h.tail = append(h.tail[:0], p[len(p)-h.tailMax:]...)
		return
	}
	if len(h.tail)+len(p) > 2*h.tailMax {
		keep := h.tailMax - len(p)
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-keep:]...)
	}
	h.tail = append(h.tail, p...)
}

// bytes returns the kept bytes and whether some were dropped.
func (h *headTail) bytes() ([]byte, bool) {
	tail := h.tail
	if len(tail) > h.tailMax {
		tail = tail[len(tail)-h.tailMax:]
	}
	out := make([]byte, 0, len(h.head)+len(tail))
	out = append(append(out, h.head...), tail...)
	return out, h.total > int64(h.headMax+h.tailMax)
}

// removeWorkDir removes the tool's working directory. A tool may have left
// directories without write or search permission; they are made accessible
// (through an os.Root, so a planted symlink cannot redirect the chmod outside
// the directory) and removal is retried.
func removeWorkDir(dir string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		_ = os.Chmod(dir, 0o700)
		if root, rerr := os.OpenRoot(dir); rerr == nil {
			_ = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					_ = root.Chmod(name, 0o700)
				}
				return nil
			})
			_ = root.Close()
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	return fmt.Errorf("hostexec: remove work dir %s: %w", dir, err)
}
