package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// memBackend is an in-memory backend. Args[0] selects the behaviour:
//
//	echo CODE [STDERR_BYTES]  copy stdin to stdout while writing a pattern to
//	                          stderr from another goroutine; exit CODE
//	block                     write "started\n", wait for ctx, return its error
//	ignore-stdin              exit 0 without reading stdin
//	late-write                keep Stdout and return; lateWrite uses it later
//	fail                      return an error
//	nil                       return no response
//	exit CODE                 return CODE without touching the streams
type memBackend struct {
	mu        sync.Mutex
	spec      sandbox.Spec
	cancelled chan struct{} // closed when a "block" run sees ctx done
	late      io.Writer
}

func newMemBackend() *memBackend { return &memBackend{cancelled: make(chan struct{})} }

func (m *memBackend) Availability(_ context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	switch req.Image {
	case "":
		return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonImageMissing, Detail: "no image"}, nil
	case "bogus-reason":
		return &sandbox.AvailabilityResponse{Reason: "bogus"}, nil
	case "error":
		return nil, errors.New("cannot tell")
	}
	return &sandbox.AvailabilityResponse{Available: true}, nil
}

// stderrPattern is what "echo" writes to stderr, in writes of varying size.
func stderrPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func (m *memBackend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	m.mu.Lock()
	m.spec = req.Spec
	m.mu.Unlock()
	if len(req.Args) == 0 {
		return nil, errors.New("no args")
	}
	code := 0
	if len(req.Args) > 1 {
		code, _ = strconv.Atoi(req.Args[1])
	}
	switch req.Args[0] {
	case "echo":
		errBytes := 100
		if len(req.Args) > 2 {
			errBytes, _ = strconv.Atoi(req.Args[2])
		}
		var wg sync.WaitGroup
		var copyErr, errErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, copyErr = io.Copy(req.Stdout, req.Stdin)
		}()
		go func() {
			defer wg.Done()
			p := stderrPattern(errBytes)
			for size := 1; len(p) > 0; size = size*3 + 1 {
				n := min(size, len(p))
				if _, errErr = req.Stderr.Write(p[:n]); errErr != nil {
					return
				}
				p = p[n:]
			}
		}()
		wg.Wait()
		if err := errors.Join(copyErr, errErr); err != nil {
			return nil, err
		}
		return &sandbox.RunResponse{ExitCode: code, CleanupVerified: true}, nil
	case "block":
		if _, err := io.WriteString(req.Stdout, "started\n"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		close(m.cancelled)
		return nil, ctx.Err()
	case "ignore-stdin":
		return &sandbox.RunResponse{}, nil
	case "late-write":
		m.mu.Lock()
		m.late = req.Stdout
		m.mu.Unlock()
		return &sandbox.RunResponse{ExitCode: 5}, nil
	case "fail":
		return nil, errors.New("container runtime exploded")
	case "nil":
		return nil, nil
	case "exit":
		return &sandbox.RunResponse{ExitCode: code, TimedOut: true, Killed: true}, nil
	case "oom":
		return &sandbox.RunResponse{ExitCode: code, Killed: true, OOMKilled: true, CleanupVerified: true}, nil
	case "huge-exit":
		return &sandbox.RunResponse{ExitCode: math.MaxInt32 + 1}, nil
	}
	return nil, fmt.Errorf("unknown mode %q", req.Args[0])
}

var info = plugin.Info{Name: "mem", Version: "0.0.1"}

// checkLeaks fails the test if, after it and its cleanups (registered later,
// so run earlier) are done, goroutines of the SDK, of this test's backend or
// of gRPC are still running after a deadline.
func checkLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := leakedGoroutines()
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	gs := strings.Split(string(buf), "\n\n")
	var out []string
	for _, g := range gs[1:] { // gs[0] is the calling goroutine
		if strings.Contains(g, "testing.tRunner") {
			continue // a (parent) test
		}
		if strings.Contains(g, "agentnode/sdk/") || strings.Contains(g, "google.golang.org/grpc") {
			out = append(out, g)
		}
	}
	return out
}

func run(t *testing.T, c *sandbox.Client, stdin io.Reader, args ...string) (*sandbox.RunResponse, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := c.Run(ctx, &sandbox.RunRequest{
		Spec:  sandbox.Spec{RunID: "r1", Args: args},
		Stdin: stdin, Stdout: &stdout, Stderr: &stderr,
	})
	return resp, stdout.String(), stderr.String(), err
}

func TestRunEcho(t *testing.T) {
	checkLeaks(t)
	c := sandboxtest.Connect(t, info, newMemBackend())
	resp, stdout, stderr, err := run(t, c, strings.NewReader("hello, sandbox"), "echo", "3", "40")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&sandbox.RunResponse{ExitCode: 3, CleanupVerified: true}); !reflect.DeepEqual(resp, want) {
		t.Errorf("response %+v, want %+v", resp, want)
	}
	if stdout != "hello, sandbox" {
		t.Errorf("stdout %q", stdout)
	}
	if stderr != string(stderrPattern(40)) {
		t.Errorf("stderr %q", stderr)
	}
}

// maxWriter records the largest single Write it receives.
type maxWriter struct {
	bytes.Buffer
	max int
}

func (w *maxWriter) Write(p []byte) (int, error) {
	w.max = max(w.max, len(p))
	return w.Buffer.Write(p)
}

func TestRunLargePayload(t *testing.T) {
	checkLeaks(t)
	c := sandboxtest.Connect(t, info, newMemBackend())
	in := make([]byte, 4<<20+17)
	if _, err := rand.Read(in); err != nil {
		t.Fatal(err)
	}
	errSize := 4 << 20
	var stdout, stderr maxWriter
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	resp, err := c.Run(ctx, &sandbox.RunRequest{
		Spec:  sandbox.Spec{Args: []string{"echo", "7", strconv.Itoa(errSize)}},
		Stdin: bytes.NewReader(in), Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", resp.ExitCode)
	}
	if !bytes.Equal(stdout.Bytes(), in) {
		t.Errorf("stdout: %d bytes differ from the %d bytes of stdin", stdout.Len(), len(in))
	}
	if !bytes.Equal(stderr.Bytes(), stderrPattern(errSize)) {
		t.Errorf("stderr: %d bytes, not the expected pattern of %d", stderr.Len(), errSize)
	}
	if stdout.max > sandbox.ChunkSize || stderr.max > sandbox.ChunkSize {
		t.Errorf("output chunks of %d/%d bytes exceed ChunkSize %d", stdout.max, stderr.max, sandbox.ChunkSize)
	}
}

func TestRunConcurrent(t *testing.T) {
	checkLeaks(t)
	c := sandboxtest.Connect(t, info, newMemBackend())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			in := strings.Repeat(fmt.Sprintf("run %d;", i), 20000)
			resp, stdout, stderr, err := run(t, c, strings.NewReader(in), "echo", strconv.Itoa(i), "70000")
			if err != nil {
				t.Error(err)
				return
			}
			if resp.ExitCode != i || stdout != in || stderr != string(stderrPattern(70000)) {
				t.Errorf("run %d: exit %d, stdout ok %v, stderr ok %v", i, resp.ExitCode, stdout == in, stderr == string(stderrPattern(70000)))
			}
		})
	}
	wg.Wait()
}

func TestSpecRoundTrip(t *testing.T) {
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	spec := sandbox.Spec{
		RunID: "run-42", Image: "agentnode/sandbox@sha256:" + strings.Repeat("ab", 32), PackageDir: "/var/pkgs/p",
		Args: []string{"exit", "0"}, Env: []string{"A=1", "B=two words"},
		Limits:  sandbox.Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5, TmpBytes: 16 << 20},
		Timeout: 90 * time.Second, Network: true,
		ImageStore:   "/var/lib/agentnode/images",
		EgressSocket: "/run/agentnode/egress/run-42.sock",
		Workspace:    &sandbox.Workspace{Path: "/home/u/project", Writable: true},
		Warm:         sandbox.WarmPool{Size: 2, Idle: 60 * time.Second},
	}
	if _, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	got := impl.spec
	impl.mu.Unlock()
	if !reflect.DeepEqual(got, spec) {
		t.Fatalf("backend got\n%+v\nwant\n%+v", got, spec)
	}
	// No workspace stays none (not an empty one).
	spec.Workspace = nil
	if _, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	got = impl.spec
	impl.mu.Unlock()
	if got.Workspace != nil {
		t.Fatalf("backend got workspace %+v, want none", got.Workspace)
	}
	// A pool without an idle time is no pool.
	spec.Warm = sandbox.WarmPool{Size: 3}
	if _, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	got = impl.spec
	impl.mu.Unlock()
	if got.Warm != (sandbox.WarmPool{}) {
		t.Fatalf("backend got warm pool %+v, want none", got.Warm)
	}

	// Sub-millisecond timeouts round up, never down to "none".
	spec.Timeout = 1500 * time.Microsecond
	if _, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	got = impl.spec
	impl.mu.Unlock()
	if got.Timeout != 2*time.Millisecond {
		t.Errorf("timeout %v, want 2ms", got.Timeout)
	}

	spec.Timeout = -time.Second
	if _, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: spec}); err == nil {
		t.Error("negative timeout accepted")
	}
}

func TestRunResponseFlags(t *testing.T) {
	c := sandboxtest.Connect(t, info, newMemBackend())
	resp, _, _, err := run(t, c, nil, "exit", "137")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&sandbox.RunResponse{ExitCode: 137, TimedOut: true, Killed: true}); !reflect.DeepEqual(resp, want) {
		t.Fatalf("response %+v, want %+v", resp, want)
	}
	// An OOM kill crosses the wire as such.
	resp, _, _, err = run(t, c, nil, "oom", "137")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&sandbox.RunResponse{ExitCode: 137, Killed: true, OOMKilled: true, CleanupVerified: true}); !reflect.DeepEqual(resp, want) {
		t.Fatalf("response %+v, want %+v", resp, want)
	}
}

func TestRunNilStreams(t *testing.T) {
	checkLeaks(t)
	c := sandboxtest.Connect(t, info, newMemBackend())
	resp, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"echo", "0"}}})
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("got %+v, %v", resp, err)
	}
}

// signalWriter closes started on its first write.
type signalWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

func TestRunCancel(t *testing.T) {
	checkLeaks(t)
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	stdinR, stdinW := io.Pipe() // never written: the stdin goroutine blocks in Read
	t.Cleanup(func() { _ = stdinW.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	out := &signalWriter{started: make(chan struct{})}
	go func() {
		select {
		case <-out.started:
			cancel()
		case <-time.After(10 * time.Second):
		}
	}()
	// The backend blocks until cancelled: returning at all, with the
	// cancellation, is the proof.
	resp, err := c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"block"}}, Stdin: stdinR, Stdout: out})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %+v, %v; want an error wrapping context.Canceled", resp, err)
	}
	select {
	case <-impl.cancelled:
	case <-time.After(30 * time.Second): // a safety net
		t.Fatal("the backend's ctx was not cancelled")
	}
}

func TestRunDeadline(t *testing.T) {
	checkLeaks(t)
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"block"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want one wrapping DeadlineExceeded", err)
	}
	select {
	case <-impl.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's ctx was not cancelled")
	}
}

func TestRunDoesNotWaitForBlockedStdin(t *testing.T) {
	checkLeaks(t)
	c := sandboxtest.Connect(t, info, newMemBackend())
	stdinR, stdinW := io.Pipe()
	t.Cleanup(func() { _ = stdinW.Close() }) // lets the stdin goroutine finish
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"ignore-stdin"}}, Stdin: stdinR})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for a stdin that never ends")
	}
}

// failingReader returns some data, then waits for gate, then fails.
type failingReader struct {
	data []byte
	gate chan struct{}
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		<-r.gate
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestStdinReadErrorAbortsRun(t *testing.T) {
	checkLeaks(t)
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	errDisk := errors.New("disk on fire")
	// The read fails once the backend is running, so that it sees the abort.
	out := &signalWriter{started: make(chan struct{})}
	stdin := &failingReader{data: []byte("partial"), gate: out.started, err: errDisk}
	_, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"block"}}, Stdin: stdin, Stdout: out})
	if !errors.Is(err, errDisk) {
		t.Fatalf("error %v, want one wrapping the stdin error", err)
	}
	select {
	case <-impl.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's ctx was not cancelled")
	}
}

type brokenWriter struct{ err error }

func (w brokenWriter) Write([]byte) (int, error) { return 0, w.err }

func TestStdoutWriteErrorAbortsRun(t *testing.T) {
	checkLeaks(t)
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	errFull := errors.New("buffer full")
	_, err := c.Run(t.Context(), &sandbox.RunRequest{Spec: sandbox.Spec{Args: []string{"block"}}, Stdout: brokenWriter{errFull}})
	if !errors.Is(err, errFull) {
		t.Fatalf("error %v, want one wrapping the write error", err)
	}
	select {
	case <-impl.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's ctx was not cancelled")
	}
}

func TestBackendErrors(t *testing.T) {
	c := sandboxtest.Connect(t, info, newMemBackend())
	for _, tc := range []struct{ mode, want string }{
		{"fail", "container runtime exploded"},
		{"nil", "no run response"},
		{"huge-exit", "out of range"},
		{"nope", "unknown mode"},
	} {
		_, _, _, err := run(t, c, nil, tc.mode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.mode, err, tc.want)
		}
	}
}

func TestWriteAfterRunFails(t *testing.T) {
	impl := newMemBackend()
	c := sandboxtest.Connect(t, info, impl)
	resp, stdout, _, err := run(t, c, nil, "late-write")
	if err != nil || resp.ExitCode != 5 || stdout != "" {
		t.Fatalf("got %+v, %q, %v", resp, stdout, err)
	}
	impl.mu.Lock()
	w := impl.late
	impl.mu.Unlock()
	if n, err := w.Write([]byte("too late")); err == nil || n != 0 {
		t.Fatalf("write after Run returned %d, %v; want an error", n, err)
	}
}

func TestAvailability(t *testing.T) {
	c := sandboxtest.Connect(t, info, newMemBackend())
	ctx := t.Context()
	got, err := c.Availability(ctx, &sandbox.AvailabilityRequest{Image: "img@sha256:00"})
	if err != nil || !got.Available {
		t.Fatalf("got %+v, %v", got, err)
	}
	got, err = c.Availability(ctx, &sandbox.AvailabilityRequest{})
	if want := (&sandbox.AvailabilityResponse{Reason: sandbox.ReasonImageMissing, Detail: "no image"}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for _, img := range []string{"bogus-reason", "error"} {
		if got, err := c.Availability(ctx, &sandbox.AvailabilityRequest{Image: img}); err == nil {
			t.Errorf("%s: got %+v, want an error", img, got)
		}
	}
}

func TestInfo(t *testing.T) {
	got, err := sandboxtest.Connect(t, info, newMemBackend()).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (plugin.Info{Name: "mem", Kind: plugin.KindSandbox, Version: "0.0.1", APIVersions: []uint32{1}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
}

// rawStream opens the Run stream directly, as a host written in another
// language would, to check the wire protocol itself.
func rawStream(t *testing.T, impl sandbox.Backend) pb.Sandbox_RunClient {
	t.Helper()
	_, client := plugintest.Connect[*sandbox.Client](t, plugin.KindSandbox, &sandbox.GRPCPlugin{Impl: impl, Info: info})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := pb.NewSandboxClient(client.Conn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func specMsg(args ...string) *pb.RunInput {
	return &pb.RunInput{Msg: &pb.RunInput_Spec{Spec: &pb.RunSpec{Args: args}}}
}

var closeStdinMsg = &pb.RunInput{Msg: &pb.RunInput_CloseStdin{CloseStdin: true}}

func TestWireExactlyOneExitLast(t *testing.T) {
	checkLeaks(t)
	stream := rawStream(t, newMemBackend())
	in := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160000 bytes in one message
	for _, m := range []*pb.RunInput{specMsg("echo", "9", "100000"), {Msg: &pb.RunInput_Stdin{Stdin: in}}, closeStdinMsg} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr []byte
	var exits int
	for {
		out, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if exits > 0 {
			t.Fatalf("message after the exit: %v", out)
		}
		switch m := out.GetMsg().(type) {
		case *pb.RunOutput_Stdout:
			if len(m.Stdout) > sandbox.ChunkSize || len(m.Stdout) == 0 {
				t.Errorf("stdout chunk of %d bytes", len(m.Stdout))
			}
			stdout = append(stdout, m.Stdout...)
		case *pb.RunOutput_Stderr:
			if len(m.Stderr) > sandbox.ChunkSize || len(m.Stderr) == 0 {
				t.Errorf("stderr chunk of %d bytes", len(m.Stderr))
			}
			stderr = append(stderr, m.Stderr...)
		case *pb.RunOutput_Exit:
			exits++
			if m.Exit.GetExitCode() != 9 || m.Exit.GetError() != "" {
				t.Errorf("exit %v", m.Exit)
			}
		default:
			t.Fatalf("unexpected message %v", out)
		}
	}
	if exits != 1 {
		t.Fatalf("%d exit messages, want 1", exits)
	}
	if !bytes.Equal(stdout, in) || !bytes.Equal(stderr, stderrPattern(100000)) {
		t.Fatalf("stdout %d bytes, stderr %d bytes: content differs", len(stdout), len(stderr))
	}
}

func TestWireProtocolViolations(t *testing.T) {
	for name, msgs := range map[string][]*pb.RunInput{
		"no spec first":          {{Msg: &pb.RunInput_Stdin{Stdin: []byte("x")}}},
		"empty first message":    {{}},
		"second spec":            {specMsg("block"), specMsg("block")},
		"stdin after close":      {specMsg("block"), closeStdinMsg, {Msg: &pb.RunInput_Stdin{Stdin: []byte("x")}}},
		"close stdin twice":      {specMsg("block"), closeStdinMsg, closeStdinMsg},
		"empty message later":    {specMsg("block"), {}},
		"negative timeout_ms":    {{Msg: &pb.RunInput_Spec{Spec: &pb.RunSpec{Args: []string{"block"}, TimeoutMs: -1}}}},
		"overflowing timeout_ms": {{Msg: &pb.RunInput_Spec{Spec: &pb.RunSpec{Args: []string{"block"}, TimeoutMs: math.MaxInt64}}}},
	} {
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			stream := rawStream(t, newMemBackend())
			for _, m := range msgs {
				if err := stream.Send(m); err != nil {
					break // the server may already have ended the stream
				}
			}
			for {
				_, err := stream.Recv()
				if err == nil {
					continue // "started" from the block backend
				}
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("stream ended with %v, want InvalidArgument", err)
				}
				return
			}
		})
	}
}

// floodBackend writes stdout until its run is cancelled, then reports a
// killed, cleaned-up run: what a real backend does when the host stops
// reading.
type floodBackend struct{}

func (floodBackend) Availability(context.Context, *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	return &sandbox.AvailabilityResponse{Available: true}, nil
}

func (floodBackend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	chunk := bytes.Repeat([]byte("x"), 4096)
	for ctx.Err() == nil {
		if _, err := req.Stdout.Write(chunk); err != nil {
			break
		}
	}
	<-ctx.Done()
	return &sandbox.RunResponse{ExitCode: 137, Killed: true, CleanupVerified: true}, nil
}

type failAfter struct{ n, limit int }

var errHostFull = errors.New("host buffer full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n+len(p) > f.limit {
		return 0, errHostFull
	}
	f.n += len(p)
	return len(p), nil
}

// TestStopKeepsCleanupProof: when the host's stdout writer fails, the run is
// stopped, and the backend's answer — killed, cleanup verified — still
// reaches the host together with the write error.
func TestStopKeepsCleanupProof(t *testing.T) {
	c := sandboxtest.Connect(t, info, floodBackend{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "flood", Args: []string{"x"}},
		Stdout: &failAfter{limit: 1 << 20}})
	if !errors.Is(err, errHostFull) {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if resp == nil || !resp.Killed || !resp.CleanupVerified || resp.ExitCode != 137 {
		t.Fatalf("resp = %+v: the stopped run's cleanup proof was lost", resp)
	}
	if ctx.Err() != nil {
		t.Fatal("stop did not end the run before the deadline")
	}
}

// loaderBackend is memBackend with the optional ImageLoader capability. It
// answers by Image: "img@sha256:ok" loads (ID want), "bad-id" answers an ID
// that is not a digest, "fail" fails; anything else is absent.
type loaderBackend struct {
	*memBackend
	got sandbox.LoadImageRequest
}

func (l *loaderBackend) LoadImage(_ context.Context, req *sandbox.LoadImageRequest) (*sandbox.LoadImageResponse, error) {
	l.got = *req
	switch req.Image {
	case "img@sha256:ok":
		return &sandbox.LoadImageResponse{Present: true, ImageID: "sha256:" + strings.Repeat("ab", 32), Detail: "loaded"}, nil
	case "bad-id":
		return &sandbox.LoadImageResponse{Present: true, ImageID: "busybox:latest"}, nil
	case "fail":
		return nil, errors.New("engine refused the archive")
	}
	return &sandbox.LoadImageResponse{Detail: "absent"}, nil
}

func TestLoadImage(t *testing.T) {
	impl := &loaderBackend{memBackend: newMemBackend()}
	c := sandboxtest.Connect(t, info, impl)
	ctx := t.Context()
	req := &sandbox.LoadImageRequest{Image: "img@sha256:ok", Layout: "/var/lib/images/oci", CheckOnly: true}
	got, err := c.LoadImage(ctx, req)
	want := &sandbox.LoadImageResponse{Present: true, ImageID: "sha256:" + strings.Repeat("ab", 32), Detail: "loaded"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadImage = %+v, %v; want %+v", got, err, want)
	}
	if impl.got != *req {
		t.Errorf("the backend got %+v, want %+v", impl.got, *req)
	}
	if got, err := c.LoadImage(ctx, &sandbox.LoadImageRequest{Image: "other"}); err != nil || got.Present || got.Detail != "absent" {
		t.Errorf("absent image: %+v, %v", got, err)
	}
	for _, img := range []string{"bad-id", "fail"} {
		if got, err := c.LoadImage(ctx, &sandbox.LoadImageRequest{Image: img}); err == nil || errors.Is(err, sandbox.ErrNoImageLoad) {
			t.Errorf("%s: got %+v, %v; want an error other than ErrNoImageLoad", img, got, err)
		}
	}
}

// A backend without the capability needs no load: the client says so with
// ErrNoImageLoad, not a failure.
func TestLoadImageAbsentCapability(t *testing.T) {
	c := sandboxtest.Connect(t, info, newMemBackend())
	got, err := c.LoadImage(t.Context(), &sandbox.LoadImageRequest{Image: "img@sha256:ok", Layout: "/x"})
	if !errors.Is(err, sandbox.ErrNoImageLoad) {
		t.Fatalf("LoadImage = %+v, %v; want ErrNoImageLoad", got, err)
	}
}
