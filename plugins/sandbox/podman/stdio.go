package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// stdio are the pipes between a run and its caller's streams. podman run's
// own standard streams are these pipes, and the passthrough log driver
// hands the same file descriptors to the tool: no copy in podman or
// conmon. Exactly three goroutines per run copy data: stdin in, stdout and
// stderr out. Podman's own error messages share stderr with the tool; the
// last few KiB of stderr are kept for the error of a run that never
// started.
type stdio struct {
	req *sandbox.RunRequest

	inR, inW   *os.File // nil when there is no stdin (the tool reads /dev/null)
	outR, outW *os.File // nil when stdout is discarded
	errR, errW *os.File

	closeInOnce sync.Once
	outputs     sync.WaitGroup
	failed      chan error // first output write failure
	failOnce    sync.Once
	firstErr    error

	tailMu sync.Mutex
	tail   []byte // the end of stderr
}

const stderrTailMax = 4 << 10

func newStdio(req *sandbox.RunRequest) (*stdio, error) {
	s := &stdio{req: req, failed: make(chan error, 1)}
	var err error
	mk := func(r, w **os.File) {
		if err == nil {
			*r, *w, err = os.Pipe()
		}
	}
	if req.Stdin != nil {
		mk(&s.inR, &s.inW)
	}
	if req.Stdout != nil {
		mk(&s.outR, &s.outW)
	}
	mk(&s.errR, &s.errW) // always: podman's errors are read from it
	if err != nil {
		s.abort()
		return nil, fmt.Errorf("stdio pipes: %w", err)
	}
	return s, nil
}

// attach hands the container's ends to podman; nil ends are /dev/null.
// They are *os.File, so exec.Cmd starts no copying goroutines of its own.
func (s *stdio) attach(cmd *exec.Cmd) {
	if s.inR != nil {
		cmd.Stdin = s.inR
	}
	if s.outW != nil {
		cmd.Stdout = s.outW
	}
	cmd.Stderr = s.errW
}

// abort closes every end (podman never started).
func (s *stdio) abort() {
	for _, f := range []*os.File{s.inR, s.inW, s.outR, s.outW, s.errR, s.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// start closes our copies of podman's ends and starts the copiers.
func (s *stdio) start() {
	for _, f := range []*os.File{s.inR, s.outW, s.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
	if s.inW != nil {
		go func() {
			_, _ = io.Copy(s.inW, s.req.Stdin)
			s.closeStdin()
		}()
	}
	s.copyOut(s.outR, s.req.Stdout, "stdout", false)
	errW := s.req.Stderr
	if errW == nil {
		errW = io.Discard
	}
	s.copyOut(s.errR, errW, "stderr", true)
}

func (s *stdio) copyOut(r *os.File, w io.Writer, name string, keepTail bool) {
	if r == nil {
		return
	}
	s.outputs.Add(1)
	go func() {
		defer s.outputs.Done()
		buf := make([]byte, sandbox.ChunkSize)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if keepTail {
					s.keepTail(buf[:n])
				}
				if _, werr := w.Write(buf[:n]); werr != nil {
					s.fail(fmt.Errorf("writing %s: %w", name, werr))
					// Keep draining so that the tool cannot block on a
					// full pipe while it is being killed.
					_, _ = io.Copy(io.Discard, r)
					return
				}
			}
			if rerr != nil {
				return // EOF: every writer (podman, conmon, the tool) is gone
			}
		}
	}()
}

func (s *stdio) keepTail(p []byte) {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	s.tail = append(s.tail, p...)
	if len(s.tail) > stderrTailMax {
		s.tail = append([]byte(nil), s.tail[len(s.tail)-stderrTailMax:]...)
	}
}

// stderrTail returns the end of stderr so far, for error messages.
func (s *stdio) stderrTail() string {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	return strings.TrimSpace(string(s.tail))
}

func (s *stdio) fail(err error) {
	s.failOnce.Do(func() {
		s.firstErr = err
		s.failed <- err
	})
}

// closeStdin ends the container's stdin (the tool exited, or the caller's
// stdin did). A copier blocked in Write is woken with an error.
func (s *stdio) closeStdin() {
	if s.inW != nil {
		s.closeInOnce.Do(func() { _ = s.inW.Close() })
	}
}

// wait waits until no more output will be written. Once the container and
// podman are gone every writer is gone and the copiers see EOF; if they have
// not finished after ioGrace the read ends are closed under them. A copier
// blocked in the caller's Write is waited for: nothing may be written after
// Run returns.
func (s *stdio) wait() error {
	done := make(chan struct{})
	go func() { s.outputs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ioGrace):
		for _, f := range []*os.File{s.outR, s.errR} {
			if f != nil {
				_ = f.Close()
			}
		}
		<-done
	}
	for _, f := range []*os.File{s.outR, s.errR} {
		if f != nil {
			_ = f.Close()
		}
	}
	return s.firstErr
}
