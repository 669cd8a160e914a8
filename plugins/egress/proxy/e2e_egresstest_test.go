//go:build egresstest

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// listen443 listens on port 443 of a random 127/8 address (port 443 holds
// in egresstest builds too; all of 127/8 is loopback on Linux, so parallel
// tests do not collide). It needs root or CAP_NET_BIND_SERVICE.
func listen443(t testing.TB) (net.Listener, netip.Addr) {
	t.Helper()
	for i := 0; i < 20; i++ {
		ip := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 443).String())
		if err == nil {
			return ln, ip
		}
		if errors.Is(err, syscall.EACCES) {
			if os.Geteuid() == 0 || os.Getenv("AGENTNODE_REQUIRE_LIBCONTAINER") == "1" {
				t.Fatalf("cannot bind port 443: %v", err) // CI runs as root: never a silent skip
			}
			t.Skipf("cannot bind port 443 (needs root): %v", err)
		}
	}
	t.Fatal("no free 127/8 address for port 443")
	return nil, netip.Addr{}
}

// permit lets ip through the public check for the test.
func permit(t testing.TB, ip netip.Addr) {
	undo := PermitForTest(netip.PrefixFrom(ip, 32))
	t.Cleanup(undo)
}

// proxyClient is an HTTPS client whose only way out is p, as a sandboxed
// tool's with HTTPS_PROXY set.
func proxyClient(p *Proxy, base *http.Transport) *http.Client {
	tr := base.Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "egress-proxy.invalid"})
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", p.SocketPath())
	}
	return &http.Client{Transport: tr}
}

// An allowlisted fetch works end to end (real TLS on a real port 443, real
// net.Dialer), and the refusals still hold in an egresstest build: another
// host, another port, an IP literal, a non-permitted private address.
func TestE2EAllowlistedFetch(t *testing.T) {
	ln, ip := listen443(t)
	permit(t, ip)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	srv.Listener = ln
	srv.StartTLS() // its certificate names example.com
	defer srv.Close()

	res := newResolver(map[string][]string{
		"example.com":         {ip.String()},
		"other.example.org":   {ip.String()},
		"private.example.com": {"127.0.0.1"},
	})
	p, rec := startProxy(t, Config{Allowed: []string{"example.com", "private.example.com"}, Resolver: res})
	client := proxyClient(p, srv.Client().Transport.(*http.Transport))

	resp, err := client.Get("https://example.com/x")
	if err != nil {
		t.Fatalf("allowlisted fetch: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello /x" {
		t.Fatalf("allowlisted fetch: %d %q", resp.StatusCode, b)
	}
	client.CloseIdleConnections()
	ev := rec.wait(t, 2)
	if ev[0].Decision != Allow || ev[0].Addr != ip || ev[1].Decision != Closed || ev[1].Addr != ip || ev[1].BytesIn == 0 || ev[1].BytesOut == 0 {
		t.Errorf("events %+v", ev)
	}

	for _, tc := range []struct{ url, reason string }{
		{"https://other.example.org/", "not in the allowlist"},
		{"https://example.com:8443/", "port 8443 refused"},
		{"https://" + ip.String() + "/", "IP literal"},
		{"https://private.example.com/", "127.0.0.1 is not public: loopback"},
	} {
		n := len(rec.wait(t, 0))
		resp, err := client.Get(tc.url)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: fetched (%d)", tc.url, resp.StatusCode)
			continue
		}
		ev := rec.wait(t, n+1)
		if e := ev[n]; e.Decision != Deny || !strings.Contains(e.Reason, tc.reason) {
			t.Errorf("%s: event %+v, want deny %q", tc.url, e, tc.reason)
		}
	}
}

// The permit is exactly what the test added.
func TestPermitForTestIsNarrow(t *testing.T) {
	ip := netip.MustParseAddr("127.9.9.9")
	undo := PermitForTest(netip.PrefixFrom(ip, 32))
	if _, err := checkPublic(ip); err != nil {
		t.Errorf("permitted %s refused: %v", ip, err)
	}
	for _, a := range []string{"127.0.0.1", "127.9.9.10", "10.0.0.1", "::1"} {
		if _, err := checkPublic(netip.MustParseAddr(a)); err == nil {
			t.Errorf("%s passes with only %s permitted", a, ip)
		}
	}
	undo()
	if _, err := checkPublic(ip); err == nil {
		t.Errorf("%s passes after undo", ip)
	}
}

// mibServer sends 1 MiB on each connection and closes it.
func mibServer(b *testing.B) netip.Addr {
	ln, ip := listen443(b)
	b.Cleanup(func() { ln.Close() })
	payload := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.Write(payload)
				c.Close()
			}()
		}
	}()
	return ip
}

// BenchmarkDirect1MiB is the raw thing the proxy wraps: a TCP connect and a
// 1 MiB read over loopback.
func BenchmarkDirect1MiB(b *testing.B) {
	ip := mibServer(b)
	b.SetBytes(1 << 20)
	for b.Loop() {
		c, err := net.Dial("tcp", netip.AddrPortFrom(ip, 443).String())
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, c); err != nil || n != 1<<20 {
			b.Fatal(n, err)
		}
		c.Close()
	}
}

// BenchmarkProxy1MiB is the same through the proxy: unix connect, CONNECT,
// resolve, checks, two audit events, dial, 1 MiB spliced.
func BenchmarkProxy1MiB(b *testing.B) {
	ip := mibServer(b)
	permit(b, ip)
	p, _ := startProxy(b, Config{Resolver: newResolver(map[string][]string{"example.com": {ip.String()}})})
	b.SetBytes(1 << 20)
	for b.Loop() {
		c, err := net.Dial("unix", p.SocketPath())
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, connect("example.com:443"))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		if n, err := io.Copy(io.Discard, br); err != nil || n != 1<<20 {
			b.Fatal(n, err)
		}
		c.Close()
	}
}
