// Package egress is the plugin contract of the sealed-egress proxy
// (specs/egress.md): the CONNECT proxy that is the only way out of a
// sandbox whose lockfile entry seals `mcp_allowed_domains`.
//
// The proxy runs in a plugin process of its own (kind egress, the bundled
// agentnode-egress-proxy), so the bytes sandboxed code sends are parsed
// there and never inside agentnode, which holds the audit log and the
// plugin credentials. agentnode starts one such process per MCP server
// session and opens one Session stream on it:
//
//   - the host sends the sealed allowlist and a socket directory (Start);
//   - the plugin starts a proxy, answers with its socket path, and then
//     reports every connection as an Event, waiting for the host's
//     acknowledgement of each before it goes on (a decision is written to
//     the audit log before the destination is contacted; an event the host
//     refuses or cannot record refuses the connection);
//   - the host closes the session (Close), the plugin closes the proxy and
//     reports whether it verified the teardown.
//
// The plugin never sees the audit log: agentnode writes the records.
// ValidateDomains, the allowlist's syntax, is shared by both sides.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// SocketName is the name of the socket inside the proxy's directory.
const SocketName = "proxy.sock"

// DirPrefix starts the name of the private directory a proxy creates under
// StartRequest.SocketDir.
const DirPrefix = "egress-"

// Decision is what an Event records.
type Decision string

// Decisions. Every connection yields exactly one Allow or Deny before any
// byte reaches a destination; an allowed one yields Closed when it ends.
const (
	Allow  Decision = "allow"
	Deny   Decision = "deny"
	Closed Decision = "closed"
)

// Event is one connection event of the proxy. It never carries payload or
// headers.
type Event struct {
	Time     time.Time
	Decision Decision
	// Host is the requested host: lower-cased when the target parsed,
	// otherwise the raw request host cut to 255 printable bytes ("" when no
	// request was read).
	Host string
	// Port is the requested port, 0 when none parsed.
	Port int
	// Addr is, on Allow, the first checked address (the one tried first);
	// on Closed, the address actually connected (invalid if none
	// answered); on a Deny for a non-public address, that address; invalid
	// otherwise.
	Addr netip.Addr
	// Reason says why, in words; on Closed how the tunnel ended (or why
	// no destination address could be connected).
	Reason string
	// BytesOut (to the destination) and BytesIn (from it) are set on Closed.
	BytesOut, BytesIn int64
	// Duration is the tunnel's lifetime, set on Closed.
	Duration time.Duration
}

// StartRequest starts one proxy.
type StartRequest struct {
	// Allowed is the sealed allowlist; it must pass ValidateDomains.
	Allowed []string
	// SocketDir is an existing absolute directory in which the proxy
	// creates a fresh 0700 directory (DirPrefix…) for its socket.
	SocketDir string
	// TestHosts ("name=addr,…") and TestPermit ("prefix,…") are test-only
	// destinations. Only a plugin built with the egresstest tag honours
	// them; any other build must refuse a request that sets them.
	TestHosts, TestPermit string
}

// Proxy is implemented by egress proxy plugins.
type Proxy interface {
	// Start starts one proxy. audit must be called for every Event, one
	// call at a time, and its error must refuse the connection the event
	// was about. When ctx ends the proxy must tear itself down.
	Start(ctx context.Context, req *StartRequest, audit func(Event) error) (Instance, error)
}

// Instance is one running proxy.
type Instance interface {
	// SocketPath is the unix socket to bind-mount into the sandbox.
	SocketPath() string
	// Close stops the proxy, ends every connection and removes the socket
	// and its directory. It returns nil only when it verified all of that.
	Close() error
}

// GRPCPlugin adapts a Proxy to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Proxy
	Info plugin.Info
}

// GRPCServer registers the EgressProxy service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterEgressProxyServer(s, &server{InfoService: plugin.NewInfoService(plugin.KindEgress, p.Info), impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// Serve runs impl as an egress proxy plugin process. See plugin.Serve.
func Serve(info plugin.Info, impl Proxy) {
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindEgress, Plugin: &GRPCPlugin{Impl: impl, Info: info}})
}

type server struct {
	plugin.InfoService
	unimplemented
	impl Proxy
}

// unimplemented keeps the generated defaults one level below
// plugin.InfoService, whose Info answers.
type unimplemented struct {
	pb.UnimplementedEgressProxyServer
}

// Session runs one proxy for the stream's lifetime.
func (s *server) Session(stream grpc.BidiStreamingServer[pb.EgressFromHost, pb.EgressToHost]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errors.New("egress session: the first message is not start")
	}
	ss := &serverSession{stream: stream, ctx: ctx, acks: make(chan *pb.EgressAck, 1)}
	inst, err := s.impl.Start(ctx, &StartRequest{
		Allowed: start.GetAllowedDomains(), SocketDir: start.GetSocketDir(),
		TestHosts: start.GetTestHosts(), TestPermit: start.GetTestPermit(),
	}, ss.audit)
	if err != nil {
		return err
	}
	closeOnce := sync.OnceValue(inst.Close)
	defer closeOnce()
	defer ss.finish()
	if err := ss.send(&pb.EgressToHost{Msg: &pb.EgressToHost_Started{Started: &pb.EgressStarted{SocketPath: inst.SocketPath()}}}); err != nil {
		return err
	}
	// Messages are read in their own goroutine so that acks keep flowing
	// while Close runs: the connections it waits for may be waiting for
	// an ack.
	msgs, recvErr := make(chan *pb.EgressFromHost), make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	var closed chan error // set once close is asked for
	for {
		select {
		case err := <-recvErr:
			cancel() // fails a pending audit; the deferred Close tears down
			return err
		case m := <-msgs:
			switch {
			case m.GetAck() != nil:
				select {
				case ss.acks <- m.GetAck():
				default:
					return errors.New("egress session: an ack nobody waits for")
				}
			case m.GetClose() != nil:
				if closed == nil {
					closed = make(chan error, 1)
					go func() { closed <- closeOnce() }()
				}
			default:
				return errors.New("egress session: unexpected message")
			}
		case err := <-closed:
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			return ss.send(&pb.EgressToHost{Msg: &pb.EgressToHost_Closed{Closed: &pb.EgressClosed{TeardownError: msg}}})
		}
	}
}

// serverSession is the plugin side of one Session stream.
type serverSession struct {
	stream grpc.BidiStreamingServer[pb.EgressFromHost, pb.EgressToHost]
	ctx    context.Context
	sendMu sync.Mutex
	ended  bool // the handler returned: the stream may not be used
	// auditMu makes audit calls one at a time whatever the Proxy does.
	auditMu sync.Mutex
	seq     uint64
	acks    chan *pb.EgressAck
}

func (s *serverSession) send(m *pb.EgressToHost) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.ended {
		return errors.New("the session has ended")
	}
	return s.stream.Send(m)
}

// finish marks the end of the handler: a connection goroutine a failed
// teardown left behind cannot send on the stream any more.
func (s *serverSession) finish() {
	s.sendMu.Lock()
	s.ended = true
	s.sendMu.Unlock()
}

// audit sends e and waits for the host's ack.
func (s *serverSession) audit(e Event) error {
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	s.seq++
	if err := s.send(&pb.EgressToHost{Msg: &pb.EgressToHost_Event{Event: eventToProto(s.seq, e)}}); err != nil {
		return fmt.Errorf("report to agentnode: %w", err)
	}
	select {
	case a := <-s.acks:
		if a.GetSeq() != s.seq {
			return fmt.Errorf("agentnode acknowledged event %d, want %d", a.GetSeq(), s.seq)
		}
		if a.GetError() != "" {
			return errors.New(a.GetError())
		}
		return nil
	case <-s.ctx.Done():
		return fmt.Errorf("agentnode gone: %w", s.ctx.Err())
	}
}

func eventToProto(seq uint64, e Event) *pb.EgressEvent {
	m := &pb.EgressEvent{
		Seq: seq, Decision: string(e.Decision), Host: e.Host, Port: uint32(e.Port), Reason: e.Reason,
		BytesOut: e.BytesOut, BytesIn: e.BytesIn, DurationNanos: int64(e.Duration),
	}
	if !e.Time.IsZero() {
		m.TimeUnixNano = e.Time.UnixNano()
	}
	if e.Addr.IsValid() {
		m.Addr = e.Addr.String()
	}
	return m
}

func eventFromProto(m *pb.EgressEvent) (Event, error) {
	e := Event{
		Decision: Decision(m.GetDecision()), Host: m.GetHost(), Port: int(m.GetPort()), Reason: m.GetReason(),
		BytesOut: m.GetBytesOut(), BytesIn: m.GetBytesIn(), Duration: time.Duration(m.GetDurationNanos()),
	}
	if t := m.GetTimeUnixNano(); t != 0 {
		e.Time = time.Unix(0, t)
	}
	switch e.Decision {
	case Allow, Deny, Closed:
	default:
		return Event{}, fmt.Errorf("unknown decision %.32q", m.GetDecision())
	}
	if m.GetPort() > 65535 {
		return Event{}, fmt.Errorf("port %d", m.GetPort())
	}
	if a := m.GetAddr(); a != "" {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return Event{}, fmt.Errorf("address %.64q: %w", a, err)
		}
		e.Addr = addr
	}
	return e, nil
}

// Client is the host side of an egress proxy plugin.
type Client struct {
	plugin.InfoClient // Info asks the plugin to describe itself.
	c                 pb.EgressProxyClient
}

// NewClient wraps a gRPC connection to an EgressProxy service.
func NewClient(cc grpc.ClientConnInterface) *Client {
	return newClient(pb.NewEgressProxyClient(cc))
}

func newClient(c pb.EgressProxyClient) *Client {
	return &Client{InfoClient: plugin.NewInfoClient(plugin.KindEgress, c), c: c}
}

// Session is the host side of one running proxy.
type Session struct {
	stream grpc.BidiStreamingClient[pb.EgressFromHost, pb.EgressToHost]
	cancel context.CancelFunc
	sock   string
	audit  func(Event) error

	sendMu sync.Mutex
	done   chan struct{} // closed when the stream has ended
	// Set before done is closed: the plugin's closed message, or why the
	// stream ended without one.
	closed      bool
	teardownErr string
	streamErr   error
}

// Start opens a session: it starts a proxy in the plugin and returns once
// the plugin listens, or fails; ctx bounds only that wait. audit receives
// every Event, one call at a time, before the plugin goes on; its error is
// sent back and refuses the connection. The session lives until Close, or
// until the connection to the plugin breaks (then the plugin tears the
// proxy down).
func (c *Client) Start(ctx context.Context, req *StartRequest, audit func(Event) error) (*Session, error) {
	if audit == nil {
		return nil, errors.New("egress: Start needs an audit function")
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	startWait := context.AfterFunc(ctx, cancel)
	stream, err := c.c.Session(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("egress plugin: %w", err)
	}
	s := &Session{stream: stream, cancel: cancel, audit: audit, done: make(chan struct{})}
	if err := s.send(&pb.EgressFromHost{Msg: &pb.EgressFromHost_Start{Start: &pb.EgressStart{
		AllowedDomains: req.Allowed, SocketDir: req.SocketDir, TestHosts: req.TestHosts, TestPermit: req.TestPermit,
	}}}); err != nil {
		cancel()
		return nil, fmt.Errorf("egress plugin: start: %w", err)
	}
	m, err := stream.Recv()
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("egress plugin: start: %w", err)
	}
	st := m.GetStarted()
	if st == nil || st.GetSocketPath() == "" {
		cancel()
		return nil, errors.New("egress plugin: start: no socket path in the answer")
	}
	if !startWait() {
		cancel()
		return nil, fmt.Errorf("egress plugin: start: %w", ctx.Err())
	}
	s.sock = st.GetSocketPath()
	if err := checkSocketPath(req.SocketDir, s.sock); err != nil {
		cancel()
		return nil, fmt.Errorf("egress plugin: %w", err)
	}
	go s.loop()
	return s, nil
}

// checkSocketPath checks that the plugin's socket is SocketName in a
// DirPrefix directory right under dir, so that what the host mounts and
// cleans up is where it asked for it.
func checkSocketPath(dir, sock string) error {
	d := filepath.Dir(sock)
	if !filepath.IsAbs(sock) || filepath.Clean(sock) != sock || filepath.Base(sock) != SocketName ||
		filepath.Dir(d) != filepath.Clean(dir) || len(filepath.Base(d)) <= len(DirPrefix) || filepath.Base(d)[:len(DirPrefix)] != DirPrefix {
		return fmt.Errorf("socket %.200q is not %s in a %s directory under %s", sock, SocketName, DirPrefix, dir)
	}
	return nil
}

func (s *Session) send(m *pb.EgressFromHost) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(m)
}

// loop delivers events to audit and acknowledges them, until the plugin's
// closed message or the end of the stream.
func (s *Session) loop() {
	defer close(s.done)
	defer s.cancel()
	for {
		m, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the plugin ended the session without closing the proxy")
			}
			s.streamErr = err
			return
		}
		switch {
		case m.GetEvent() != nil:
			ev := m.GetEvent()
			msg := ""
			e, err := eventFromProto(ev)
			if err == nil {
				err = s.audit(e)
			} else {
				err = fmt.Errorf("malformed event: %w", err)
			}
			if err != nil {
				msg = err.Error()
			}
			if err := s.send(&pb.EgressFromHost{Msg: &pb.EgressFromHost_Ack{Ack: &pb.EgressAck{Seq: ev.GetSeq(), Error: msg}}}); err != nil {
				s.streamErr = fmt.Errorf("acknowledge an event: %w", err)
				return
			}
		case m.GetClosed() != nil:
			s.closed, s.teardownErr = true, m.GetClosed().GetTeardownError()
			return
		default:
			s.streamErr = errors.New("unexpected message from the plugin")
			return
		}
	}
}

// SocketPath is the proxy's unix socket, to bind-mount into the sandbox.
func (s *Session) SocketPath() string { return s.sock }

// Done is closed when the session has ended: closed, or broken (the plugin
// died, or broke the protocol). Before Close it means the proxy is gone.
func (s *Session) Done() <-chan struct{} { return s.done }

// Close asks the plugin to close the proxy and waits, at most until ctx
// ends, for its answer. It returns nil only when the plugin reported a
// verified teardown; a broken session, a teardown the plugin could not
// verify and a missed deadline are errors. The stream is cancelled in any
// case.
func (s *Session) Close(ctx context.Context) error {
	defer s.cancel()
	select {
	case <-s.done:
	default:
		if err := s.send(&pb.EgressFromHost{Msg: &pb.EgressFromHost_Close{Close: &pb.EgressClose{}}}); err != nil {
			// The loop sees the broken stream too.
			s.cancel()
		}
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return fmt.Errorf("egress plugin: no answer to close: %w", ctx.Err())
	}
	switch {
	case s.closed && s.teardownErr == "":
		return nil
	case s.closed:
		return fmt.Errorf("egress plugin: %s", s.teardownErr)
	default:
		return fmt.Errorf("egress plugin: session broken: %w", s.streamErr)
	}
}
