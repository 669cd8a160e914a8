package main

import (
	"io"
	"os/exec"
	"strings"
	"sync"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/stdiopipe"
)

// stdio are the pipes between a run and its caller's streams. podman run's
// own standard streams are these pipes, and the passthrough log driver
// hands the same file descriptors to the tool: no copy in podman or
// conmon. Podman's own error messages share stderr with the tool, so
// stderr is always piped (to io.Discard when the caller discards it) and
// its last few KiB are kept for the error of a run that never started.
type stdio struct {
	*stdiopipe.Pipes
	tail *tailWriter
}

const stderrTailMax = 4 << 10

func newStdio(req *sandbox.RunRequest) (*stdio, error) {
	errW := req.Stderr
	if errW == nil {
		errW = io.Discard
	}
	tail := &tailWriter{w: errW}
	p, err := stdiopipe.New(req.Stdin, req.Stdout, tail)
	if err != nil {
		return nil, err
	}
	return &stdio{Pipes: p, tail: tail}, nil
}

// attach hands the container's ends to podman; nil ends are /dev/null.
// They are *os.File, so exec.Cmd starts no copying goroutines of its own.
func (s *stdio) attach(cmd *exec.Cmd) {
	if f := s.ChildStdin(); f != nil {
		cmd.Stdin = f
	}
	if f := s.ChildStdout(); f != nil {
		cmd.Stdout = f
	}
	cmd.Stderr = s.ChildStderr() // always piped: podman's errors are read from it
}

// stderrTail returns the end of stderr so far, for error messages.
func (s *stdio) stderrTail() string { return s.tail.String() }

// tailWriter keeps the last stderrTailMax bytes written through it before
// passing them on to w.
type tailWriter struct {
	w io.Writer

	mu   sync.Mutex
	tail []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if len(t.tail) > stderrTailMax {
		t.tail = append([]byte(nil), t.tail[len(t.tail)-stderrTailMax:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.tail))
}
