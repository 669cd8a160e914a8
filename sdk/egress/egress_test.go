package egress_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/egress"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
)

// fakeProxy is an egress.Proxy that reports the events it is told to and
// keeps what the host answered.
type fakeProxy struct {
	sock      func(dir string) string // the socket path it reports
	closeErr  error
	mu        sync.Mutex
	req       *egress.StartRequest
	audit     func(egress.Event) error
	closed    bool
	ctxEnded  chan struct{}
	closeWait chan struct{} // Close blocks until it is closed, if set
	hang      chan struct{} // if set, Start closes it and hangs until its ctx ends
}

func (f *fakeProxy) Start(ctx context.Context, req *egress.StartRequest, audit func(egress.Event) error) (egress.Instance, error) {
	if req.TestHosts != "" {
		return nil, errors.New("no test destinations here")
	}
	if f.hang != nil {
		close(f.hang)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	f.req, f.audit = req, audit
	f.mu.Unlock()
	context.AfterFunc(ctx, func() { close(f.ctxEnded) })
	return &fakeInstance{f: f, sock: f.sock(req.SocketDir)}, nil
}

type fakeInstance struct {
	f    *fakeProxy
	sock string
}

func (i *fakeInstance) SocketPath() string { return i.sock }
func (i *fakeInstance) Close() error {
	if i.f.closeWait != nil {
		<-i.f.closeWait
	}
	i.f.mu.Lock()
	i.f.closed = true
	i.f.mu.Unlock()
	return i.f.closeErr
}

func goodSock(dir string) string {
	return filepath.Join(dir, egress.DirPrefix+"123", egress.SocketName)
}

func connect(t *testing.T, impl egress.Proxy) *egress.Client {
	c, _ := connectConn(t, impl)
	return c
}

// connectConn is connect that also returns the connection, to break it.
func connectConn(t *testing.T, impl egress.Proxy) (*egress.Client, *goplugin.GRPCClient) {
	t.Helper()
	return plugintest.Connect[*egress.Client](t, plugin.KindEgress, &egress.GRPCPlugin{Impl: impl, Info: plugin.Info{Name: "fake", Version: "1"}})
}

// Events cross to the host in order, each waits for the host's answer, a
// refusal comes back as the plugin's audit error, and Close reports the
// plugin's verified teardown.
func TestSessionRoundTrip(t *testing.T) {
	f := &fakeProxy{sock: goodSock, ctxEnded: make(chan struct{})}
	c := connect(t, f)
	if info, err := c.Info(context.Background()); err != nil || info.Kind != plugin.KindEgress || info.Name != "fake" {
		t.Fatalf("info %+v, %v", info, err)
	}
	var got []egress.Event
	host := func(e egress.Event) error {
		got = append(got, e)
		if e.Host == "refused.example" {
			return errors.New("disk full")
		}
		return nil
	}
	dir := t.TempDir()
	s, err := c.Start(context.Background(), &egress.StartRequest{Allowed: []string{"example.com"}, SocketDir: dir}, host)
	if err != nil {
		t.Fatal(err)
	}
	if s.SocketPath() != goodSock(dir) || f.req.SocketDir != dir || len(f.req.Allowed) != 1 || f.req.Allowed[0] != "example.com" {
		t.Fatalf("socket %q, request %+v", s.SocketPath(), f.req)
	}
	allow := egress.Event{Time: time.Unix(5, 0), Decision: egress.Allow, Host: "example.com", Port: 443, Addr: netip.MustParseAddr("93.184.215.14"), Reason: "ok"}
	if err := f.audit(allow); err != nil {
		t.Fatalf("allow: %v", err)
	}
	closed := egress.Event{Decision: egress.Closed, Host: "example.com", Port: 443, BytesOut: 7, BytesIn: 9, Duration: time.Second}
	if err := f.audit(closed); err != nil {
		t.Fatalf("closed: %v", err)
	}
	if err := f.audit(egress.Event{Decision: egress.Deny, Host: "refused.example", Port: 443}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a record the host could not write: %v", err)
	}
	if err := f.audit(egress.Event{Decision: "maybe"}); err == nil || !strings.Contains(err.Error(), "unknown decision") {
		t.Fatalf("a malformed event: %v", err)
	}
	if len(got) != 3 || !got[0].Time.Equal(allow.Time) || got[0].Addr != allow.Addr || got[0].Decision != egress.Allow ||
		got[1].BytesIn != 9 || got[1].BytesOut != 7 || got[1].Duration != time.Second {
		t.Fatalf("host saw %+v", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !f.closed {
		t.Fatal("the plugin's instance was not closed")
	}
	<-s.Done()
}

// Events keep flowing while the plugin's Close runs (its connections may
// still report), and a teardown the plugin could not verify is an error.
func TestSessionCloseUnverified(t *testing.T) {
	f := &fakeProxy{sock: goodSock, ctxEnded: make(chan struct{}), closeErr: errors.New("1 connection still live"), closeWait: make(chan struct{})}
	c := connect(t, f)
	var n int
	s, err := c.Start(context.Background(), &egress.StartRequest{SocketDir: t.TempDir()}, func(egress.Event) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- s.Close(context.Background()) }()
	// Close is under way (blocked in the plugin); an event still gets
	// its answer.
	if err := f.audit(egress.Event{Decision: egress.Closed, Host: "example.com", Port: 443, Reason: "proxy closed"}); err != nil {
		t.Fatalf("event during close: %v", err)
	}
	close(f.closeWait)
	if err := <-res; err == nil || !strings.Contains(err.Error(), "1 connection still live") {
		t.Fatalf("close: %v", err)
	}
	if n != 1 {
		t.Fatalf("%d events", n)
	}
}

// The host refuses a socket that is not where it asked for it.
func TestStartRefusesForeignSocket(t *testing.T) {
	for _, sock := range []func(string) string{
		func(string) string { return "/etc/passwd" },
		func(d string) string { return filepath.Join(d, "other", egress.SocketName) },
		func(d string) string { return filepath.Join(d, egress.DirPrefix+"1", "x.sock") },
		func(d string) string {
			return d + "/" + egress.DirPrefix + "1/../" + egress.DirPrefix + "2/" + egress.SocketName
		},
		func(d string) string { return filepath.Join(filepath.Dir(d), egress.DirPrefix+"1", egress.SocketName) },
		func(d string) string { return filepath.Join(d, egress.DirPrefix, egress.SocketName) },
	} {
		f := &fakeProxy{sock: sock, ctxEnded: make(chan struct{})}
		c := connect(t, f)
		dir := t.TempDir()
		s, err := c.Start(context.Background(), &egress.StartRequest{SocketDir: dir}, func(egress.Event) error { return nil })
		if err == nil {
			t.Errorf("socket %q accepted", sock(dir))
			_ = s.Close(context.Background())
			continue
		}
		<-f.ctxEnded // the plugin's session ended with the refusal
	}
}

// A start the plugin refuses is an error of Start; the context of Start
// bounds only the start; a broken connection to the host ends the plugin's
// session (and so its proxy) and fails its events.
func TestStartErrorsAndHostGone(t *testing.T) {
	f := &fakeProxy{sock: goodSock, ctxEnded: make(chan struct{})}
	c, conn := connectConn(t, f)
	if _, err := c.Start(context.Background(), &egress.StartRequest{SocketDir: t.TempDir(), TestHosts: "a=1.2.3.4"}, func(egress.Event) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "no test destinations") {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Start(ctx, &egress.StartRequest{SocketDir: t.TempDir()}, func(egress.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := f.audit(egress.Event{Decision: egress.Allow, Host: "example.com", Port: 443}); err != nil {
		t.Fatalf("the session ended with the start's context: %v", err)
	}
	_ = conn.Close()
	<-f.ctxEnded
	<-s.Done()
	if err := f.audit(egress.Event{Decision: egress.Allow, Host: "example.com", Port: 443}); err == nil {
		t.Fatal("an event was accepted after the host went away")
	}
	if err := s.Close(context.Background()); err == nil {
		t.Fatal("close of a broken session reported a verified teardown")
	}
}

// A plugin that never answers the start holds the host up only as long as
// the context of Start.
func TestStartBoundedByContext(t *testing.T) {
	f := &fakeProxy{sock: goodSock, ctxEnded: make(chan struct{}), hang: make(chan struct{})}
	c := connect(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-f.hang // the plugin is in Start
		cancel()
	}()
	_, err := c.Start(ctx, &egress.StartRequest{SocketDir: t.TempDir()}, func(egress.Event) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start: %v", err)
	}
}
