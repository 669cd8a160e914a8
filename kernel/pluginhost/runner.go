package pluginhost

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// pinnedRunner is the go-plugin runner.Runner of one plugin launch. It
// replaces go-plugin's own command runner and SecureConfig for two reasons:
//
//   - stdin: go-plugin's Client.Start sets the command's Stdin to the host's
//     os.Stdin, handing every plugin agentnode's fd 0 (the user's terminal,
//     the MCP request stream, a caller's pipe). pinnedRunner builds its own
//     command from the one go-plugin hands over (keeping only the
//     environment go-plugin computed) and leaves Stdin nil: the plugin's fd 0
//     is /dev/null.
//
//   - no window between the pin check and exec: SecureConfig hashes the file
//     at a path and exec then opens that path again, so a file swapped in
//     between runs unchecked. pinnedRunner opens the binary once, hashes
//     the opened file and execs that same open file through
//     /proc/self/fd/<n> (see execPath). Renaming, deleting or replacing the
//     path after the open changes nothing: the fd keeps naming the inode
//     that was hashed, and exec resolves /proc/self/fd/<n> to it, not to the
//     path. Writing into that inode in place remains possible only for its
//     owner (root or the current user, see CheckFileMode, re-checked on the
//     open file), who could equally attach to agentnode itself.
//
// The fd is opened O_CLOEXEC (os.Open) and is not in ExtraFiles, so it is
// closed by the exec that uses it and never reaches the plugin. It stays open
// until Start returns, i.e. until the exec has happened (exec.Cmd.Start
// returns after the child's execve succeeded or failed).
//
// A plugin must therefore be a native executable: a #! script would be
// handed the path /proc/self/fd/<n>, already closed by the time its
// interpreter opens it.
type pinnedRunner struct {
	logger    hclog.Logger
	key, path string
	checksum  []byte
	hashes    *hashcache.Cache // the verified-hash cache; nil disables it
	tlsBundle []byte           // the plugin's TLS credentials (mtls.go), sent through a pipe
	cmd       *exec.Cmd
	ctl       *runnerCtl

	stdout, stderr io.ReadCloser
	pid            int
}

var _ runner.Runner = (*pinnedRunner)(nil)

// runnerCtl is what the host shares with one launch's runner.
type runnerCtl struct {
	// stopping is set by the host before it kills the plugin: its death
	// by SIGKILL is then expected, not a crash (see pinnedRunner.Wait).
	stopping atomic.Bool

	mu        sync.Mutex
	socketDir string // go-plugin's directory for the plugin's socket; removed by Start if it fails
}

func (c *runnerCtl) setSocketDir(dir string) {
	c.mu.Lock()
	c.socketDir = dir
	c.mu.Unlock()
}

func (c *runnerCtl) getSocketDir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.socketDir
}

// afterOpen, when set by a test, runs right after the binary was opened
// and before it is hashed: the window an attacker swapping the file would
// aim for.
var afterOpen func(path string)

// onHash, when set by a test, runs whenever a binary is actually hashed
// (not vouched for by the verified-hash cache).
var onHash func(path string)

// runnerFunc returns the go-plugin RunnerFunc launching the binary at path,
// a plugin of kind, if its SHA-256 is checksum. key names the plugin in
// errors.
func runnerFunc(hashes *hashcache.Cache, kind, key, path string, checksum, tlsBundle []byte, ctl *runnerCtl) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(logger hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
		// spec is exec.Command("") filled in by go-plugin: only its
		// environment is used (handshake variables and the socket
		// directory; no host environment, as
		// SkipHostEnv is set), after our own (pluginEnv).
		cmd := &exec.Cmd{
			Path:        path,
			Args:        []string{path}, // argv[0]: the pinned path, not /proc/self/fd/<n>
			Env:         append(pluginEnv(kind), spec.Env...),
			Dir:         "/",
			SysProcAttr: sysProcAttr(),
			// Stdin stays nil: the plugin reads /dev/null.
		}
		ctl.setSocketDir(socketDir)
		return &pinnedRunner{logger: logger, hashes: hashes, tlsBundle: tlsBundle, key: key, path: path, checksum: checksum, cmd: cmd, ctl: ctl}, nil
	}
}

// Start verifies and launches the plugin. It runs inside go-plugin's
// Client.Start, hence on the launcher thread (launch.go).
func (r *pinnedRunner) Start(context.Context) (err error) {
	defer func() {
		if dir := r.ctl.getSocketDir(); err != nil && dir != "" {
			// go-plugin removes its socket directory only when killing a
			// runner that has an ID, i.e. one that started.
			_ = os.RemoveAll(dir)
		}
	}()
	f, err := os.Open(r.path) // O_RDONLY|O_CLOEXEC
	if err != nil {
		return fmt.Errorf("open plugin binary: %w", err)
	}
	defer f.Close() // after cmd.Start: the exec has happened by then
	if afterOpen != nil {
		afterOpen(r.path)
	}
	if err := r.verify(f); err != nil {
		return err
	}
	r.cmd.Path = execPath(f)
	if r.stdout, err = r.cmd.StdoutPipe(); err != nil {
		return fmt.Errorf("plugin stdout: %w", err)
	}
	if r.stderr, err = r.cmd.StderrPipe(); err != nil {
		return fmt.Errorf("plugin stderr: %w", err)
	}
	if r.tlsBundle != nil {
		// The credentials go through a pipe the plugin inherits as fd 3,
		// never through its environment. They fit the pipe's buffer, so
		// the write completes before the plugin runs.
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("plugin TLS pipe: %w", err)
		}
		defer pr.Close()
		_, werr := pw.Write(r.tlsBundle)
		if cerr := pw.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("plugin TLS pipe: %w", werr)
		}
		r.cmd.ExtraFiles = []*os.File{pr}
		r.cmd.Env = append(r.cmd.Env, plugin.TLSFDEnv+"=3")
	}
	r.logger.Debug("starting plugin", "path", r.path, "exec", r.cmd.Path)
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", r.path, err)
	}
	r.pid = r.cmd.Process.Pid
	r.logger.Debug("plugin started", "path", r.path, "pid", r.pid)
	return nil
}

// verify checks the open binary: a regular file with the modes
// CheckFileMode demands, and the pinned SHA-256.
func (r *pinnedRunner) verify(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat plugin binary: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return reason.New(reason.PluginUnpinned, "plugin %s (%s) is not a regular file", r.key, r.path)
	}
	if err := checkOwner(r.path, fi); err != nil {
		return reason.New(reason.PluginUnpinned, "plugin %s: %w", r.key, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return reason.New(reason.PluginUnpinned, "plugin %s: %s is writable by group or others (mode %v)", r.key, r.path, fi.Mode().Perm())
	}
	if f.Fd() < 3 {
		// Cannot happen in a Go program (the runtime keeps fds 0-2 open),
		// but exec.Cmd would overwrite such an fd with the plugin's stdio.
		return fmt.Errorf("plugin binary opened as fd %d", f.Fd())
	}
	// The verified-hash cache spares the read when this very file was
	// hashed before and has not changed since (kernel/hashcache).
	got, hashed, err := r.hashes.Sum(f, r.path)
	if hashed && onHash != nil {
		onHash(r.path)
	}
	if err != nil {
		return fmt.Errorf("hash plugin binary: %w", err)
	}
	r.hashes.Flush()
	if !bytes.Equal(got, r.checksum) {
		return reason.New(reason.PluginUnpinned,
			"plugin %s (%s) changed since it was pinned: sha256 %s, pinned %s; re-pin it only if you trust the new binary: %w",
			r.key, r.path, hex.EncodeToString(got), hex.EncodeToString(r.checksum), goplugin.ErrChecksumsDoNotMatch)
	}
	return nil
}

// Wait waits for the plugin to exit. A plugin the host killed on purpose
// (Host.stop) ended as intended: its SIGKILL is not reported as an error,
// which go-plugin would log as a failure.
func (r *pinnedRunner) Wait(context.Context) error {
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && r.ctl != nil && r.ctl.stopping.Load() && errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil
		}
	}
	return err
}

// Kill sends SIGKILL to the plugin; Host.stop then kills its process group.
func (r *pinnedRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill plugin %s: %w", r.key, err)
	}
	return nil
}

// Stdout carries go-plugin's handshake line.
func (r *pinnedRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr is forwarded to the host's log by go-plugin.
func (r *pinnedRunner) Stderr() io.ReadCloser { return r.stderr }

// Name is the pinned path, used in go-plugin's log lines.
func (r *pinnedRunner) Name() string { return r.path }

// ID is the plugin's pid, "" before it started.
func (r *pinnedRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose is appended by go-plugin to a failed handshake's error.
func (r *pinnedRunner) Diagnose(context.Context) string {
	return fmt.Sprintf("plugin %s (%s) did not complete the go-plugin handshake; is it an agentnode plugin built for this platform?", r.key, r.path)
}

// PluginToHost: the plugin shares the host's network and file system.
func (r *pinnedRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin: the plugin shares the host's network and file system.
func (r *pinnedRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
