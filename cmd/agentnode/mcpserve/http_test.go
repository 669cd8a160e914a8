package mcpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/pluginhost"
)

func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		in, want string
		remote   bool
		err      error
	}{
		{":0", "127.0.0.1:0", false, nil},
		{"localhost:8765", "127.0.0.1:8765", false, nil},
		{"127.0.0.1:8765", "127.0.0.1:8765", false, nil},
		{"127.1.2.3:1", "127.1.2.3:1", false, nil},
		{"[::1]:0", "[::1]:0", false, nil},
		{"0.0.0.0:0", "", false, ErrRemoteAddr},
		{"[::]:0", "", false, ErrRemoteAddr},
		{"192.0.2.1:80", "", false, ErrRemoteAddr},
		{"example.com:80", "", false, ErrRemoteAddr},
		{"0.0.0.0:0", "0.0.0.0:0", true, nil},
		{"8765", "", false, nil},            // no port: refused (not ErrRemoteAddr)
		{"127.0.0.1:99999", "", false, nil}, // bad port: refused
	} {
		got, err := ListenAddr(c.in, c.remote)
		switch {
		case c.err != nil && !errors.Is(err, c.err):
			t.Errorf("ListenAddr(%q, %v): %q, %v; want %v", c.in, c.remote, got, err, c.err)
		case c.want == "" && err == nil:
			t.Errorf("ListenAddr(%q, %v): %q accepted", c.in, c.remote, got)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("ListenAddr(%q, %v): %q, %v; want %q", c.in, c.remote, got, err, c.want)
		}
	}
}

// Concurrent first uses agree on one token, later ones reuse it, and the
// file is 0600.
func TestTokenCreatedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], errs[i] = Token(dir)
		}()
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] || len(toks[i]) != 43 {
			t.Fatalf("token %d: %q, %v (first %q)", i, toks[i], errs[i], toks[0])
		}
	}
	fi, err := os.Stat(TokenPath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v", fi, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("left behind in the home: %v", ents)
	}
	if again, err := Token(dir); err != nil || again != toks[0] {
		t.Fatalf("reuse: %q, %v", again, err)
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", 40) + " b", strings.Repeat("é", 40)} {
		if err := os.WriteFile(TokenPath(dir), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Token(dir); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("token file %q: %v, want ErrTokenInvalid", bad, err)
		}
	}
	if err := os.Remove(TokenPath(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(TokenPath(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Token(dir); !errors.Is(err, ErrTokenUnsafe) {
		t.Errorf("a directory: %v, want ErrTokenUnsafe", err)
	}
}

// runHTTP serves a Server (empty home: no tools) on ln with o.
func runHTTP(t *testing.T, ln net.Listener, o HTTPOptions) {
	t.Helper()
	home := t.TempDir()
	bin := t.TempDir()
	srv := New(Options{
		Kernel: dispatch.Kernel{HomeDir: home, Environ: []string{"PATH=/usr/bin:/bin"}, StageTimeout: 5 * time.Second},
		NewPlugins: func() *pluginhost.Host {
			return pluginhost.New(pluginhost.Options{HomeDir: home, BinDir: bin})
		},
		Version:      "test",
		PollInterval: -1,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.RunHTTP(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunHTTP: %v", err)
		}
		srv.Close()
	})
}

func status(t *testing.T, u, host, origin, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize",`+
		`"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// --http-host names are accepted in Host and Origin; IPv6 loopback works
// like IPv4; other paths are not served.
func TestHTTPHostsAndIPv6(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef0123456789a"
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	runHTTP(t, ln, HTTPOptions{Token: tok, Hosts: []string{"agent.internal"}})
	port := ln.Addr().(*net.TCPAddr).Port
	u := "http://" + ln.Addr().String() + HTTPPath
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"", "", http.StatusOK},
		{"localhost:" + itoa(port), "", http.StatusOK},
		{"agent.internal:" + itoa(port), "http://agent.internal", http.StatusOK},
		{"AGENT.internal.", "", http.StatusOK},
		{"agent.internal.evil.example", "", http.StatusForbidden},
		{"", "http://agent.internal.evil.example", http.StatusForbidden},
		{"[::1]:" + itoa(port+1), "", http.StatusForbidden},
		{"", "http://[::1]:9", http.StatusOK},
	} {
		if got := status(t, u, c.host, c.origin, tok); got != c.want {
			t.Errorf("Host %q Origin %q: %d, want %d", c.host, c.origin, got, c.want)
		}
	}
	if got := status(t, "http://"+ln.Addr().String()+"/other", "", "", tok); got != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
