package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// insecureBackend runs the probe directly on the host with os/exec: no
// container, no namespaces, no filter, no limits, the host's environment.
// It exists to prove that the suite fails a backend that does not confine.
// Like a naive backend it claims CleanupVerified.
type insecureBackend struct{}

var _ sandbox.Backend = insecureBackend{}

func (insecureBackend) Availability(context.Context, *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	return &sandbox.AvailabilityResponse{Available: true}, nil
}

func (insecureBackend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	if len(req.Args) == 0 {
		return nil, errors.New("insecure backend: no arguments")
	}
	argv0 := req.Args[0]
	if rest, ok := strings.CutPrefix(argv0, "/pack/"); ok {
		argv0 = filepath.Join(req.PackageDir, rest)
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(runCtx, argv0, req.Args[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = req.Stdin, req.Stdout, req.Stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	resp := &sandbox.RunResponse{CleanupVerified: true}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			resp.ExitCode, resp.Killed = 128+int(ws.Signal()), true
		} else {
			resp.ExitCode = ws.ExitStatus()
		}
	default:
		return nil, fmt.Errorf("insecure backend: %w", err)
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		resp.TimedOut, resp.Killed = true, true
	}
	return resp, nil
}

// leakingBackend is insecureBackend, except that when the run's time is up
// (its Timeout, or the host cancelling it) it returns at once, claiming the
// process killed and cleaned up, and leaves it running: the leftover
// checks must catch it.
type leakingBackend struct {
	mu    sync.Mutex
	procs []*os.Process
}

var _ sandbox.Backend = (*leakingBackend)(nil)

func (*leakingBackend) Availability(context.Context, *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	return &sandbox.AvailabilityResponse{Available: true}, nil
}

func (b *leakingBackend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	argv0 := req.Args[0]
	if rest, ok := strings.CutPrefix(argv0, "/pack/"); ok {
		argv0 = filepath.Join(req.PackageDir, rest)
	}
	cmd := exec.Command(argv0, req.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = req.Stdin, req.Stdout, req.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("leaking backend: %w", err)
	}
	b.mu.Lock()
	b.procs = append(b.procs, cmd.Process)
	b.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return &sandbox.RunResponse{ExitCode: cmd.ProcessState.ExitCode(), CleanupVerified: true}, nil
	case <-ctx.Done():
	case <-time.After(req.Timeout):
	}
	return &sandbox.RunResponse{ExitCode: 137, TimedOut: true, Killed: true, CleanupVerified: true}, nil
}

func (b *leakingBackend) killAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.procs {
		_ = p.Kill()
	}
}
