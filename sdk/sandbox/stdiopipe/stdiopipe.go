// Package stdiopipe is host-side stdio plumbing for sandbox backends that
// run a process with OS pipes: copy stdin in, stdout/stderr out in
// sandbox.ChunkSize reads, stop at the first write failure while draining so
// the tool never blocks, and guarantee nothing is written after Wait
// returns.
//
// A backend calls New with the caller's streams, hands the child ends
// (ChildStdin, ChildStdout, ChildStderr) to the process it starts, then
// calls Start once the process runs, or Abort if it never started. While
// the process runs it watches Failed; when the process has ended it calls
// CloseStdin, and once every writer of the output pipes is gone (the
// sandbox is torn down) it calls Wait. Exactly three goroutines per run
// copy data: stdin in, stdout and stderr out.
package stdiopipe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// Pipes are the pipes between a sandboxed process and its caller's
// streams.
type Pipes struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	inR, inW   *os.File // nil when there is no stdin
	outR, outW *os.File // nil when stdout is discarded
	errR, errW *os.File // nil when stderr is discarded

	closeInOnce sync.Once
	outputs     sync.WaitGroup
	failed      chan error // first output write failure
	failOnce    sync.Once
	firstErr    error
}

// New creates a pipe for each non-nil stream: stdin is copied into the
// process, its stdout and stderr are copied to stdout and stderr. A nil
// stream gets no pipe; the backend gives the process /dev/null instead.
// On error every pipe already made is closed.
func New(stdin io.Reader, stdout, stderr io.Writer) (*Pipes, error) {
	p := &Pipes{stdin: stdin, stdout: stdout, stderr: stderr, failed: make(chan error, 1)}
	var err error
	mk := func(r, w **os.File) {
		if err == nil {
			*r, *w, err = os.Pipe()
		}
	}
	if stdin != nil {
		mk(&p.inR, &p.inW)
	}
	if stdout != nil {
		mk(&p.outR, &p.outW)
	}
	if stderr != nil {
		mk(&p.errR, &p.errW)
	}
	if err != nil {
		p.Abort()
		return nil, fmt.Errorf("stdio pipes: %w", err)
	}
	return p, nil
}

// NewDeferred creates all three pipes before the caller's streams are
// known: for a process started ahead of the run it will serve (a prepared
// sandbox, whose stdio is fixed when it is created). Attach gives the
// streams before Start.
func NewDeferred() (*Pipes, error) {
	return New(strings.NewReader(""), io.Discard, io.Discard)
}

// Attach sets the caller's streams of pipes made by NewDeferred; call it
// once, before Start. A nil stdin is empty and nil stdout or stderr is
// discarded (their pipes exist already).
func (p *Pipes) Attach(stdin io.Reader, stdout, stderr io.Writer) {
	if stdin != nil {
		p.stdin = stdin
	}
	if stdout != nil {
		p.stdout = stdout
	}
	if stderr != nil {
		p.stderr = stderr
	}
}

// ChildStdin is the process's end of the stdin pipe, nil when there is no
// stdin. Assign it only when non-nil: a nil *os.File in an io.Reader is
// not a nil io.Reader.
func (p *Pipes) ChildStdin() *os.File { return p.inR }

// ChildStdout is the process's end of the stdout pipe, nil when stdout is
// discarded.
func (p *Pipes) ChildStdout() *os.File { return p.outW }

// ChildStderr is the process's end of the stderr pipe, nil when stderr is
// discarded.
func (p *Pipes) ChildStderr() *os.File { return p.errW }

// Abort closes every end. Call it instead of Start when the process never
// started.
func (p *Pipes) Abort() {
	for _, f := range []*os.File{p.inR, p.inW, p.outR, p.outW, p.errR, p.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Start closes our copies of the process's ends and starts the copiers.
// Call it once, after the process has started.
func (p *Pipes) Start() {
	for _, f := range []*os.File{p.inR, p.outW, p.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
	if p.inW != nil {
		go func() {
			_, _ = io.Copy(p.inW, p.stdin)
			p.CloseStdin()
		}()
	}
	p.copyOut(p.outR, p.stdout, "stdout")
	p.copyOut(p.errR, p.stderr, "stderr")
}

func (p *Pipes) copyOut(r *os.File, w io.Writer, name string) {
	if r == nil {
		return
	}
	p.outputs.Add(1)
	go func() {
		defer p.outputs.Done()
		buf := make([]byte, sandbox.ChunkSize)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					p.fail(fmt.Errorf("writing %s: %w", name, werr))
					// Keep draining so the tool cannot block on a full
					// pipe while it is being killed.
					_, _ = io.Copy(io.Discard, r)
					return
				}
			}
			if rerr != nil {
				return // EOF: every writer of the pipe is gone
			}
		}
	}()
}

func (p *Pipes) fail(err error) {
	p.failOnce.Do(func() {
		p.firstErr = err
		p.failed <- err
	})
}

// Failed receives the first output write failure ("writing stdout: ..."
// or "writing stderr: ..."), at most once. The copier that failed keeps
// draining its pipe; the backend should kill the process.
func (p *Pipes) Failed() <-chan error { return p.failed }

// CloseStdin ends the process's stdin (the process exited, or the caller's
// stdin did). A copier blocked in Write is woken with an error. It is safe
// to call more than once.
func (p *Pipes) CloseStdin() {
	if p.inW != nil {
		p.closeInOnce.Do(func() { _ = p.inW.Close() })
	}
}

// Wait waits until no more output will be written and returns the first
// write failure, if any. Once the sandbox is gone every writer is gone and
// the copiers see EOF; if they have not finished after grace the read ends
// are closed under them. A copier blocked in the caller's Write is waited
// for: nothing is written after Wait returns.
func (p *Pipes) Wait(grace time.Duration) error {
	done := make(chan struct{})
	go func() { p.outputs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		for _, f := range []*os.File{p.outR, p.errR} {
			if f != nil {
				_ = f.Close()
			}
		}
		<-done
	}
	for _, f := range []*os.File{p.outR, p.errR} {
		if f != nil {
			_ = f.Close()
		}
	}
	return p.firstErr
}
