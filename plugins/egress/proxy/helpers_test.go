package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is the Audit callback of the tests.
type recorder struct {
	mu     sync.Mutex
	events []Event
	fail   func(Event) error
}

func (r *recorder) audit(e Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(e); err != nil {
			return err
		}
	}
	r.events = append(r.events, e)
	return nil
}

// wait returns the events once there are at least n.
func (r *recorder) wait(t testing.TB, n int) []Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		ev := append([]Event(nil), r.events...)
		r.mu.Unlock()
		if len(ev) >= n {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit events after 5s, want %d: %+v", len(ev), n, ev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mapResolver answers from a table; a name with several answers gets the next
// one on each call (a rebinding DNS server).
type mapResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(m map[string][]string) *mapResolver {
	r := &mapResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, as := range m {
		r.add(name, as...)
	}
	return r
}

// add appends one answer for name.
func (r *mapResolver) add(name string, addrs ...string) {
	var ans []netip.Addr
	for _, a := range addrs {
		ans = append(ans, netip.MustParseAddr(a))
	}
	r.mu.Lock()
	r.answers[name] = append(r.answers[name], ans)
	r.mu.Unlock()
}

func (r *mapResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if network != "ip" {
		return nil, fmt.Errorf("network %q", network)
	}
	n := r.calls[host]
	r.calls[host]++
	ans := r.answers[host]
	if len(ans) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if n >= len(ans) {
		n = len(ans) - 1
	}
	return ans[n], nil
}

func (r *mapResolver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

func (r *mapResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// redirectDialer records the address the proxy dials and connects to a real
// local server instead: the proxy's checks run on the public address the
// test resolver gave, the bytes flow over real TCP.
type redirectDialer struct {
	mu    sync.Mutex
	to    string // "" = refuse every dial
	dials []string
}

func (d *redirectDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	to := d.to
	d.mu.Unlock()
	if to == "" {
		return nil, errors.New("test dialer: no destination")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

func (d *redirectDialer) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// echoServer answers each connection by echoing what it reads.
func echoServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// shortTempDir is a directory short enough for a unix socket path.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "eg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startProxy starts a proxy allowing example.com with cfg's other fields,
// and closes it (requiring a verified teardown) at the end of the test.
func startProxy(t testing.TB, cfg Config) (*Proxy, *recorder) {
	t.Helper()
	rec := &recorder{}
	if cfg.Allowed == nil {
		cfg.Allowed = []string{"example.com"}
	}
	if cfg.SocketDir == "" {
		cfg.SocketDir = shortTempDir(t)
	}
	cfg.Audit = rec.audit
	if cfg.Resolver == nil {
		cfg.Resolver = newResolver(nil)
	}
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p, rec
}

// exchange sends raw on a new connection and returns the response and the
// connection's reader (for tunnel bytes after a 200).
func exchange(t testing.TB, p *Proxy, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", p.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// A write error is no failure: the proxy may refuse (and close) before
	// reading everything; its answer is still there to read.
	io.WriteString(c, raw)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("reading the response to %q: %v", raw, err)
	}
	return resp, c, br
}

func body(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

func connect(target string) string {
	return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
}
