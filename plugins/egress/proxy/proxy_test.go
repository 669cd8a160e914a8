package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const publicIP = "93.184.215.14"

// Every refusal from the attacker's side: the status the client sees, one
// deny event with egress_denied naming host and reason, and no resolution or
// dial where the request never got that far.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		status    int
		host      string // Event.Host
		port      int
		reason    string // part of Event.Reason
		resolves  bool   // the proxy got as far as resolving
		resolveTo []string
		badAddr   string // Event.Addr
	}{
		{name: "not allowlisted", raw: connect("evil.example.net:443"), status: 403, host: "evil.example.net", port: 443, reason: "not in the allowlist"},
		{name: "subdomain of allowed", raw: connect("www.example.com:443"), status: 403, host: "www.example.com", port: 443, reason: "not in the allowlist"},
		{name: "allowed as prefix", raw: connect("example.com.evil.net:443"), status: 403, host: "example.com.evil.net", port: 443, reason: "not in the allowlist"},
		{name: "allowed as suffix", raw: connect("evilexample.com:443"), status: 403, host: "evilexample.com", port: 443, reason: "not in the allowlist"},
		{name: "port 80", raw: connect("example.com:80"), status: 403, host: "example.com", port: 80, reason: "port 80 refused"},
		{name: "port 8443", raw: connect("example.com:8443"), status: 403, host: "example.com", port: 8443, reason: "port 8443 refused"},
		{name: "port 0443", raw: connect("example.com:0443"), status: 403, reason: "malformed port"},
		{name: "no port", raw: connect("example.com"), status: 403, reason: "no port"},
		{name: "IPv4 literal", raw: connect("93.184.215.14:443"), status: 403, host: "93.184.215.14", port: 443, reason: "IP literal"},
		{name: "IPv4 loopback literal", raw: connect("127.0.0.1:443"), status: 403, host: "127.0.0.1", port: 443, reason: "IP literal"},
		{name: "metadata literal", raw: connect("169.254.169.254:443"), status: 403, host: "169.254.169.254", port: 443, reason: "IP literal"},
		{name: "IPv6 bracketed", raw: connect("[2606:4700::1111]:443"), status: 403, reason: "IP literal"},
		{name: "IPv6 loopback bracketed", raw: connect("[::1]:443"), status: 403, reason: "IP literal"},
		{name: "IPv6 bare", raw: connect("::1:443"), status: 400, reason: "malformed request"},
		{name: "IPv4 short form", raw: connect("127.1:443"), status: 403, reason: "IP literal"},
		{name: "IPv4 decimal form", raw: connect("2130706433:443"), status: 403, reason: "single label"},
		{name: "userinfo", raw: connect("user@example.com:443"), status: 403, reason: "userinfo"},
		{name: "resolves to loopback", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "non-public address: 127.0.0.1 is not public: loopback", resolves: true, resolveTo: []string{"127.0.0.1"}, badAddr: "127.0.0.1"},
		{name: "resolves to RFC1918", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "private", resolves: true, resolveTo: []string{"10.1.2.3"}, badAddr: "10.1.2.3"},
		{name: "resolves to metadata", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "169.254.169.254", resolves: true, resolveTo: []string{"169.254.169.254"}, badAddr: "169.254.169.254"},
		{name: "resolves to mapped loopback", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "IPv4-mapped 127.0.0.1", resolves: true, resolveTo: []string{"::ffff:127.0.0.1"}, badAddr: "::ffff:127.0.0.1"},
		{name: "resolves to IPv6 loopback", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "loopback", resolves: true, resolveTo: []string{"::1"}, badAddr: "::1"},
		{name: "resolves to ULA", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "unique local", resolves: true, resolveTo: []string{"fd00::1"}, badAddr: "fd00::1"},
		{name: "mixed public and private", raw: connect("example.com:443"), status: 403, host: "example.com", port: 443,
			reason: "private", resolves: true, resolveTo: []string{publicIP, "2606:4700::1111", "192.168.1.1"}, badAddr: "192.168.1.1"},
		{name: "does not resolve", raw: connect("example.com:443"), status: 502, host: "example.com", port: 443,
			reason: "cannot resolve", resolves: true},
		{name: "GET absolute-form", raw: "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", status: 405,
			host: "example.com", reason: "method GET refused"},
		{name: "GET origin-form", raw: "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", status: 405, host: "example.com", reason: "method GET"},
		{name: "POST", raw: "POST https://example.com/x HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1\r\n\r\nx", status: 405, reason: "method POST"},
		{name: "lower-case connect", raw: "connect example.com:443 HTTP/1.1\r\n\r\n", status: 405, reason: "method connect"},
		{name: "HTTP/2 preface", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 405, reason: "method PRI"},
		{name: "CONNECT absolute-form", raw: connect("https://example.com:443/"), status: 403, reason: "authority-form"},
		{name: "CONNECT origin-form", raw: "CONNECT /x HTTP/1.1\r\n\r\n", status: 403, reason: "authority-form"},
		{name: "junk", raw: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", status: 400, reason: "malformed request"},
		{name: "CONNECT without target", raw: "CONNECT\r\n\r\n", status: 400, reason: "malformed request"},
		{name: "CONNECT without version", raw: "CONNECT example.com:443\r\n\r\n", status: 400, reason: "malformed request"},
		{name: "CONNECT HTTP/9", raw: "CONNECT example.com:443 HTTP/9.9\r\n\r\n", status: 400, reason: "protocol HTTP/9.9 refused"},
		{name: "CONNECT extra spaces", raw: "CONNECT  example.com:443 HTTP/1.1\r\n\r\n", status: 400, reason: "malformed"},
		{name: "smuggled body", raw: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nContent-Length: 5\r\n\r\nhello",
			status: 400, host: "example.com", port: 443, reason: "request body"},
		{name: "chunked body", raw: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			status: 400, host: "example.com", port: 443, reason: "request body"},
		{name: "CL and TE", raw: "CONNECT example.com:443 HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			status: 400, host: "example.com", reason: "request body"},
		{name: "Host names another host", raw: "CONNECT example.com:443 HTTP/1.1\r\nHost: evil.example.net:443\r\n\r\n",
			status: 502, host: "example.com", port: 443, reason: "cannot resolve", resolves: true},
		{name: "two Host headers", raw: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nHost: evil.example.net\r\n\r\n",
			status: 400, reason: "malformed request"},
		{name: "header injection in target", raw: "CONNECT example.com:443\rX: y HTTP/1.1\r\n\r\n", status: 400, reason: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(nil)
			if tc.resolveTo != nil {
				res.add("example.com", tc.resolveTo...)
			}
			dialer := &redirectDialer{to: echoServer(t)}
			p, rec := startProxy(t, Config{Resolver: res, Dialer: dialer})
			resp, _, _ := exchange(t, p, tc.raw)
			b := body(resp)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d (%s)", resp.StatusCode, tc.status, b)
			}
			if !strings.HasPrefix(b, "agentnode egress: refused:") {
				t.Errorf("body %q", b)
			}
			ev := rec.wait(t, 1)
			if len(ev) != 1 {
				t.Fatalf("%d events, want 1: %+v", len(ev), ev)
			}
			e := ev[0]
			if e.Decision != Deny {
				t.Errorf("event %+v, want deny", e)
			}
			if tc.host != "" && e.Host != tc.host {
				t.Errorf("event host %q, want %q", e.Host, tc.host)
			}
			if tc.port != 0 && e.Port != tc.port {
				t.Errorf("event port %d, want %d", e.Port, tc.port)
			}
			if !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("event reason %q, want it to contain %q", e.Reason, tc.reason)
			}
			if tc.badAddr != "" && e.Addr != netip.MustParseAddr(tc.badAddr) {
				t.Errorf("event addr %v, want %s", e.Addr, tc.badAddr)
			}
			if got := res.count("example.com"); tc.resolves != (got > 0) {
				t.Errorf("resolved example.com %d times, want resolves=%v", got, tc.resolves)
			}
			if n := res.total(); n != res.count("example.com") {
				t.Errorf("resolved names other than example.com: %v", res.calls)
			}
			if d := dialer.dialed(); len(d) != 0 {
				t.Errorf("dialled %v", d)
			}
		})
	}
}

// An allowlisted host resolving to a public address is tunnelled, to the
// checked address, and audited: allow before, closed with byte counts after.
func TestAllowedTunnel(t *testing.T) {
	res := newResolver(map[string][]string{"example.com": {publicIP}})
	dialer := &redirectDialer{to: echoServer(t)}
	p, rec := startProxy(t, Config{Resolver: res, Dialer: dialer})
	for i, target := range []string{"example.com:443", "EXAMPLE.com.:443"} {
		resp, c, br := exchange(t, p, connect(target))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d (%s)", target, resp.StatusCode, body(resp))
		}
		msg := "hello through the tunnel\n"
		io.WriteString(c, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v", got, err)
		}
		c.(*net.UnixConn).CloseWrite()
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Fatalf("after half-close: %q, %v", rest, err)
		}
		c.Close()
		rec.wait(t, 2*(i+1)) // closed is audited just after the client's EOF
	}
	ev := rec.wait(t, 4)
	for i := 0; i < 4; i += 2 {
		a, cl := ev[i], ev[i+1]
		if a.Decision != Allow || a.Host != "example.com" || a.Port != 443 || a.Addr.String() != publicIP {
			t.Errorf("allow event %+v", a)
		}
		if cl.Decision != Closed || cl.Host != "example.com" || cl.Addr.String() != publicIP || cl.BytesOut != 25 || cl.BytesIn != 25 {
			t.Errorf("closed event %+v", cl)
		}
	}
	for _, d := range dialer.dialed() {
		if d != publicIP+":443" {
			t.Errorf("dialled %q, want the checked address %s:443", d, publicIP)
		}
	}
}

// The name is resolved once per CONNECT and the checked address is dialled:
// a DNS server that answers public first and loopback next cannot get the
// proxy to connect to loopback, and a second CONNECT after the rebinding is
// refused.
func TestDNSRebindingCannotWin(t *testing.T) {
	res := newResolver(nil)
	res.add("example.com", publicIP)
	res.add("example.com", "127.0.0.1")
	dialer := &redirectDialer{to: echoServer(t)}
	p, rec := startProxy(t, Config{Resolver: res, Dialer: dialer})
	resp, _, _ := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := res.count("example.com"); n != 1 {
		t.Errorf("resolved %d times, want 1", n)
	}
	if d := dialer.dialed(); len(d) != 1 || d[0] != publicIP+":443" {
		t.Errorf("dialled %v, want only %s:443", d, publicIP)
	}
	resp, _, _ = exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 403 {
		t.Errorf("after rebinding: status %d, want 403", resp.StatusCode)
	}
	if d := dialer.dialed(); len(d) != 1 {
		t.Errorf("dialled %v after the rebinding", d)
	}
	ev := rec.wait(t, 2)
	if ev[0].Decision != Allow || ev[1].Decision != Deny || !strings.Contains(ev[1].Reason, "loopback") {
		t.Errorf("events %+v", ev)
	}
}

// Without the egresstest tag no address outside the public internet gets
// through, whatever the caller configures.
func TestLoopbackRefusedWithoutTag(t *testing.T) {
	if testPermitted(netip.MustParseAddr("127.0.0.1")) {
		t.Skip("egresstest build: permits exist by design")
	}
	for _, a := range []string{"127.0.0.1", "127.0.0.123", "::1", "10.0.0.1", "169.254.169.254"} {
		if _, err := checkPublic(netip.MustParseAddr(a)); err == nil {
			t.Errorf("%s passes the public check", a)
		}
	}
}

// A failing audit refuses the connection before the destination is contacted.
func TestAuditFailureRefuses(t *testing.T) {
	res := newResolver(map[string][]string{"example.com": {publicIP}})
	dialer := &redirectDialer{to: echoServer(t)}
	p, rec := startProxy(t, Config{Resolver: res, Dialer: dialer})
	rec.fail = func(e Event) error {
		if e.Decision == Allow {
			return errors.New("disk full")
		}
		return nil
	}
	resp, _, _ := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if d := dialer.dialed(); len(d) != 0 {
		t.Errorf("dialled %v with the audit failing", d)
	}
	if err := p.AuditErr(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("AuditErr() = %v", err)
	}
}

// A destination that does not answer: 502, allow then closed naming why.
func TestDialFailure(t *testing.T) {
	res := newResolver(map[string][]string{"example.com": {publicIP, "2606:4700::1111"}})
	dialer := &redirectDialer{}
	p, rec := startProxy(t, Config{Resolver: res, Dialer: dialer})
	resp, _, _ := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 502 {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if d := dialer.dialed(); len(d) != 2 || d[0] != publicIP+":443" || d[1] != "[2606:4700::1111]:443" {
		t.Errorf("dialled %v, want both checked addresses in order", d)
	}
	ev := rec.wait(t, 2)
	if ev[0].Decision != Allow || ev[1].Decision != Closed || !strings.Contains(ev[1].Reason, "cannot connect") || ev[1].Addr.IsValid() {
		t.Errorf("events %+v", ev)
	}
}

// Slowloris: a header dripped in never completes; the deadline covers the
// whole header, so the drip does not extend it.
func TestHeaderTimeout(t *testing.T) {
	p, rec := startProxy(t, Config{HeaderTimeout: 300 * time.Millisecond})
	c, err := net.Dial("unix", p.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := io.WriteString(c, "X-Drip: a\r\n"); err != nil {
					return
				}
			}
		}
	}()
	// The drip never stops: an answer at all proves the deadline held (the
	// read deadline is only a safety net).
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 408 ") {
		t.Errorf("response %q, want 408", b)
	}
	ev := rec.wait(t, 1)
	if ev[0].Decision != Deny || !strings.Contains(ev[0].Reason, "not received within") {
		t.Errorf("event %+v", ev[0])
	}
}

func TestHeaderTooLarge(t *testing.T) {
	p, rec := startProxy(t, Config{MaxHeaderBytes: 1024})
	resp, _, _ := exchange(t, p, "CONNECT example.com:443 HTTP/1.1\r\nX-Big: "+strings.Repeat("a", 2000)+"\r\n\r\n")
	if resp.StatusCode != 431 {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
	if ev := rec.wait(t, 1); ev[0].Decision != Deny || !strings.Contains(ev[0].Reason, "over 1024 bytes") {
		t.Errorf("event %+v", ev[0])
	}
}

// Over the cap a connection gets 503 at once; the cap frees up again.
func TestConcurrencyCap(t *testing.T) {
	p, rec := startProxy(t, Config{MaxConns: 2})
	var idle []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("unix", p.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.clients == 2 })
	resp, _, _ := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	ev := rec.wait(t, 1)
	if ev[0].Decision != Deny || !strings.Contains(ev[0].Reason, "too many concurrent connections (limit 2)") {
		t.Errorf("event %+v", ev[0])
	}
	for _, c := range idle {
		c.Close()
	}
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.clients == 0 })
	resp, _, _ = exchange(t, p, connect("evil.example.net:443"))
	if resp.StatusCode != 403 {
		t.Errorf("after the cap freed: status %d, want 403", resp.StatusCode)
	}
}

// An idle tunnel is closed after IdleTimeout, no earlier; a tunnel opened
// at the same time that keeps moving bytes (echoed) more often than that
// outlives it and two idle periods, and is closed in turn once it idles.
//
// The proxy's idle timer and the test's writes share the machine, so no
// margin makes this load-proof by itself: a stall of the whole machine
// longer than IdleTimeout legitimately closes a busy tunnel. The test
// therefore decides from what it saw itself. Every transfer of a byte
// happens between the test's write of it and its reading of the echo, so
// a correct proxy can close the busy tunnel only after at least
// IdleTimeout has passed since the test's write of the last echoed byte.
// A closure sooner than that is the proxy's fault and fails; a later one
// means the test itself was stalled, and the attempt is repeated with a
// fresh proxy (skipped after idleAttempts such stalls).
func TestIdleTimeout(t *testing.T) {
	const (
		idle         = time.Second
		pause        = idle / 20 // between the busy tunnel's round trips
		idleAttempts = 5
	)
	for attempt := 1; ; attempt++ {
		stall := idleTimeoutAttempt(t, idle, pause)
		if stall == "" {
			return
		}
		t.Logf("attempt %d: %s", attempt, stall)
		if attempt == idleAttempts {
			t.Skipf("the machine stalled for more than the %v idle timeout in each of %d attempts; not verified", idle, attempt)
		}
	}
}

// idleTimeoutAttempt runs TestIdleTimeout once and returns "" when it
// could decide, or why it could not (the test was stalled).
func idleTimeoutAttempt(t *testing.T, idle, pause time.Duration) (stall string) {
	t.Helper()
	res := newResolver(map[string][]string{"example.com": {publicIP}})
	p, rec := startProxy(t, Config{Resolver: res, Dialer: &redirectDialer{to: echoServer(t)}, IdleTimeout: idle})
	// No deadlines of the test's own on either tunnel, but a safety net
	// for a proxy that never closes them.
	const safety = time.Minute
	idleSent := time.Now()
	resp, idleConn, idleR := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	idleConn.SetDeadline(time.Now().Add(safety))
	// lastEchoed is when the test wrote the last byte that came back (at
	// first, when it sent the CONNECT): the proxy's last transfer on the
	// busy tunnel was no earlier.
	lastEchoed := time.Now()
	resp, busy, busyR := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	busyOpen := time.Now()
	busy.SetDeadline(time.Now().Add(2 * safety)) // after the idle tunnel's

	type closed struct {
		at  time.Time
		err error
	}
	idleClosed := make(chan closed, 1)
	go func() {
		_, err := idleR.ReadByte()
		idleClosed <- closed{time.Now(), err}
	}()

	// Busy until the idle tunnel is closed and two idle periods have
	// passed since the busy one opened.
	var idleEnd *closed
	sent := 0
	for idleEnd == nil || time.Since(busyOpen) < 2*idle {
		select {
		case c := <-idleClosed:
			idleEnd = &c
		default:
		}
		wrote := time.Now()
		_, err := io.WriteString(busy, "x")
		if err == nil {
			_, err = busyR.ReadByte()
		}
		if err != nil {
			gone := time.Since(lastEchoed)
			if gone < idle {
				t.Fatalf("the busy tunnel was closed %v after the test wrote its last echoed byte (idle timeout %v): %v", gone, idle, err)
			}
			return fmt.Sprintf("the busy tunnel was closed %v after the test wrote its last echoed byte: the test was stalled", gone)
		}
		lastEchoed = wrote
		sent++
		time.Sleep(pause)
	}
	if errors.Is(idleEnd.err, os.ErrDeadlineExceeded) || idleEnd.err == nil {
		t.Fatalf("read from the idle tunnel: %v, want it closed by the proxy", idleEnd.err)
	}
	// No earlier than the timeout: the proxy's idle period began after the
	// test sent the CONNECT.
	if lived := idleEnd.at.Sub(idleSent); lived < idle {
		t.Fatalf("the idle tunnel was closed %v after it was opened, before the %v idle timeout", lived, idle)
	}

	// Now the busy tunnel idles: closed by the proxy, not the safety net.
	if _, err := busyR.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from the busy tunnel once idle: %v, want it closed by the proxy", err)
	}
	ev := rec.wait(t, 4)
	var bytesOut []int64
	for _, e := range ev {
		if e.Decision != Closed {
			continue
		}
		if !strings.Contains(e.Reason, "idle timeout") {
			t.Errorf("closed event %+v, want an idle timeout", e)
		}
		bytesOut = append(bytesOut, e.BytesOut)
	}
	slices.Sort(bytesOut)
	if !slices.Equal(bytesOut, []int64{0, int64(sent)}) {
		t.Errorf("closed events with %v bytes out, want [0 %d]: %+v", bytesOut, sent, ev)
	}
	return ""
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close ends live tunnels, audits them, and proves the teardown.
func TestCloseTearsDown(t *testing.T) {
	res := newResolver(map[string][]string{"example.com": {publicIP}})
	rec := &recorder{}
	p, err := Start(context.Background(), Config{Allowed: []string{"example.com"}, SocketDir: shortTempDir(t), Audit: rec.audit,
		Resolver: res, Dialer: &redirectDialer{to: echoServer(t)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p.Dir(), p.SocketPath()} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]os.FileMode{true: os.ModeDir | 0o700, false: os.ModeSocket | 0o666}[path == p.Dir()]; fi.Mode() != want {
			t.Errorf("%s mode %v, want %v", path, fi.Mode(), want)
		}
	}
	resp, c, br := exchange(t, p, connect("example.com:443"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	half, err := net.Dial("unix", p.SocketPath()) // mid-header
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	io.WriteString(half, "CONNECT exa")
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.clients == 2 })

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("tunnel after Close: %v, want EOF", err)
	}
	if _, err := os.Lstat(p.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
	if _, err := os.Lstat(p.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir after Close: %v", err)
	}
	if _, err := net.Dial("unix", p.SocketPath()); err == nil {
		t.Error("connected after Close")
	}
	if p.live.Load() != 0 {
		t.Errorf("%d live connection goroutines", p.live.Load())
	}
	var closed, denied int
	for _, e := range rec.wait(t, 3) {
		switch {
		case e.Decision == Closed && e.Reason == "proxy closed":
			closed++
		case e.Decision == Deny && e.Reason == "proxy closed before a complete request":
			denied++
		}
	}
	if closed != 1 || denied != 1 {
		t.Errorf("events %+v, want the tunnel closed and the half request denied", rec.events)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close reports a teardown it could not verify.
func TestCloseReportsUnverifiedTeardown(t *testing.T) {
	p, err := Start(context.Background(), Config{Allowed: []string{"example.com"}, SocketDir: shortTempDir(t), Audit: (&recorder{}).audit})
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(p.Dir(), "stray")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "socket directory") {
		t.Fatalf("Close = %v, want an unverified teardown naming the directory", err)
	}
	if _, err := os.Lstat(p.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
}

// Cancelling Start's context tears the proxy down; Close reports it.
func TestContextCancelTearsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Config{Allowed: []string{"example.com"}, SocketDir: shortTempDir(t), Audit: (&recorder{}).audit})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitFor(t, func() bool { _, err := os.Lstat(p.Dir()); return errors.Is(err, os.ErrNotExist) })
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	dir := shortTempDir(t)
	audit := (&recorder{}).audit
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Allowed: []string{"*.example.com"}, SocketDir: dir, Audit: audit}, `"*.example.com": wildcards`},
		{Config{Allowed: []string{"example.com"}, SocketDir: dir}, "Audit is required"},
		{Config{Allowed: []string{"example.com"}, SocketDir: "rel", Audit: audit}, "not an absolute path"},
		{Config{Allowed: []string{"example.com"}, SocketDir: filepath.Join(dir, "missing"), Audit: audit}, "no such file"},
		{Config{Allowed: []string{"example.com"}, SocketDir: file, Audit: audit}, "not a directory"},
	} {
		p, err := Start(context.Background(), tc.cfg)
		if err == nil {
			p.Close()
			t.Errorf("%+v: started", tc.cfg)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q, want %q", err, tc.want)
		}
	}
	long := filepath.Join(dir, strings.Repeat("d", 90))
	os.Mkdir(long, 0o700)
	if _, err := Start(context.Background(), Config{Allowed: []string{"example.com"}, SocketDir: long, Audit: audit}); err == nil || !strings.Contains(err.Error(), "longer than 107") {
		t.Errorf("long socket path: %v", err)
	}
	if ents, _ := os.ReadDir(long); len(ents) != 0 {
		t.Errorf("left %v behind", ents)
	}
}

var _ = http.StatusOK

// The default dialer refuses, just before connect(2), any address the checks
// would: a second line should a name or an unchecked address reach it.
func TestDefaultDialerRechecks(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:443", "loopback"},
		{"[::1]:443", "loopback"},
		{"169.254.169.254:443", "link-local"},
		{"93.184.215.14:80", "port 80"},
		{"example.com:443", "not an IP address"},
	} {
		if err := recheck("tcp", tc.addr, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("recheck(%s) = %v, want %q", tc.addr, err, tc.want)
		}
	}
	if err := recheck("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("public address: %v", err)
	}
	// Wired in: the default dialer cannot reach a loopback listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, _ := startProxy(t, Config{})
	if _, err := p.cfg.Dialer.DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "egress dial") {
		t.Errorf("default dialer to %s: %v", ln.Addr(), err)
	}
}
