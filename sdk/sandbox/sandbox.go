// Package sandbox is the plugin contract for sandbox backends: run one
// process inside a hardened container built from specs/sandbox/profile.json,
// stream its stdin, stdout and stderr, and report how it ended. The kernel
// refuses to run anything when a backend is unavailable or any call fails
// (sandbox_unavailable; fail closed).
//
// On the wire (sandbox.proto) Run is a bidirectional stream. The host sends
// the spec first, then stdin in chunks of at most ChunkSize bytes, then
// close_stdin. The plugin streams stdout and stderr chunks back and ends the
// stream with exactly one exit message. Client and the plugin-side adapter
// do this for you: a Backend sees an ordinary io.Reader and io.Writers.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// ChunkSize is the largest stdin, stdout or stderr payload of one stream
// message.
const ChunkSize = 32 << 10

// Reasons a backend is unavailable.
const (
	ReasonNotInstalled = "not_installed" // the runtime (runc, docker, podman) is missing
	ReasonNotRunning   = "not_running"   // its daemon is not running
	ReasonNotPermitted = "not_permitted" // this user may not use it (e.g. needs root)
	ReasonImageMissing = "image_missing" // the pinned image is not present
	ReasonIncompatible = "incompatible"  // it cannot enforce the profile (cgroups, seccomp, ...)
)

// Reasons lists every valid unavailability reason.
var Reasons = []string{ReasonNotInstalled, ReasonNotRunning, ReasonNotPermitted, ReasonImageMissing, ReasonIncompatible, ReasonRuntimeMissing}

func validReason(r string) bool {
	for _, x := range Reasons {
		if r == x {
			return true
		}
	}
	return false
}

// AvailabilityRequest asks whether the backend can run the given image now.
type AvailabilityRequest struct {
	Image string // name@sha256:...
	// ImageStore is the host path of the image store in which the host
	// verified Image (Spec.ImageStore); empty when Image is.
	ImageStore string
	// Runtime is the runtime the run would use (Spec.Runtime).
	Runtime string
}

// AvailabilityResponse says whether the backend can run. When Available is
// false, Reason is one of the Reason constants and Detail is for humans.
// An available backend sets Runtime to the request's runtime ("" counts
// as native): both sides of the wire refuse (ReasonRuntimeMissing) an
// answer that does not confirm a non-native runtime, so a backend that
// knows nothing of runtimes never runs a gVisor run natively.
type AvailabilityResponse struct {
	Available bool
	Reason    string
	Detail    string
	Runtime   string
}

// Limits are the resource limits of one run. Zero means the profile default.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	TmpBytes    int64
}

// Spec describes one run.
type Spec struct {
	RunID string
	Image string // name@sha256:<manifest hex>, verified by the host just before the run
	// ImageStore is the host path of the image store in which the host
	// verified Image (sdk/sandbox/imagestore). The host passes nothing
	// else about the image: each backend resolves Image there to what it
	// runs (libcontainer the unpacked rootfs, Docker and Podman the image
	// ID named by the manifest, checked against Image's digest), so that
	// it runs the image the host verified and nothing else.
	ImageStore string
	PackageDir string   // host path, mounted read-only at /pack
	Args       []string // argv inside the container
	Env        []string // KEY=VALUE, already filtered by the host
	Limits     Limits
	// Timeout is the wall-clock limit of the process, counted from just
	// before the backend starts it. The backend kills the process when it
	// is exceeded and reports TimedOut, and makes sure the process is
	// killed even if the plugin dies or hangs (the bundled backends: a
	// reaper, sdk/sandbox/reaper, or the engine's own timeout; see
	// specs/sandbox/README.md). It travels in whole milliseconds, rounded
	// up.
	Timeout time.Duration
	Network bool // false: loopback only
	// EgressSocket is the host path of a unix socket, the only way out of
	// a sandbox whose egress is sealed (the host's CONNECT proxy). When it
	// is set, the backend mounts it read-only (connect(2) still works) at
	// profile.EgressSocketPath, runs the command under the image's egress
	// forwarder (pid 1, which serves the socket on the container's
	// 127.0.0.1 as an HTTP proxy) and sets HTTPS_PROXY and friends to it;
	// the network namespace keeps only loopback. Empty: no egress. The
	// socket must be connectable by the sandbox user (uid 1000).
	EgressSocket string
	// Workspace, when set, is the user's workspace directory granted to
	// this run (`--workspace`): the backend bind-mounts Path at the same
	// absolute path inside the container (nosuid, nodev, noexec,
	// read-only unless Writable) and makes it the process's working
	// directory (profile.ForRun). Nil: no host directory but the package.
	Workspace *Workspace
	// Warm lets the backend keep prepared sandboxes for runs like this
	// one (WarmPool); the zero value (a one-shot host) prepares nothing.
	Warm WarmPool
	// Runtime is what isolates the process (RuntimeNative when empty, or
	// RuntimeGVisor). A backend that cannot run it refuses the run with an
	// error; it never runs the process under another runtime.
	Runtime string
}

// WarmPool is what a long-lived host (`agentnode mcp serve`) lets a
// backend keep ready for its next runs: up to Size sandboxes prepared
// for a run's spec (every field but RunID, Timeout and Warm equal), each
// serving one run at most, destroyed after Idle unused. A backend without
// a pool ignores it (only libcontainer has one).
type WarmPool struct {
	Size int
	Idle time.Duration
}

// Workspace is a host directory granted to one run (Spec.Workspace).
type Workspace struct {
	// Path is absolute and symlink-free (the host resolved it).
	Path string
	// Writable: read-write; false: read-only.
	Writable bool
}

// RunRequest is a Spec plus the process's standard streams. Nil Stdin is an
// empty stdin; nil Stdout or Stderr discards that stream.
type RunRequest struct {
	Spec
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// RunResponse is how the process ended.
type RunResponse struct {
	// ExitCode is the process's exit status, as a shell reports it
	// (128+N when it was killed by signal N).
	ExitCode int
	TimedOut bool // killed because Timeout passed
	Killed   bool // killed (timeout, limits or cancellation)
	// OOMKilled: the kernel's OOM killer killed a process of the container
	// for going past Limits.MemoryBytes (the memory cgroup's oom_kill
	// count, or the engine's State.OOMKilled). The host reports such a run
	// as killed_memory, not as a malformed response.
	OOMKilled bool
	// CleanupVerified: the backend checked that the container, its cgroup
	// and its mounts are gone.
	CleanupVerified bool
}

// Backend is implemented by sandbox backend plugins.
//
// Run must return only after the process has ended and nothing writes to
// req.Stdout or req.Stderr any more; writes after Run returns fail. It must
// honour ctx: when ctx is done, kill the process, clean up and return. On the
// plugin side req.Stdin reports an error when the host cancels the run.
type Backend interface {
	Availability(ctx context.Context, req *AvailabilityRequest) (*AvailabilityResponse, error)
	Run(ctx context.Context, req *RunRequest) (*RunResponse, error)
}

// ImageLoader is the optional capability of a backend that runs images
// from its engine's own image store (Docker, Podman): loading an image a
// front end built or pulled (`agentnode sandbox build`) into the engine.
// A backend that runs the host's verified rootfs directly (libcontainer)
// does not implement it; Client.LoadImage then fails with ErrNoImageLoad,
// which means no load is needed. The kernel never loads images: only
// front ends call it.
type ImageLoader interface {
	LoadImage(ctx context.Context, req *LoadImageRequest) (*LoadImageResponse, error)
}

// LoadImageRequest asks a backend to load an image from an OCI image
// layout into its engine (or, with CheckOnly, only whether it has it).
type LoadImageRequest struct {
	Image string // name@sha256:<manifest hex>, the pinned reference
	// Layout is the host path of an OCI image layout holding Image. The
	// backend checks every blob it reads against its digest, the manifest
	// against Image's (sdk/sandbox/imageload).
	Layout string
	// CheckOnly: load nothing, only report whether the engine has the
	// image (its image ID is the image's config digest).
	CheckOnly bool
}

// LoadImageResponse is whether the engine has the image after the call.
type LoadImageResponse struct {
	Present bool   // the engine has the image under its config digest
	ImageID string // the engine's image ID, sha256:... (the config digest); set when Present
	Detail  string // for humans
}

// ErrNoImageLoad is wrapped by Client.LoadImage when the backend does not
// implement ImageLoader: it needs no load (libcontainer).
var ErrNoImageLoad = errors.New("the sandbox backend needs no image load")

// GRPCPlugin adapts a Backend to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Backend
	Info plugin.Info
}

// GRPCServer registers the Sandbox service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterSandboxServer(s, &server{InfoService: plugin.NewInfoService(plugin.KindSandbox, p.Info), impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// Serve runs impl as a sandbox backend plugin process. See plugin.Serve.
func Serve(info plugin.Info, impl Backend) {
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindSandbox, Plugin: &GRPCPlugin{Impl: impl, Info: info}})
}

// timeoutToMillis rounds d up to whole milliseconds.
func timeoutToMillis(d time.Duration) int64 {
	if d > math.MaxInt64-time.Millisecond {
		return int64(d / time.Millisecond)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func specToProto(s *Spec) (*pb.RunSpec, error) {
	if s.Timeout < 0 {
		return nil, fmt.Errorf("sandbox: negative timeout %v", s.Timeout)
	}
	return &pb.RunSpec{
		RunId:      s.RunID,
		Image:      s.Image,
		PackageDir: s.PackageDir,
		ImageStore: s.ImageStore,
		Args:       s.Args,
		Env:        s.Env,
		Limits: &pb.Limits{
			MemoryBytes: s.Limits.MemoryBytes,
			Pids:        s.Limits.Pids,
			Cpus:        s.Limits.CPUs,
			TmpBytes:    s.Limits.TmpBytes,
		},
		TimeoutMs:    timeoutToMillis(s.Timeout),
		Network:      s.Network,
		EgressSocket: s.EgressSocket,
		Workspace:    workspaceToProto(s.Workspace),
		WarmPoolSize: int32(min(max(s.Warm.Size, 0), math.MaxInt32)),
		WarmIdleMs:   timeoutToMillis(max(s.Warm.Idle, 0)),
		Runtime:      s.Runtime,
	}, nil
}

func workspaceToProto(w *Workspace) *pb.Workspace {
	if w == nil {
		return nil
	}
	return &pb.Workspace{Path: w.Path, Writable: w.Writable}
}

func workspaceFromProto(w *pb.Workspace) *Workspace {
	if w == nil {
		return nil
	}
	return &Workspace{Path: w.GetPath(), Writable: w.GetWritable()}
}

// warmFromProto is the pool a spec allows: none when either number is
// not positive.
func warmFromProto(size int32, idleMs int64) WarmPool {
	if size <= 0 || idleMs <= 0 || idleMs > math.MaxInt64/int64(time.Millisecond) {
		return WarmPool{}
	}
	return WarmPool{Size: int(size), Idle: time.Duration(idleMs) * time.Millisecond}
}

func specFromProto(p *pb.RunSpec) (Spec, error) {
	ms := p.GetTimeoutMs()
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return Spec{}, fmt.Errorf("sandbox: timeout_ms %d out of range", ms)
	}
	l := p.GetLimits()
	return Spec{
		RunID:      p.GetRunId(),
		Image:      p.GetImage(),
		PackageDir: p.GetPackageDir(),
		ImageStore: p.GetImageStore(),
		Args:       p.GetArgs(),
		Env:        p.GetEnv(),
		Limits: Limits{
			MemoryBytes: l.GetMemoryBytes(),
			Pids:        l.GetPids(),
			CPUs:        l.GetCpus(),
			TmpBytes:    l.GetTmpBytes(),
		},
		Timeout:      time.Duration(ms) * time.Millisecond,
		Network:      p.GetNetwork(),
		EgressSocket: p.GetEgressSocket(),
		Workspace:    workspaceFromProto(p.GetWorkspace()),
		Warm:         warmFromProto(p.GetWarmPoolSize(), p.GetWarmIdleMs()),
		Runtime:      p.GetRuntime(),
	}, nil
}

// --- plugin side ---

// errRunEnded is what a Backend sees when it writes to Stdout or Stderr, or
// reads Stdin, after its Run returned.
var errRunEnded = errors.New("sandbox: run has ended")

// errStopped is the cause of a run's context when the host sent stop.
var errStopped = errors.New("sandbox: the host stopped reading output")

// errProtocol marks a host that broke the stream protocol.
var errProtocol = errors.New("sandbox: stream protocol violation")

type server struct {
	plugin.InfoService
	unimplemented
	impl Backend
}

// unimplemented keeps the generated defaults one level below
// plugin.InfoService, whose Info answers.
type unimplemented struct{ pb.UnimplementedSandboxServer }

func (s *server) Availability(ctx context.Context, r *pb.AvailabilityRequest) (*pb.AvailabilityResponse, error) {
	resp, err := s.impl.Availability(ctx, &AvailabilityRequest{Image: r.GetImage(), ImageStore: r.GetImageStore(), Runtime: r.GetRuntime()})
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("sandbox plugin returned no availability response")
	}
	if refusal := runtimeRefusal(r.GetRuntime(), resp); refusal != nil {
		resp = refusal
	}
	if !resp.Available && !validReason(resp.Reason) {
		return nil, fmt.Errorf("sandbox plugin: unavailable with invalid reason %q", resp.Reason)
	}
	return &pb.AvailabilityResponse{Available: resp.Available, Reason: resp.Reason, Detail: resp.Detail, Runtime: resp.Runtime}, nil
}

// LoadImage calls the backend's ImageLoader; a backend without one answers
// UNIMPLEMENTED (Client.LoadImage: ErrNoImageLoad).
func (s *server) LoadImage(ctx context.Context, r *pb.LoadImageRequest) (*pb.LoadImageResponse, error) {
	l, ok := s.impl.(ImageLoader)
	if !ok {
		return nil, status.Error(codes.Unimplemented, ErrNoImageLoad.Error())
	}
	resp, err := l.LoadImage(ctx, &LoadImageRequest{Image: r.GetImage(), Layout: r.GetLayout(), CheckOnly: r.GetCheckOnly()})
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("sandbox plugin returned no load response")
	}
	return &pb.LoadImageResponse{Present: resp.Present, ImageId: resp.ImageID, Detail: resp.Detail}, nil
}

// Run adapts the stream to Backend.Run. The calling goroutine runs the
// backend; one goroutine (pumpStdin) receives stdin into an io.Pipe; output
// writers may be used from any goroutines and are serialised by outStream.
func (s *server) Run(stream grpc.BidiStreamingServer[pb.RunInput, pb.RunOutput]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ps := first.GetSpec()
	if ps == nil {
		return status.Errorf(codes.InvalidArgument, "%v: the first message must carry the spec", errProtocol)
	}
	spec, err := specFromProto(ps)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := checkRunRuntime(s.impl, spec.Runtime); err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}

	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	pr, pw := io.Pipe()
	// pumpStdin may cancel ctx with errStopped (the host stopped reading
	// output); the backend sees a cancelled run and must still clean up and
	// answer, and that answer is sent.
	out := &outStream{stream: stream}
	// pumpStdin ends when the stream does: at the latest when this handler
	// returns, which cancels the stream's context and fails its Recv.
	go pumpStdin(stream, pw, cancel)

	resp, err := s.impl.Run(ctx, &RunRequest{
		Spec:   spec,
		Stdin:  pr,
		Stdout: outWriter{o: out, stderr: false},
		Stderr: outWriter{o: out, stderr: true},
	})
	_ = pr.CloseWithError(errRunEnded)
	out.close()
	if cause := context.Cause(ctx); errors.Is(cause, errProtocol) {
		return status.Error(codes.InvalidArgument, cause.Error())
	}
	if err != nil {
		return err
	}
	if resp == nil {
		return status.Error(codes.Internal, "sandbox plugin returned no run response")
	}
	if resp.ExitCode < math.MinInt32 || resp.ExitCode > math.MaxInt32 {
		return status.Errorf(codes.Internal, "sandbox plugin returned exit code %d out of range", resp.ExitCode)
	}
	return out.sendExit(&pb.RunExit{
		ExitCode:        int32(resp.ExitCode),
		TimedOut:        resp.TimedOut,
		Killed:          resp.Killed,
		CleanupVerified: resp.CleanupVerified,
		OomKilled:       resp.OOMKilled,
	})
}

// pumpStdin feeds stdin messages into pw until close_stdin, then keeps
// receiving until the stream ends so that a protocol violation is noticed.
// Stdin the backend does not read is discarded.
func pumpStdin(stream grpc.BidiStreamingServer[pb.RunInput, pb.RunOutput], pw *io.PipeWriter, abort context.CancelCauseFunc) {
	open, discard := true, false
	fail := func(format string, args ...any) {
		err := fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
		abort(err)
		_ = pw.CloseWithError(err)
	}
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			_ = pw.Close() // half-close: stdin ends too
			return
		}
		if err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		switch m := in.GetMsg().(type) {
		case *pb.RunInput_Stdin:
			if !open {
				fail("stdin after close_stdin")
				return
			}
			if !discard {
				if _, err := pw.Write(m.Stdin); err != nil {
					discard = true // the backend closed stdin or returned
				}
			}
		case *pb.RunInput_Stop:
			// The host stopped reading: end the run like a cancellation,
			// but keep the stream so the exit (and cleanup proof) reaches it.
			abort(errStopped)
		case *pb.RunInput_CloseStdin:
			if !open {
				fail("close_stdin twice")
				return
			}
			open = false
			_ = pw.Close()
		case *pb.RunInput_Spec:
			fail("a second spec")
			return
		default:
			fail("an empty RunInput")
			return
		}
	}
}

// outStream serialises sends of stdout, stderr and the exit message; gRPC
// forbids concurrent SendMsg on one stream.
type outStream struct {
	mu     sync.Mutex
	stream grpc.BidiStreamingServer[pb.RunInput, pb.RunOutput]
	closed bool
	err    error
}

func (o *outStream) send(m *pb.RunOutput) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return errRunEnded
	}
	if o.err != nil {
		return o.err
	}
	if err := o.stream.Send(m); err != nil {
		o.err = fmt.Errorf("sandbox: sending output: %w", err)
		return o.err
	}
	return nil
}

func (o *outStream) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

func (o *outStream) sendExit(e *pb.RunExit) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.err != nil {
		return o.err
	}
	return o.stream.Send(&pb.RunOutput{Msg: &pb.RunOutput_Exit{Exit: e}})
}

type outWriter struct {
	o      *outStream
	stderr bool
}

// Write sends p in chunks of at most ChunkSize. It blocks while the host is
// not reading (gRPC flow control) and fails once the run has ended.
func (w outWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), ChunkSize)
		chunk := bytes.Clone(p[:c])
		var m *pb.RunOutput
		if w.stderr {
			m = &pb.RunOutput{Msg: &pb.RunOutput_Stderr{Stderr: chunk}}
		} else {
			m = &pb.RunOutput{Msg: &pb.RunOutput_Stdout{Stdout: chunk}}
		}
		if err := w.o.send(m); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}

// --- host side ---

// ErrProtocol is wrapped by Client errors about a plugin that broke the
// stream protocol (output after exit, two exits, no exit).
var ErrProtocol = errors.New("sandbox plugin broke the run protocol")

// Client is the host side of a sandbox backend plugin. It implements Backend.
type Client struct {
	plugin.InfoClient // Info asks the plugin to describe itself.
	c                 pb.SandboxClient
}

var (
	_ Backend     = (*Client)(nil)
	_ ImageLoader = (*Client)(nil)
)

// NewClient wraps a gRPC connection to a Sandbox service.
func NewClient(cc grpc.ClientConnInterface) *Client { return newClient(pb.NewSandboxClient(cc)) }

func newClient(c pb.SandboxClient) *Client {
	return &Client{InfoClient: plugin.NewInfoClient(plugin.KindSandbox, c), c: c}
}

// Availability asks the backend whether it can run req.Image now. An
// unavailable answer without a valid reason is an error.
func (c *Client) Availability(ctx context.Context, req *AvailabilityRequest) (*AvailabilityResponse, error) {
	if req == nil {
		return nil, errors.New("sandbox: nil AvailabilityRequest")
	}
	r, err := c.c.Availability(ctx, &pb.AvailabilityRequest{Image: req.Image, ImageStore: req.ImageStore, Runtime: req.Runtime})
	if err != nil {
		return nil, fmt.Errorf("sandbox plugin: availability: %w", err)
	}
	if !r.GetAvailable() && !validReason(r.GetReason()) {
		return nil, fmt.Errorf("sandbox plugin: unavailable with invalid reason %q", r.GetReason())
	}
	resp := &AvailabilityResponse{Available: r.GetAvailable(), Reason: r.GetReason(), Detail: r.GetDetail(), Runtime: r.GetRuntime()}
	if refusal := runtimeRefusal(req.Runtime, resp); refusal != nil {
		return refusal, nil
	}
	return resp, nil
}

// LoadImage asks the backend to load req.Image from req.Layout into its
// engine (or only whether the engine has it, req.CheckOnly). A backend
// that needs no load (it does not implement ImageLoader) makes it fail
// with an error wrapping ErrNoImageLoad. A present image whose ID is not
// sha256:<64 hex> is an error.
func (c *Client) LoadImage(ctx context.Context, req *LoadImageRequest) (*LoadImageResponse, error) {
	if req == nil {
		return nil, errors.New("sandbox: nil LoadImageRequest")
	}
	r, err := c.c.LoadImage(ctx, &pb.LoadImageRequest{Image: req.Image, Layout: req.Layout, CheckOnly: req.CheckOnly})
	if status.Code(err) == codes.Unimplemented {
		return nil, fmt.Errorf("sandbox plugin: load image: %w", ErrNoImageLoad)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox plugin: load image: %w", err)
	}
	if r.GetPresent() && !validImageID(r.GetImageId()) {
		return nil, fmt.Errorf("sandbox plugin: load image: image ID %q is not sha256:<64 hex digits>", r.GetImageId())
	}
	return &LoadImageResponse{Present: r.GetPresent(), ImageID: r.GetImageId(), Detail: r.GetDetail()}, nil
}

func validImageID(id string) bool {
	h, ok := strings.CutPrefix(id, "sha256:")
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// Run runs req in the plugin and returns once the plugin has reported the
// exit. Stdout and Stderr are written from the calling goroutine only; Stdin
// is read by one other goroutine. Like exec.Cmd, Run does not wait for a
// Stdin Read that blocks past the end of the run: that goroutine sends
// nothing more and exits as soon as the Read returns.
//
// When ctx is done the stream is cancelled (the plugin's ctx is cancelled
// too) and Run returns an error wrapping context.Cause(ctx). An error reading
// Stdin cancels the run and is returned. An error writing Stdout/Stderr
// stops the run (the backend kills the process and cleans up) and Run
// returns that error together with the backend's RunResponse, so the caller
// still learns whether cleanup was verified; if the backend answered the
// stop with an error, the response is nil.
func (c *Client) Run(ctx context.Context, req *RunRequest) (*RunResponse, error) {
	if req == nil {
		return nil, errors.New("sandbox: nil RunRequest")
	}
	spec, err := specToProto(&req.Spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	stream, err := c.c.Run(ctx)
	if err != nil {
		return nil, runError(ctx, err)
	}
	// io.EOF from Send means the plugin ended the stream; Recv says why.
	if err := stream.Send(&pb.RunInput{Msg: &pb.RunInput_Spec{Spec: spec}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, runError(ctx, err)
	}
	snd := &sender{stream: stream}
	go sendStdin(ctx, snd, req.Stdin, cancel)

	stdout, stderr := req.Stdout, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var (
		exit     *pb.RunExit
		writeErr error // the caller's writer failed: the run was stopped
	)
	for {
		out, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if writeErr != nil {
				// The backend answered the stop with an error: no proof.
				return nil, fmt.Errorf("%w; the stopped run then failed: %w", writeErr, runError(ctx, err))
			}
			return nil, runError(ctx, err)
		}
		var w io.Writer
		var data []byte
		switch m := out.GetMsg().(type) {
		case *pb.RunOutput_Stdout:
			w, data = stdout, m.Stdout
		case *pb.RunOutput_Stderr:
			w, data = stderr, m.Stderr
		case *pb.RunOutput_Exit:
			if exit != nil {
				return nil, fmt.Errorf("%w: a second exit message", ErrProtocol)
			}
			exit = m.Exit
			continue
		default:
			return nil, fmt.Errorf("%w: an empty RunOutput", ErrProtocol)
		}
		if exit != nil {
			return nil, fmt.Errorf("%w: output after the exit message", ErrProtocol)
		}
		if writeErr != nil {
			continue // stopped: drain until the exit message
		}
		if _, err := w.Write(data); err != nil {
			// Stop the run but keep the stream: the backend kills the
			// process, cleans up and still reports whether it proved that.
			writeErr = fmt.Errorf("sandbox: writing output: %w", err)
			if serr := snd.send(&pb.RunInput{Msg: &pb.RunInput_Stop{Stop: true}}); serr != nil && !errors.Is(serr, io.EOF) {
				cancel(writeErr)
				return nil, writeErr
			}
		}
	}
	if exit == nil {
		return nil, fmt.Errorf("%w: the stream ended without an exit message", ErrProtocol)
	}
	if exit.GetError() != "" {
		return nil, fmt.Errorf("sandbox plugin: run: %s", exit.GetError())
	}
	resp := &RunResponse{
		ExitCode:        int(exit.GetExitCode()),
		TimedOut:        exit.GetTimedOut(),
		Killed:          exit.GetKilled(),
		CleanupVerified: exit.GetCleanupVerified(),
		OOMKilled:       exit.GetOomKilled(),
	}
	// After a failed write the response still tells whether the stopped
	// run was cleaned up; the error says why it was stopped.
	return resp, writeErr
}

// sender serialises Send on the client stream: the stdin goroutine and the
// receive loop (stop) both send.
type sender struct {
	mu     sync.Mutex
	stream grpc.BidiStreamingClient[pb.RunInput, pb.RunOutput]
}

func (s *sender) send(m *pb.RunInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(m)
}

// runError prefers the reason the run's context ended (the caller's
// cancellation or deadline, a stdin read error) over the gRPC status it
// caused.
func runError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox plugin: run: %w", context.Cause(ctx))
	}
	// The plugin's copy of our deadline can fire a moment before ours.
	if _, ok := ctx.Deadline(); ok && status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("sandbox plugin: run: %w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("sandbox plugin: run: %w", err)
}

// sendStdin copies r to the stream in chunks, then sends close_stdin and
// half-closes. It is the only goroutine that sends after the spec.
func sendStdin(ctx context.Context, stream *sender, r io.Reader, abort context.CancelCauseFunc) {
	// No CloseSend after close_stdin: the stream stays open for stop.
	closeStdin := func() {
		_ = stream.send(&pb.RunInput{Msg: &pb.RunInput_CloseStdin{CloseStdin: true}})
	}
	if r == nil {
		closeStdin()
		return
	}
	for {
		buf := make([]byte, ChunkSize)
		n, err := r.Read(buf)
		if ctx.Err() != nil {
			return // the run is over or cancelled
		}
		if n > 0 {
			if stream.send(&pb.RunInput{Msg: &pb.RunInput_Stdin{Stdin: buf[:n]}}) != nil {
				return // the stream ended; Recv reports why
			}
		}
		if errors.Is(err, io.EOF) {
			closeStdin()
			return
		}
		if err != nil {
			abort(fmt.Errorf("sandbox: reading stdin: %w", err))
			return
		}
	}
}
