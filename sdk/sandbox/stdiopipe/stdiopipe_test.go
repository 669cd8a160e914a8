package stdiopipe_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/stdiopipe"
)

// child returns a duplicate of a child end, as a started process would
// hold it: Start closes the original.
func child(t *testing.T, f *os.File) *os.File {
	t.Helper()
	if f == nil {
		t.Fatal("child end is nil")
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// syncBuffer is a bytes.Buffer safe for the copier and the test, recording
// the largest single write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max(b.max, len(p))
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRoundTrip(t *testing.T) {
	in := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB: several chunks
	var stdout, stderr syncBuffer
	p, err := stdiopipe.New(strings.NewReader(in), &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	cin, cout, cerr := child(t, p.ChildStdin()), child(t, p.ChildStdout()), child(t, p.ChildStderr())
	p.Start()

	// The "tool": stdout echoes stdin, then a line on stderr.
	toolDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(cout, cin)
		if err == nil {
			_, err = io.WriteString(cerr, "done\n")
		}
		cin.Close()
		cout.Close()
		cerr.Close()
		toolDone <- err
	}()
	select {
	case err := <-toolDone:
		if err != nil {
			t.Fatalf("tool: %v", err)
		}
	case err := <-p.Failed():
		t.Fatalf("failed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("tool did not finish: stdin not closed at its EOF?")
	}
	p.CloseStdin()
	p.CloseStdin() // idempotent
	if err := p.Wait(time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if stdout.String() != in {
		t.Errorf("stdout: got %d bytes, want %d", len(stdout.String()), len(in))
	}
	if stdout.max > sandbox.ChunkSize {
		t.Errorf("stdout write of %d bytes exceeds ChunkSize %d", stdout.max, sandbox.ChunkSize)
	}
	if stderr.String() != "done\n" {
		t.Errorf("stderr: got %q", stderr.String())
	}
}

func TestNilStreamsGetNoPipe(t *testing.T) {
	p, err := stdiopipe.New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ChildStdin() != nil || p.ChildStdout() != nil || p.ChildStderr() != nil {
		t.Fatal("nil streams got pipes")
	}
	p.Start()
	p.CloseStdin()
	if err := p.Wait(time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestAbort(t *testing.T) {
	p, err := stdiopipe.New(strings.NewReader("x"), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ends := []*os.File{p.ChildStdin(), p.ChildStdout(), p.ChildStderr()}
	p.Abort()
	for _, f := range ends {
		if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s still open after Abort: %v", f.Name(), err)
		}
	}
}

// failWriter fails every write with err after accepting ok writes.
type failWriter struct {
	mu  sync.Mutex
	ok  int
	err error
}

func (w *failWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok > 0 {
		w.ok--
		return len(p), nil
	}
	return 0, w.err
}

func TestWriteFailureDrainsAndIsReported(t *testing.T) {
	errOut := errors.New("stdout sink broke")
	errErr := errors.New("stderr sink broke")
	out := &failWriter{ok: 1, err: errOut}
	errw := &failWriter{err: errErr}
	p, err := stdiopipe.New(nil, out, errw)
	if err != nil {
		t.Fatal(err)
	}
	cout, cerr := child(t, p.ChildStdout()), child(t, p.ChildStderr())
	p.Start()

	// The tool writes far more than a pipe holds; it must never block.
	produced := make(chan error, 1)
	go func() {
		_, err := cout.Write(make([]byte, 4<<20))
		cout.Close()
		produced <- err
	}()
	select {
	case err := <-p.Failed():
		if !errors.Is(err, errOut) || !strings.HasPrefix(err.Error(), "writing stdout: ") {
			t.Fatalf("Failed: got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Failed did not fire")
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("producer blocked: the failed copier does not drain")
	}

	// A second failure is not reported again, and does not replace the first.
	if _, err := cerr.Write([]byte("more\n")); err != nil {
		t.Fatal(err)
	}
	cerr.Close()
	if err := p.Wait(time.Second); !errors.Is(err, errOut) {
		t.Fatalf("Wait: got %v, want the first failure %v", err, errOut)
	}
	select {
	case err := <-p.Failed():
		t.Fatalf("Failed fired twice: %v", err)
	default:
	}
}

// gatedWriter blocks every write until gate is closed and records writes
// made after done is set.
type gatedWriter struct {
	gate   chan struct{}
	done   atomic.Bool
	late   atomic.Int32
	writes atomic.Int32
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	<-w.gate
	if w.done.Load() {
		w.late.Add(1)
	}
	return len(p), nil
}

func TestNothingWrittenAfterWait(t *testing.T) {
	w := &gatedWriter{gate: make(chan struct{})}
	p, err := stdiopipe.New(nil, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	cout := child(t, p.ChildStdout())
	defer cout.Close() // a writer that never goes away: Wait's grace ends it
	p.Start()

	// Keep the tool writing after Wait has begun.
	stop := make(chan struct{})
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		buf := []byte("output\n")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := cout.Write(buf); err != nil {
				return // EPIPE once Wait closed the read end
			}
		}
	}()
	for w.writes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	waited := make(chan error, 1)
	go func() {
		err := p.Wait(20 * time.Millisecond)
		w.done.Store(true)
		waited <- err
	}()
	// The copier is blocked in the caller's Write: Wait must wait for it,
	// grace or not.
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) while a Write was in progress", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(w.gate)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after its grace period")
	}
	n := w.writes.Load()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-producerDone
	if late := w.late.Load(); late != 0 || w.writes.Load() != n {
		t.Fatalf("%d writes after Wait returned (%d started)", late, w.writes.Load()-n)
	}
}

// A deferred pipe set has all three child ends before the streams are
// known; the streams attached later are the ones copied, and nil ones are
// an empty stdin and discarded output.
func TestDeferredAttach(t *testing.T) {
	p, err := stdiopipe.NewDeferred()
	if err != nil {
		t.Fatal(err)
	}
	cin, cout, cerr := child(t, p.ChildStdin()), child(t, p.ChildStdout()), child(t, p.ChildStderr())
	var stdout syncBuffer
	p.Attach(strings.NewReader("input of this run"), &stdout, nil)
	p.Start()
	_, err = io.Copy(cout, cin)
	if err == nil {
		_, err = io.WriteString(cerr, "dropped\n")
	}
	cin.Close()
	cout.Close()
	cerr.Close()
	if err != nil {
		t.Fatalf("tool: %v", err)
	}
	p.CloseStdin()
	if err := p.Wait(time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := stdout.String(); got != "input of this run" {
		t.Errorf("stdout = %q", got)
	}

	// Nothing attached: the tool reads EOF at once.
	q, err := stdiopipe.NewDeferred()
	if err != nil {
		t.Fatal(err)
	}
	qin := child(t, q.ChildStdin())
	q.Attach(nil, nil, nil)
	q.Start()
	b, err := io.ReadAll(qin)
	qin.Close()
	if err != nil || len(b) != 0 {
		t.Errorf("stdin with nothing attached: %q, %v", b, err)
	}
	q.CloseStdin()
	if err := q.Wait(time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}
